"""label, fanned out: `label_shards` plans the shards, `label_shard` ranks shard i of n
(`r2adapter.label.annotate.rank_shard`: dense and graph retrieval to the label depth, the
expensive half), `label_merge` joins the rankings (`merge_rankings`) and does the other
half (`r2adapter.label.step.label_from_rankings`): both rules labelled and stored in
Postgres, the chosen rule's file exported (labels/<dataset>.jsonl, what DVC tracks) and its
statistics saved (reports/labels/<dataset>.json). `r2a label` is the same two halves with
one shard, so the merged file is byte for byte the one `r2a label` writes.
"""

from typing import NamedTuple

from kfp.dsl import Dataset, Input, Metrics, Output

from components._base import r2a_component


@r2a_component
def label_shards(n_shards: int, index_version: int) -> list[dict]:
    """The items `dsl.ParallelFor` fans out over: {shard, n_shards, index_version} for
    shard 0..n-1. The index version travels in the items rather than as a separate input
    of the loop body (kfp.local overwrites every task output fed into a loop with the loop
    item; the Kubeflow backend does not, and works either way)."""
    if not 1 <= n_shards <= 256:
        raise ValueError(f"n_label_shards must be between 1 and 256, not {n_shards}")
    return [
        {"shard": i, "n_shards": n_shards, "index_version": index_version} for i in range(n_shards)
    ]


@r2a_component
def label_shard(
    dataset: str, index_version: int, shard: int, n_shards: int, rankings: Output[Dataset]
) -> int:
    """Dense and graph rankings (ids to the label depth, params.yaml `label:`) of the stored
    queries with complete gold whose position in id order is `shard` modulo `n_shards`,
    written as JSON. Returns the number of queries ranked."""
    import json

    from r2adapter.data.adapters import dataset_name
    from r2adapter.label.annotate import rank_shard

    name = dataset_name(dataset)
    r = rank_shard(name, shard, n_shards, index_version=index_version)
    with open(rankings.path, "w") as f:
        json.dump({"dataset": name, **r.to_json()}, f)
    rankings.metadata.update({"dataset": name, "shard": shard, "queries": len(r.queries)})
    print(f"{name}: shard {shard}/{n_shards}: ranked {len(r.queries)} queries")
    return len(r.queries)


@r2a_component
def label_merge(
    dataset: str,
    shards: Input[list[Dataset]],
    labels: Output[Dataset],
    metrics: Output[Metrics],
) -> NamedTuple("Outputs", [("n_labels", int), ("md5", str)]):
    """Join the shards' rankings (every query exactly once, one index version), label with
    every rule, store them in Postgres, export the default rule's labels; the exported
    JSON-lines file is also this task's `labels` artifact (the input of `train`)."""
    import json
    import shutil
    from collections import namedtuple

    from r2adapter.data.adapters import dataset_name
    from r2adapter.label.annotate import merge_rankings
    from r2adapter.label.step import label_from_rankings

    name = dataset_name(dataset)
    parts = []
    for s in shards:
        with open(s.path) as f:
            parts.append(json.load(f))
    others = sorted({p["dataset"] for p in parts} - {name})
    if others:
        raise RuntimeError(f"{name}: label shards of other datasets {others}")
    r = label_from_rankings(name, merge_rankings(name, parts))
    shutil.copyfile(r.path, labels.path)

    version = r.stats["index_version"]
    labels.metadata.update(
        {"dataset": name, "rule": r.rule, "md5": r.md5, "index_version": version}
    )
    for key, value in r.metrics().items():
        metrics.log_metric(key, value)
    print(f"{name}: {len(r.records)} labels ({r.rule}) from {len(parts)} shards")
    print(f"exported {r.path} (md5 {r.md5})")
    return namedtuple("Outputs", ["n_labels", "md5"])(len(r.records), r.md5)
