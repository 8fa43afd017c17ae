"""`r2a label`: run dense and graph retrieval for every query, label suitability and
preference (R²Adapter §3.2), store in Postgres in one transaction and export a file."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from r2adapter.config import LabelParams
from r2adapter.data.schema import Query
from r2adapter.data.splits import split_of
from r2adapter.errors import R2AError
from r2adapter.index.encoder import get_encoder
from r2adapter.label.rules import RULES
from r2adapter.retrieve.dense import DenseRetriever
from r2adapter.retrieve.graph import GraphRetriever
from r2adapter.store.db import connection
from r2adapter.store.graph_store import require_version
from r2adapter.store.queries import stored_queries

KEEP_TOP = 10  # ranked ids kept per retriever for end-to-end routing evaluation


@dataclass(frozen=True)
class LabelRecord:
    query_id: str
    question: str
    qtype: str
    split: str
    rule: str
    rank_dense: float
    rank_graph: float
    y_dense: bool
    y_graph: bool
    preference: str
    gold: list[str]
    dense_top: list[str]
    graph_top: list[str]


@dataclass(frozen=True)
class Rankings:
    """Both retrievers' rankings to `depth` for each query (shard `shard` of `n_shards`):
    computed once, labelled by any rule."""

    queries: list[Query]
    dense: dict[str, list[str]]
    graph: dict[str, list[str]]
    index_version: int
    shard: int = 0
    n_shards: int = 1

    def to_json(self) -> dict[str, Any]:
        """What a Kubeflow shard task writes; `merge_rankings` reads it back."""
        return {
            "index_version": self.index_version,
            "shard": self.shard,
            "n_shards": self.n_shards,
            "dense": self.dense,
            "graph": self.graph,
        }


def rank_shard(
    dataset: str,
    shard: int = 0,
    n_shards: int = 1,
    depth: int | None = None,
    index_version: int | None = None,
) -> Rankings:
    """Dense and graph rankings to `depth` (params.yaml `label.depth`) of the stored queries
    with complete gold whose position in id order is `shard` modulo `n_shards`: the
    expensive half of labelling, the one a pipeline fans out. `index_version`, when given,
    is the version the caller built; another one is refused."""
    if not 0 <= shard < n_shards:
        raise R2AError(f"shard {shard} is not in 0..{n_shards - 1}")
    version = require_version(dataset)
    if index_version is not None and version.id != index_version:
        raise R2AError(
            f"{dataset}: index version {version.id} is not the {index_version} this run built;"
            " another index build ran concurrently: re-run the pipeline"
        )
    if depth is None:
        from r2adapter.config import label_params

        depth = label_params().depth
    queries = stored_queries(dataset, complete_only=True)
    if not queries:
        raise R2AError(f"dataset '{dataset}' has no queries with complete gold to label")
    enc = get_encoder()
    # Every shard encodes all the questions, in the batches an unsharded run uses: a batch's
    # padding moves embeddings in the last bits, so encoding only the shard's questions
    # could reorder near-ties and the merged labels would differ from `r2a label`'s.
    vecs = enc.encode([q.question for q in queries], progress=True, desc="embed queries")
    dense, graph = DenseRetriever(dataset, enc), GraphRetriever(dataset, enc)
    mine = list(zip(queries, vecs, strict=True))[shard::n_shards]
    d, g = {}, {}
    desc = "label: retrieve" if n_shards == 1 else f"label: retrieve, shard {shard}/{n_shards}"
    for q, v in tqdm(mine, desc=desc, unit="query"):
        d[q.id] = [h.passage_id for h in dense.retrieve(q.question, depth, qvec=v)]
        g[q.id] = [h.passage_id for h in graph.retrieve(q.question, depth, qvec=v)]
    return Rankings([q for q, _ in mine], d, g, version.id, shard, n_shards)


def merge_rankings(dataset: str, parts: Sequence[Rankings | dict[str, Any]]) -> Rankings:
    """The shards' rankings joined, in the stored queries' order (so labelling them gives
    what one unsharded run gives): every shard of one fan-out, one index version, every
    stored query with complete gold exactly once."""
    shards = [p.to_json() if isinstance(p, Rankings) else p for p in parts]
    if not shards:
        raise R2AError(f"{dataset}: no label shards to merge")
    counts = {int(p["n_shards"]) for p in shards}
    seen = sorted(int(p["shard"]) for p in shards)
    if len(counts) != 1 or seen != list(range(counts.pop())):
        raise R2AError(f"{dataset}: label shards {seen} are not shards 0..n-1 of one fan-out")
    versions = sorted({int(p["index_version"]) for p in shards})
    if len(versions) != 1:
        raise R2AError(f"{dataset}: label shards come from different index versions {versions}")
    dense: dict[str, list[str]] = {}
    graph: dict[str, list[str]] = {}
    for p in shards:
        dense.update(p["dense"])
        graph.update(p["graph"])
    queries = stored_queries(dataset, complete_only=True)
    if not queries:
        raise R2AError(f"dataset '{dataset}' has no queries with complete gold to label")
    missing = [q.id for q in queries if q.id not in dense or q.id not in graph]
    if missing or len(dense) != len(queries):
        raise R2AError(
            f"{dataset}: the shards ranked {len(dense)} queries, the store holds {len(queries)}"
            f" ({len(missing)} unranked, e.g. {missing[:3]}): re-run the pipeline"
        )
    return Rankings(queries, dense, graph, versions[0])


def label_rankings(r: Rankings, rule: str, p: LabelParams) -> list[LabelRecord]:
    if rule not in RULES:
        raise R2AError(f"unknown label rule '{rule}': choose one of {', '.join(RULES)}")
    out = []
    for q in r.queries:
        lab = RULES[rule](r.dense[q.id], r.graph[q.id], q.gold_passage_ids, p.depth, p.top_k)
        out.append(
            LabelRecord(
                q.id,
                q.question,
                q.type,
                split_of(q.id, p.split),
                rule,
                lab.rank_dense,
                lab.rank_graph,
                lab.y_dense,
                lab.y_graph,
                lab.preference,
                q.gold_passage_ids,
                r.dense[q.id][:KEEP_TOP],
                r.graph[q.id][:KEEP_TOP],
            )
        )
    return out


def store_labels(dataset: str, records: list[LabelRecord], index_version: int) -> None:
    """Replace this dataset's labels for the rule in one transaction."""
    rule = records[0].rule
    with connection() as conn, conn.transaction():
        conn.execute("DELETE FROM labels WHERE dataset = %s AND rule = %s", (dataset, rule))
        conn.cursor().executemany(
            "INSERT INTO labels (dataset, query_id, rule, index_version, rank_dense, rank_graph,"
            " y_dense, y_graph, preference, split, dense_top, graph_top, question, qtype)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (
                    dataset,
                    r.query_id,
                    r.rule,
                    index_version,
                    r.rank_dense,
                    r.rank_graph,
                    r.y_dense,
                    r.y_graph,
                    r.preference,
                    r.split,
                    r.dense_top,
                    r.graph_top,
                    r.question,
                    r.qtype,
                )
                for r in records
            ],
        )


