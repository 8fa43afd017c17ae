"""label, fanned out: `label_shards` plans the shards, `label_shard` ranks shard i of n
(dense and graph retrieval to the label depth, the expensive part), `label_merge` joins
the rankings and does what `r2a label` does after ranking: both rules labelled and stored
in Postgres, the chosen rule's file exported (labels/<dataset>.jsonl, what DVC tracks) and
its statistics saved (reports/labels/<dataset>.json).

`r2adapter.label.step.run_label` ranks every query in one process, so shard and merge are
built here on `r2adapter.label.annotate` (Rankings, label_rankings, store_labels,
export_labels) and `r2adapter.label.step` (label_paths, compare_rules); the ranking loop in
`label_shard` mirrors `annotate.rank_queries` restricted to one shard.
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

    from tqdm import tqdm

    from r2adapter.config import label_params
    from r2adapter.data.adapters import dataset_name
    from r2adapter.evaluate.retrieval import stored_queries
    from r2adapter.index.encoder import get_encoder
    from r2adapter.retrieve.dense import DenseRetriever
    from r2adapter.retrieve.graph import GraphRetriever
    from r2adapter.store.graph_store import require_version

    if not 0 <= shard < n_shards:
        raise ValueError(f"shard {shard} is not in 0..{n_shards - 1}")
    name = dataset_name(dataset)
    version = require_version(name)
    if version.id != index_version:
        raise RuntimeError(
            f"{name}: index version {version.id} is not the {index_version} this run built;"
            " another index build ran concurrently: re-run the pipeline"
        )
    depth = label_params().depth
    queries = stored_queries(name, complete_only=True)[shard::n_shards]
    dense: dict[str, list[str]] = {}
    graph: dict[str, list[str]] = {}
    if queries:
        enc = get_encoder()
        dense_r, graph_r = DenseRetriever(name, enc), GraphRetriever(name, enc)
        vecs = enc.encode([q.question for q in queries], progress=True, desc="embed queries")
        for q, v in tqdm(list(zip(queries, vecs, strict=True)), desc=f"shard {shard}"):
            dense[q.id] = [h.passage_id for h in dense_r.retrieve(q.question, depth, qvec=v)]
            graph[q.id] = [h.passage_id for h in graph_r.retrieve(q.question, depth, qvec=v)]
    with open(rankings.path, "w") as f:
        json.dump(
            {
                "dataset": name,
                "index_version": version.id,
                "shard": shard,
                "n_shards": n_shards,
                "depth": depth,
                "dense": dense,
                "graph": graph,
            },
            f,
        )
    rankings.metadata.update({"dataset": name, "shard": shard, "queries": len(queries)})
    print(f"{name}: shard {shard}/{n_shards}: ranked {len(queries)} queries to depth {depth}")
    return len(queries)


@r2a_component
def label_merge(
    dataset: str,
    shards: Input[list[Dataset]],
    labels: Output[Dataset],
    metrics: Output[Metrics],
) -> NamedTuple("Outputs", [("n_labels", int), ("md5", str)]):
    """Join the shards' rankings (every query exactly once, one index version), label with
    both rules, store both in Postgres, export the default rule's labels; the exported
    JSON-lines file is also this task's `labels` artifact (the input of `train`)."""
    import json
    import shutil
    from collections import namedtuple

    from r2adapter.config import label_params
    from r2adapter.data.adapters import dataset_name
    from r2adapter.evaluate.retrieval import stored_queries
    from r2adapter.label.annotate import Rankings, export_labels, label_rankings, store_labels
    from r2adapter.label.rules import RULES
    from r2adapter.label.stats import label_stats
    from r2adapter.label.step import compare_rules, label_paths

    name = dataset_name(dataset)
    params = label_params()
    parts = []
    for s in shards:
        with open(s.path) as f:
            parts.append(json.load(f))
    if not parts:
        raise RuntimeError(f"{name}: no label shards to merge")
    n_shards = {p["n_shards"] for p in parts}
    versions = {p["index_version"] for p in parts}
    seen = sorted(p["shard"] for p in parts)
    if len(n_shards) != 1 or seen != list(range(next(iter(n_shards)))):
        raise RuntimeError(f"{name}: label shards {seen} do not cover 0..{max(n_shards) - 1}")
    if len(versions) != 1 or {p["dataset"] for p in parts} != {name}:
        raise RuntimeError(f"{name}: label shards come from different indexes {sorted(versions)}")
    dense: dict[str, list[str]] = {}
    graph: dict[str, list[str]] = {}
    for p in parts:
        dense.update(p["dense"])
        graph.update(p["graph"])
    queries = stored_queries(name, complete_only=True)
    missing = [q.id for q in queries if q.id not in dense]
    if missing or len(dense) != len(queries):
        raise RuntimeError(
            f"{name}: the shards ranked {len(dense)} queries, the store holds {len(queries)}"
            f" ({len(missing)} unranked, e.g. {missing[:3]}): re-run the pipeline"
        )
    if not queries:
        raise RuntimeError(f"dataset '{name}' has no queries with complete gold to label")
    version = versions.pop()
    rankings = Rankings(queries, dense, graph, version)

    by_rule = {rule: label_rankings(rankings, rule, params) for rule in RULES}
    for recs in by_rule.values():  # both rules stored: evaluation can use either
        store_labels(name, recs, version)
    records = by_rule[params.rule]
    path, stats_path = label_paths(name)
    md5 = export_labels(path, records)
    comparison = compare_rules(by_rule)
    stats = {
        "dataset": name,
        "rule": params.rule,
        "index_version": version,
        "label_md5": md5,
        **label_stats(records, params.top_k),
        "rule_comparison": comparison,
    }
    stats_path.parent.mkdir(parents=True, exist_ok=True)
    stats_path.write_text(json.dumps(stats, indent=2) + "\n")
    shutil.copyfile(path, labels.path)

    labels.metadata.update(
        {"dataset": name, "rule": params.rule, "md5": md5, "index_version": version}
    )
    metrics.log_metric("labels", len(records))
    for split in ("train", "val", "test"):
        metrics.log_metric(f"{split}_samples", sum(r.split == split for r in records))
    for rule, m in comparison.items():
        for key, value in m.items():
            metrics.log_metric(f"{rule}_{key.replace('@', '_at_')}", round(value, 6))
    print(f"{name}: {len(records)} labels ({params.rule}) from {len(parts)} shards")
    print(f"exported {path} (md5 {md5})")
    return namedtuple("Outputs", ["n_labels", "md5"])(len(records), md5)
