"""The one train-and-register path every router family goes through: one MLflow run owns
the training, its parameters, its test figures and the registered `candidate`; a family
only says how it fits (`Fitted`: the router, its figures, its columns in the one MLflow
model), and every family's `fit` returns the same typed `TrainingReport` (the JSON beside
it, reports/train/<name>.json, its headline metrics, the τ curve where the family has one).

MLflow's run is the model: Databricks' MLOps Stacks trains and deploys every model through
one path; here the two-way routers (r2adapter/twoway/register.py), the k-way router
(r2adapter/kway/registry.py) and ADR's head (r2adapter/adr/registry.py) are three `fit`
functions handed to `train_and_register`."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from r2adapter.data.metrics import metric_key

if TYPE_CHECKING:
    from r2adapter.route.family import ModelColumns


@dataclass
class Fitted:
    """What a family's fit produced inside the run: the model to register, and its figures."""

    model: str  # the MLflow registered model
    columns: ModelColumns  # what its MLflow model loads and answers (registry/pyfunc.py)
    save: Callable[[Path], None]  # writes the trained router into a folder
    test: dict[str, float]  # test-split figures: logged `test_<k>`, in the report
    fields: dict[str, Any]  # the family's own report fields, in the report's order
    metrics: dict[str, float] = field(default_factory=dict)  # headline metrics beside test_*
    gate: dict[str, float] | None = None  # the version's figure tags (None: `test`)
    tags: dict[str, str] = field(default_factory=dict)  # more version tags (label_rule)
    curve: list[dict[str, float]] | None = None  # the τ search at the best step (dvc plots)
    accelerator: str = "cpu"


@dataclass
class TrainingReport:
    """One training of any family: what was registered, in which run, with which figures."""

    router: str  # the family's name (r2adapter/families.py)
    model: str  # the registered model
    version: str
    run_id: str
    seconds: float
    test: dict[str, float]
    fields: dict[str, Any]
    headline: dict[str, float] = field(default_factory=dict)
    curve: list[dict[str, float]] | None = None
    accelerator: str = "cpu"

    def __getattr__(self, name: str) -> Any:
        """A family's own field (`tau`, `best_step`, `gamma`, …) read as an attribute."""
        fields = self.__dict__.get("fields", {})
        if name in fields:
            return fields[name]
        raise AttributeError(name)

    @property
    def kind(self) -> str:
        return self.router

    def to_report(self) -> dict[str, object]:
        """reports/train/<name>.json (a DVC metric): router, version, run, the family's
        fields, seconds, then the test figures."""
        return {
            "router": self.router,
            "version": self.version,
            "run_id": self.run_id,
            **self.fields,
            "seconds": self.seconds,
            **{f"test_{k}": v for k, v in self.test.items()},
        }

    def metrics(self) -> dict[str, float]:
        """The headline metrics a pipeline task logs (Kubeflow: no '@' in a name)."""
        return {
            **self.headline,
            "train_seconds": round(self.seconds, 1),
            **{f"test_{metric_key(k)}": round(v, 6) for k, v in self.test.items()},
        }


def train_and_register(
    router: str,
    dataset: str,
    params: Mapping[str, Any],
    fit: Callable[[Any], Fitted],
    tags: Mapping[str, str] | None = None,
    started: float | None = None,
) -> TrainingReport:
    """One MLflow run named `<router>-<dataset>`: `params` logged, `fit(run)` trains (and may
    log its own curves and artifacts into the run), the test figures logged, the model
    registered as `candidate` (r2adapter/registry/models.py `register_candidate`) with its
    figures and `tags` on the version; the report (`started`: when the family began
    preparing, a `time.perf_counter()`, so its seconds count reading the labels)."""
    import mlflow

    from r2adapter.registry.models import client, register_candidate
    from r2adapter.registry.tracking import mlflow_setup

    t0 = time.perf_counter() if started is None else started
    exp = mlflow_setup()
    with mlflow.start_run(experiment_id=exp, run_name=f"{router}-{dataset}") as run:
        mlflow.log_params({**params, "dataset": dataset})
        for k, v in (tags or {}).items():
            mlflow.set_tag(k, v)
        fitted = fit(run)
        mlflow.log_metrics({f"test_{metric_key(k)}": v for k, v in fitted.test.items()})
        gate = fitted.test if fitted.gate is None else fitted.gate
        version = register_candidate(
            fitted.model, router, fitted.columns, fitted.save, dataset, gate
        )
    for k, v in fitted.tags.items():
        client().set_model_version_tag(fitted.model, version, k, v)
    return TrainingReport(
        router,
        fitted.model,
        version,
        run.info.run_id,
        time.perf_counter() - t0,
        fitted.test,
        fitted.fields,
        fitted.metrics,
        fitted.curve,
        fitted.accelerator,
    )
