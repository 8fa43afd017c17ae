"""The train + register steps: one MLflow run per training, the model registered with
alias `candidate`."""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from r2adapter.config import RouterParams, settings
from r2adapter.data.metrics import metric_key
from r2adapter.evaluate.plots import plot_pr, plot_threshold_search
from r2adapter.evaluate.routing import routing_metrics
from r2adapter.label.annotate import LabelRecord, read_labels
from r2adapter.label.step import label_paths
from r2adapter.registry.models import GATE_METRICS, client, model_name, register_candidate
from r2adapter.registry.tracking import mlflow_setup
from r2adapter.route.kinds import router_kind
from r2adapter.train.fit import TrainResult, train_router


@dataclass
class TrainReport:
    kind: str
    version: str
    run_id: str
    tau: float
    best_step: int
    steps: int
    accelerator: str
    test: dict[str, float]
    seconds: float
    curve: list[dict[str, float]]  # Score(τ) at the best step, for `dvc plots`

    def to_report(self) -> dict[str, object]:
        """reports/train/<backbone>.json (a DVC metric): these keys, in this order; the
        curve goes to its own file (`curve`)."""
        return {
            "router": self.kind,
            "version": self.version,
            "run_id": self.run_id,
            "tau": self.tau,
            "best_step": self.best_step,
            "steps": self.steps,
            "seconds": self.seconds,
            **{f"test_{k}": v for k, v in self.test.items()},
        }

    def metrics(self) -> dict[str, float]:
        return {
            "tau_star": self.tau,
            "best_step": self.best_step,
            "steps": self.steps,
            "train_seconds": round(self.seconds, 1),
            **{f"test_{metric_key(k)}": round(v, 6) for k, v in self.test.items()},
        }


def test_metrics(result: TrainResult, records: list[LabelRecord]) -> dict[str, float]:
    test = [r for r in records if r.split == "test"]
    if not test:
        return {}
    return routing_metrics(np.asarray(result.router.route([r.question for r in test])), test)


def train_and_register(
    dataset: str, params: RouterParams, label_file: Path | None = None, progress: bool = True
) -> TrainReport:
    import time

    import mlflow
    from lightning.pytorch.loggers import MLFlowLogger

    t0 = time.perf_counter()
    path = label_file or label_paths(dataset)[0]
    records = read_labels(path)
    label_md5 = _md5(path)
    exp_id = mlflow_setup()
    kind = router_kind(params.backbone)
    with mlflow.start_run(experiment_id=exp_id, run_name=f"{kind}-{dataset}") as run:
        mlflow.log_params(
            {
                **{f"router.{k}": v for k, v in asdict(params).items()},
                "dataset": dataset,
                "label_file": str(
                    path.relative_to(settings().root)
                    if path.is_relative_to(settings().root)
                    else path
                ),
                "label_md5": label_md5,
                "label_rule": records[0].rule,
                "n_train": sum(r.split == "train" for r in records),
                "n_val": sum(r.split == "val" for r in records),
                "n_test": sum(r.split == "test" for r in records),
            }
        )
        mlflow.set_tag("label_dvc_md5", label_md5)
        logger = MLFlowLogger(
            experiment_name="r2a-router",
            run_id=run.info.run_id,
            tracking_uri=mlflow.get_tracking_uri(),
        )
        result = train_router(records, params, logger=logger, progress=progress, dataset=dataset)
        test = test_metrics(result, records)
        mlflow.log_metrics({f"test_{metric_key(k)}": v for k, v in test.items()})
        mlflow.log_metrics(
            {
                "tau_star": result.history.best_tau,
                "best_val_score": result.history.best_score,
                "best_step": result.history.best_step,
            }
        )
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            mlflow.log_artifact(
                str(plot_threshold_search(result.history, t / "threshold.png")), "plots"
            )
            mlflow.log_artifact(str(plot_pr(result.history, t / "val_pr.png")), "plots")
            curve = [
                {
                    "step": p.step,
                    "taus": p.search.taus.tolist(),
                    "scores": p.search.scores.tolist(),
                    "graph_usage": p.search.usage.tolist(),
                }
                for p in result.history.points
            ]
            (t / "threshold_search.json").write_text(json.dumps(curve))
            mlflow.log_artifact(str(t / "threshold_search.json"), "plots")
        from r2adapter.registry.pyfunc import RouterModel

        version = register_candidate(
            model_name(kind),
            RouterModel(),
            result.router.save,
            dataset,
            {metric_key(m): test[m] for m in GATE_METRICS if m in test},
        )
    client().set_model_version_tag(model_name(kind), version, "label_rule", records[0].rule)
    best = next((p for p in result.history.points if p.step == result.history.best_step), None)
    curve = (
        [
            {
                "tau": float(tau),
                "score": float(sc),
                "f1": float(f),
                "recall": float(rc),
                "graph_usage": float(u),
            }
            for tau, sc, f, rc, u in zip(
                best.search.taus,
                best.search.scores,
                best.search.f1,
                best.search.recall,
                best.search.usage,
                strict=True,
            )
        ]
        if best
        else []
    )
    return TrainReport(
        kind,
        version,
        run.info.run_id,
        result.history.best_tau,
        result.history.best_step,
        result.steps,
        result.accelerator,
        test,
        time.perf_counter() - t0,
        curve,
    )


def _md5(path: Path) -> str:
    import hashlib

    return hashlib.md5(path.read_bytes()).hexdigest()
