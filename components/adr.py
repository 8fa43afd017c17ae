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
    import os
    import shutil
    from collections import namedtuple
    from pathlib import Path

    from r2adapter import steps
    from r2adapter.adr.labels import adr_label_path
    from r2adapter.adr.registry import MODEL
    from r2adapter.data.adapters import dataset_name

    def put(src: Path, dest: Path) -> None:  # atomically, unless it is that very file
        if dest.exists() and os.path.samefile(src, dest):
            return
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        shutil.copyfile(src, tmp)
        tmp.replace(dest)

    name = dataset_name(dataset)
    dest = adr_label_path(name)
    put(Path(labels.path), dest)
    # an empty directory uploads no object, so in a cluster it arrives as no path at all
    shipped_dir = Path(corpora_labels.path)
    shipped = (
        sorted(p for p in shipped_dir.iterdir() if p.is_file()) if shipped_dir.is_dir() else []
    )
    for p in shipped:
        put(p, dest.parent / p.name)
    print(f"adr: the corpora's label files: {', '.join(p.name for p in shipped) or 'none'}")
    a = steps.train_adr(name)
    for key, value in a.items():
        if key.startswith("test_"):
            metrics.log_metric(key, float(value))
    print(f"adr: registered {MODEL} v{a['version']} as candidate; γ {a['gamma']}")
    return namedtuple("Outputs", ["name", "version", "run_id"])(MODEL, a["version"], a["run_id"])


@r2a_component
def promote_adr(dataset: str, version: str, metrics: Output[Metrics]) -> bool:
    """True when `champion` moved to `version` in this task; refuses to judge any other
    candidate than the one this run registered."""
    from r2adapter import steps
    from r2adapter.adr.registry import MODEL
    from r2adapter.registry.models import client

    cand = client().get_model_version_by_alias(MODEL, "candidate")
    if str(cand.version) != version:
        raise RuntimeError(
            f"alias candidate of {MODEL} no longer points to v{version}:"
            " another training registered since; re-run the pipeline"
        )
    r = steps.promote("adr", dataset)  # the one promotion skeleton, over ADR's family
    for key, value in (r.candidate_metrics or {}).items():
        metrics.log_metric(f"candidate_{key}", float(value))
    metrics.metadata["reasons"] = "; ".join(r.reasons)
    verb = "promoted" if r.promoted else "kept the champion"
    print(f"adr: {verb}: candidate v{r.candidate}: " + "; ".join(r.reasons))
    return bool(r.promoted)
