"""The two-way routers' training run: trained with the periodic τ search, registered with
alias `candidate` through the one training path (r2adapter/registry/training.py)."""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from r2adapter.config import RouterParams, settings
from r2adapter.data.metrics import metric_key
from r2adapter.evaluate.plots import plot_pr, plot_threshold_search
from r2adapter.evaluate.routing import routing_metrics
from r2adapter.label.annotate import LabelRecord, read_labels
from r2adapter.label.step import label_paths
from r2adapter.registry.models import GATE_METRICS, model_name
from r2adapter.registry.training import Fitted, TrainingReport
from r2adapter.registry.training import train_and_register as train_and_register_run
from r2adapter.route.kinds import router_kind
from r2adapter.train.fit import TrainResult, train_router
from r2adapter.twoway.columns import TWO_WAY_COLUMNS


def test_metrics(result: TrainResult, records: list[LabelRecord]) -> dict[str, float]:
    test = [r for r in records if r.split == "test"]
    if not test:
        return {}
    return routing_metrics(np.asarray(result.router.route([r.question for r in test])), test)


def train_and_register(
    dataset: str, params: RouterParams, label_file: Path | None = None, progress: bool = True
) -> TrainingReport:
    """Train the two-way router of `params.backbone` on the labels with the periodic τ
    search (R²Adapter Algorithm 2), in the one training run every family shares
    (r2adapter/registry/training.py): its curves, plots and threshold search logged into
    the run, registered as `candidate` with the gate figures and the label rule."""
    import time

    import mlflow
    from lightning.pytorch.loggers import MLFlowLogger

    t0 = time.perf_counter()
    path = label_file or label_paths(dataset)[0]
    records = read_labels(path)
    label_md5 = _md5(path)
    kind = router_kind(params.backbone)
    root = settings().root
    logged = {
        **{f"router.{k}": v for k, v in asdict(params).items()},
        "label_file": str(path.relative_to(root) if path.is_relative_to(root) else path),
        "label_md5": label_md5,
        "label_rule": records[0].rule,
        "n_train": sum(r.split == "train" for r in records),
        "n_val": sum(r.split == "val" for r in records),
        "n_test": sum(r.split == "test" for r in records),
    }

    def fit(run: Any) -> Fitted:
        logger = MLFlowLogger(
            experiment_name="r2a-router",
            run_id=run.info.run_id,
            tracking_uri=mlflow.get_tracking_uri(),
        )
        result = train_router(records, params, logger=logger, progress=progress, dataset=dataset)
        test = test_metrics(result, records)
        h = result.history
        mlflow.log_metrics(
            {"tau_star": h.best_tau, "best_val_score": h.best_score, "best_step": h.best_step}
        )
        _log_search(result)
        return Fitted(
            model_name(kind),
            TWO_WAY_COLUMNS,
            result.router.save,
            test,
            {"tau": h.best_tau, "best_step": h.best_step, "steps": result.steps},
            {"tau_star": h.best_tau, "best_step": h.best_step, "steps": result.steps},
            gate={metric_key(m): test[m] for m in GATE_METRICS if m in test},
            tags={"label_rule": records[0].rule},
            curve=_best_curve(result),
            accelerator=result.accelerator,
        )

    return train_and_register_run(
        kind, dataset, logged, fit, tags={"label_dvc_md5": label_md5}, started=t0
    )


def _log_search(result: TrainResult) -> None:
    """The τ search's plots and every evaluation's curve, as artifacts of the active run."""
    import mlflow

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


def _best_curve(result: TrainResult) -> list[dict[str, float]]:
    """Score(τ) at the best step, for `dvc plots`."""
    h = result.history
    best = next((p for p in h.points if p.step == h.best_step), None)
    if best is None:
        return []
    s = best.search
    return [
        {
            "tau": float(tau),
            "score": float(sc),
            "f1": float(f),
            "recall": float(rc),
            "graph_usage": float(u),
        }
        for tau, sc, f, rc, u in zip(s.taus, s.scores, s.f1, s.recall, s.usage, strict=True)
    ]


def _md5(path: Path) -> str:
    import hashlib

    return hashlib.md5(path.read_bytes()).hexdigest()