def export_labels(path: Path, records: list[LabelRecord]) -> str:
    """Write JSON lines atomically; returns the file's md5 (what DVC records)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(json.dumps(asdict(r), sort_keys=True) + "\n" for r in records)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(body)
    tmp.replace(path)
    return hashlib.md5(body.encode()).hexdigest()


def read_labels(path: Path) -> list[LabelRecord]:
    if not path.is_file():
        raise R2AError(f"{path}: label file not found: run `r2a label` first")
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        try:
            out.append(LabelRecord(**json.loads(line)))
        except (json.JSONDecodeError, TypeError) as e:
            raise R2AError(f"{path}: line {i} is not a label record ({e})") from None
    return out


def label_file(dataset: str) -> Path:
    """Where `dataset`'s two-way labels are written (a DVC output for the pipeline's)."""
    from r2adapter.config import settings

    return settings().root / "labels" / f"{dataset}.jsonl"


def db_labels(dataset: str, rule: str, split: str | None = None) -> list[LabelRecord]:
    """Labels stored for a dataset and rule (all splits when `split` is None or "all"): the
    database's rows, else (none stored: the label stage's outputs came from the DVC remote,
    not from a run on this machine) its label file's records of that rule."""
    with connection() as conn:
        rows = conn.execute(
            "SELECT l.query_id, l.question, l.qtype, l.split, l.rule, l.rank_dense, l.rank_graph,"
            " l.y_dense, l.y_graph, l.preference, q.gold_passage_ids, l.dense_top, l.graph_top"
            " FROM labels l JOIN queries q ON q.dataset = l.dataset AND q.id = l.query_id"
            " WHERE l.dataset = %s AND l.rule = %s AND (%s::text IS NULL OR l.split = %s)"
            " ORDER BY l.query_id",
            (dataset, rule, None if split in (None, "all") else split, split),
        ).fetchall()
    if not rows:
        path = label_file(dataset)
        kept = [
            r
            for r in (read_labels(path) if path.is_file() else [])
            if r.rule == rule and (split in (None, "all") or r.split == split)
        ]
        if kept:
            return sorted(kept, key=lambda r: r.query_id)
        raise R2AError(
            f"no {rule} labels for '{dataset}'"
            f"{'' if split in (None, 'all') else f' in the {split} split'}: "
            f"run `r2a label --dataset {dataset}` first"
        )
    return [
        LabelRecord(
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            r[5],
            r[6],
            r[7],
            r[8],
            r[9],
            list(r[10]),
            list(r[11]),
            list(r[12]),
        )
        for r in rows
    ]
