"""label_family: the first step of the branch of a router family that labels its own set
(r2adapter/families.py: a family whose `label_set` is not empty — the k-way router's
strategy labels, ADR's operator labels; any new one), one component for every such family,
the family named by `router`: it writes the family's labels for the dataset
(`family.label`), also as its `labels` artifact, which the family's `train` and `promote`
tasks receive (components/train.py, components/promote.py). The other families train on
the merged two-way labels (components/label.py `label_merge`).
"""

from kfp.dsl import Dataset, Metrics, Output

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
