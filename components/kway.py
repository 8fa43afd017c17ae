"""The cost-aware k-way router's branch (r2adapter/kway, `r2a label` / `r2a train --router
kway` / `r2a promote --router kway`): `label_strategies` ranks every strategy of params.yaml
`kway:` and times it (labels/<dataset>.strategies.jsonl, also its `strategies` artifact),
`train_kway` trains the heads with the periodic threshold search and registers
`r2a-router-kway` as `candidate` (numpy heads on the CPU: no GPU request), `promote_kway`
runs its gate (recall not worse, ms and passages not costlier) and returns whether
`champion` moved, which drives the branch's `deploy`.
"""

from typing import NamedTuple

from kfp.dsl import Dataset, Input, Metrics, Output

from components._base import r2a_component


@r2a_component
def label_strategies(
    dataset: str, index_version: int, strategies: Output[Dataset], metrics: Output[Metrics]
) -> int:
    """Every strategy's passages, recall, full chain, tokens and ms per query with complete
    gold, on index `index_version` (refused when the database holds another). Returns the
    number of queries labelled."""
    import shutil

    from r2adapter.data.adapters import dataset_name
    from r2adapter.kway.labels import label_strategies as run
    from r2adapter.kway.labels import strategy_label_path
    from r2adapter.store.graph_store import require_version

    name = dataset_name(dataset)
    current = require_version(name).id
    if current != index_version:
        raise RuntimeError(f"{name}: the database holds index v{current}, not v{index_version}")
    summary = run(name)
    shutil.copyfile(strategy_label_path(name), strategies.path)
    strategies.metadata.update({"dataset": name, "md5": summary["md5"]})
    for s, m in summary["strategies"].items():  # type: ignore[union-attr]
        metrics.log_metric(f"{s}_recall", m["recall"])
        metrics.log_metric(f"{s}_mean_ms", m["mean_ms"])
    n = int(summary["n_queries"])  # type: ignore[call-overload]
    print(f"{name}: {n} queries labelled over {len(summary['strategies'])} strategies")  # type: ignore[arg-type]
    return n


@r2a_component
def train_kway(
    dataset: str,
    strategies: Input[Dataset],
    corpora_labels: Input[Dataset],
    metrics: Output[Metrics],
) -> NamedTuple("Outputs", [("name", str), ("version", str), ("run_id", str)]):
    """Train on the `strategies` artifact and on the label files of the `corpora_labels`
    directory (the `corpora` task's: kway.train_corpora's labels; each put where `r2a train
    --router kway` reads it) and register the router as `candidate`."""
    from collections import namedtuple

    from r2adapter import steps
    from r2adapter.data.adapters import dataset_name
    from r2adapter.kway.registry import MODEL

    name = dataset_name(dataset)
    shipped = steps.receive_labels("kway", name, strategies.path, corpora_labels.path)
    print(f"kway: the corpora's label files: {', '.join(shipped) or 'none'}")
    k = steps.train_kway(name)
    for key, value in k.items():
        if key.startswith("test_"):
            metrics.log_metric(key, float(value))
    print(f"kway: registered {MODEL} v{k['version']} as candidate; fallback {k['fallback']}")
    return namedtuple("Outputs", ["name", "version", "run_id"])(MODEL, k["version"], k["run_id"])


@r2a_component
def promote_kway(
    dataset: str,
    version: str,
    strategies: Input[Dataset],
    corpora_labels: Input[Dataset],
    metrics: Output[Metrics],
) -> bool:
    """True when `champion` moved to `version` in this task; refuses to judge any other
    candidate than the one this run registered. The gate reads the union's test split:
    the same label artifacts as train_kway, put in labels/ first."""
    from r2adapter import steps
    from r2adapter.kway.registry import MODEL

    steps.require_candidate(MODEL, version)
    steps.receive_labels("kway", dataset, strategies.path, corpora_labels.path)
    k = steps.promote_kway(dataset)
    for key, value in (k.get("candidate_metrics") or {}).items():
        metrics.log_metric(f"candidate_{key}", float(value))
    metrics.metadata["reasons"] = "; ".join(map(str, k["reasons"]))
    verb = "promoted" if k["promoted"] else "kept the champion"
    print(f"kway: {verb}: candidate v{k['candidate']}: " + "; ".join(map(str, k["reasons"])))
    return bool(k["promoted"])
