"""`r2a label`: run dense and graph retrieval for every query, label suitability and
preference (R²Adapter §3.2), store in Postgres in one transaction and export a file."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm import tqdm

from r2adapter.config import LabelParams
from r2adapter.data.schema import Query
from r2adapter.errors import R2AError
from r2adapter.evaluate.retrieval import stored_queries
from r2adapter.index.encoder import get_encoder
from r2adapter.label.rules import RULES, split_of
from r2adapter.retrieve.dense import DenseRetriever
from r2adapter.retrieve.graph import GraphRetriever
from r2adapter.store.db import connection
from r2adapter.store.graph_store import require_version

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
    """Both retrievers' rankings to `depth` for each query: computed once, labelled by any
    rule."""

    queries: list[Query]
    dense: dict[str, list[str]]
    graph: dict[str, list[str]]
    index_version: int


def rank_queries(dataset: str, depth: int) -> Rankings:
    version = require_version(dataset)
    queries = stored_queries(dataset, complete_only=True)
    if not queries:
        raise R2AError(f"dataset '{dataset}' has no queries with complete gold to label")
    enc = get_encoder()
    dense, graph = DenseRetriever(dataset, enc), GraphRetriever(dataset, enc)
    vecs = enc.encode([q.question for q in queries], progress=True, desc="embed queries")
    d, g = {}, {}
    for q, v in tqdm(list(zip(queries, vecs, strict=True)), desc="label: retrieve", unit="query"):
        d[q.id] = [h.passage_id for h in dense.retrieve(q.question, depth, qvec=v)]
        g[q.id] = [h.passage_id for h in graph.retrieve(q.question, depth, qvec=v)]
    return Rankings(queries, d, g, version.id)


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


def db_labels(dataset: str, rule: str, split: str | None = None) -> list[LabelRecord]:
    """Labels stored for a dataset and rule (all splits when `split` is None or "all")."""
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
