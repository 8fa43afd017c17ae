"""The branch of a router family that labels its own set (r2adapter/families.py: a family
whose `label_set` is not empty — the k-way router's strategy labels, ADR's operator labels),
one component per step for every such family, the family named by `router`:
`label_family` writes the family's labels for the dataset (`family.label`, also its
`labels` artifact), `train_family` trains and registers it as `candidate` on those labels
and the development corpora's (`steps.train`; numpy/scikit-learn heads on the CPU: no GPU
request), `promote_family` runs the one promotion skeleton over it (`steps.promote`) and
returns whether `champion` moved, which drives the branch's `deploy`. A pod starts with no
labels/: the trainer and the gate put what they read there first (`steps.receive_labels`).
"""

from typing import NamedTuple

from kfp.dsl import Dataset, Input, Metrics, Output

from components._base import r2a_component


@r2a_component
def label_family(
    router: str, dataset: str, index_version: int, labels: Output[Dataset], metrics: Output[Metrics]
) -> int:
    """The family's labels of every query with complete gold, on index `index_version`
    (refused when the database holds another, or when the family wrote none: its summary's
    `skipped`). Each strategy's or operator's recall and mean ms become metrics. Returns the
    number of queries labelled."""
    import shutil

    from r2adapter.data.adapters import dataset_name
    from r2adapter.families import family
    from r2adapter.store.graph_store import require_version

    fam = family(router)
    name = dataset_name(dataset)
    current = require_version(name).id
    if current != index_version:
        raise RuntimeError(f"{name}: the database holds index v{current}, not v{index_version}")
    summary = fam.label(name)
    if summary.get("skipped"):
        raise RuntimeError(f"{name}: no {router} labels: {summary['skipped']}")
    shutil.copyfile(fam.label_path(name), labels.path)
    labels.metadata.update({"dataset": name, "md5": summary["md5"], "router": router})
    for table in summary.values():  # per strategy / operator: {"recall": .., "mean_ms": ..}
        if isinstance(table, dict):
            for s, m in table.items():
                if isinstance(m, dict):
                    for key in ("recall", "mean_ms"):
                        if key in m:
                            metrics.log_metric(f"{s}_{key}", m[key])
    n = int(summary["n_queries"])
    print(f"{name}: {n} queries labelled for {router} (md5 {summary['md5']})")
    return n


@r2a_component
def train_family(
    router: str,
    dataset: str,
    labels: Input[Dataset],
    corpora_labels: Input[Dataset],
    metrics: Output[Metrics],
) -> NamedTuple("Outputs", [("name", str), ("version", str), ("run_id", str)]):
    """Train on the `labels` artifact and on the label files of the `corpora_labels`
    directory (the `corpora` task's: the family's train_corpora; each put where the family
    reads it) and register the family's model as `candidate`."""
    from collections import namedtuple

    from r2adapter import steps
    from r2adapter.data.adapters import dataset_name
    from r2adapter.families import family

    name = dataset_name(dataset)
    model = family(router).model
    shipped = steps.receive_labels(router, name, labels.path, corpora_labels.path)
    print(f"{router}: the corpora's label files: {', '.join(shipped) or 'none'}")
    rep = steps.train_report(steps.train(router, name))
    for key, value in rep.items():
        if key.startswith("test_"):
            metrics.log_metric(key, float(value))
    print(f"{router}: registered {model} v{rep['version']} as candidate; {steps.train_note(rep)}")
    Outputs = namedtuple("Outputs", ["name", "version", "run_id"])
    return Outputs(model, str(rep["version"]), rep["run_id"])


@r2a_component
def promote_family(
    router: str,
    dataset: str,
    version: str,
    labels: Input[Dataset],
    corpora_labels: Input[Dataset],
    metrics: Output[Metrics],
) -> bool:
    """True when `champion` moved to `version` in this task; refuses to judge any other
    candidate than the one this run registered. The gate reads the union's test split:
    the same label artifacts as the trainer's, put in labels/ first."""
    from r2adapter import steps
    from r2adapter.families import family

    steps.require_candidate(family(router).model, version)
    steps.receive_labels(router, dataset, labels.path, corpora_labels.path)
    r = steps.promote(router, dataset)  # the one promotion skeleton
    for key, value in (r.candidate_metrics or {}).items():
        metrics.log_metric(f"candidate_{key}", float(value))
    metrics.metadata["reasons"] = "; ".join(map(str, r.reasons))
    verb = "promoted" if r.promoted else "kept the champion"
    print(f"{router}: {verb}: candidate v{r.candidate}: " + "; ".join(map(str, r.reasons)))
    return bool(r.promoted)
