"""ADR's branch (r2adapter/adr, `r2a label` / `r2a train --router adr` / `r2a promote --router
adr`), as the k-way router's (components/kway.py): `label_adr` runs ADR's three operators on
every query over the index's hypergraph (labels/<dataset>.adr.jsonl, also its `labels`
artifact; the index step builds the hypergraph when params.yaml adr.enabled), `train_adr`
fits the intent classifier's softmax head and registers `r2a-router-adr` as `candidate`
(numpy/scikit-learn on the CPU: no GPU request), `promote_adr` runs the one promotion
skeleton over ADR's family (recall and FCR not worse; tokens, ms and passages not costlier)
and returns whether `champion` moved, which drives the branch's `deploy`.
"""

from typing import NamedTuple

from kfp.dsl import Dataset, Input, Metrics, Output

from components._base import r2a_component


@r2a_component
def label_adr(
    dataset: str, index_version: int, labels: Output[Dataset], metrics: Output[Metrics]
) -> int:
    """ADR's operators on every query with complete gold, on index `index_version` (refused
    when the database holds another, or when no ADR labels could be written: adr.enabled
    false, no hypergraph). Returns the number of queries labelled."""
    import shutil

    from r2adapter.adr.labels import adr_label_path, label_adr
    from r2adapter.data.adapters import dataset_name
    from r2adapter.store.graph_store import require_version

    name = dataset_name(dataset)
    current = require_version(name).id
    if current != index_version:
        raise RuntimeError(f"{name}: the database holds index v{current}, not v{index_version}")
    summary = label_adr(name)
    if summary.get("skipped"):
        raise RuntimeError(f"{name}: no ADR labels: {summary['skipped']}")
    shutil.copyfile(adr_label_path(name), labels.path)
    labels.metadata.update({"dataset": name, "md5": summary["md5"]})
    for op, m in summary["operators"].items():  # type: ignore[union-attr]
        metrics.log_metric(f"{op}_recall", m["recall"])
        metrics.log_metric(f"{op}_mean_ms", m["mean_ms"])
    n = int(summary["n_queries"])  # type: ignore[call-overload]
    print(f"{name}: {n} queries labelled with ADR's operators (md5 {summary['md5']})")
    return n


@r2a_component
def train_adr(
    dataset: str,
    labels: Input[Dataset],
    corpora_labels: Input[Dataset],
    metrics: Output[Metrics],
) -> NamedTuple("Outputs", [("name", str), ("version", str), ("run_id", str)]):
    """Train on the `labels` artifact and on the label files of the `corpora_labels`
    directory (the `corpora` task's: adr.train_corpora's labels; each put where `r2a train
    --router adr` reads it) and register the classifier as `candidate`."""
    from collections import namedtuple

    from r2adapter import steps
    from r2adapter.adr.registry import MODEL
    from r2adapter.data.adapters import dataset_name

    name = dataset_name(dataset)
    shipped = steps.receive_labels("adr", name, labels.path, corpora_labels.path)
    print(f"adr: the corpora's label files: {', '.join(shipped) or 'none'}")
    a = steps.train_adr(name)
    for key, value in a.items():
        if key.startswith("test_"):
            metrics.log_metric(key, float(value))
    print(f"adr: registered {MODEL} v{a['version']} as candidate; γ {a['gamma']}")
    return namedtuple("Outputs", ["name", "version", "run_id"])(MODEL, a["version"], a["run_id"])


@r2a_component
def promote_adr(
    dataset: str,
    version: str,
    labels: Input[Dataset],
    corpora_labels: Input[Dataset],
    metrics: Output[Metrics],
) -> bool:
    """True when `champion` moved to `version` in this task; refuses to judge any other
    candidate than the one this run registered. The gate reads the union's test split:
    the same label artifacts as train_adr, put in labels/ first."""
    from r2adapter import steps
    from r2adapter.adr.registry import MODEL

    steps.require_candidate(MODEL, version)
    steps.receive_labels("adr", dataset, labels.path, corpora_labels.path)
    r = steps.promote("adr", dataset)  # the one promotion skeleton, over ADR's family
    for key, value in (r.candidate_metrics or {}).items():
        metrics.log_metric(f"candidate_{key}", float(value))
    metrics.metadata["reasons"] = "; ".join(r.reasons)
    verb = "promoted" if r.promoted else "kept the champion"
    print(f"adr: {verb}: candidate v{r.candidate}: " + "; ".join(r.reasons))
    return bool(r.promoted)
