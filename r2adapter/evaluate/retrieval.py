"""`r2a evaluate retrieval`: dense vs graph on a dataset's complete-gold queries."""

from __future__ import annotations

import time
from dataclasses import dataclass

from tqdm import tqdm

from r2adapter.data.schema import Query
from r2adapter.evaluate.metrics import full_chain, percentile, recall_at_k
from r2adapter.index.encoder import get_encoder
from r2adapter.retrieve.base import Retriever
from r2adapter.retrieve.dense import DenseRetriever
from r2adapter.retrieve.graph import GraphRetriever
from r2adapter.store.db import connection
from r2adapter.store.graph_store import require_version

DEPTH = 5


@dataclass(frozen=True)
class RankedRun:
    """Ranked ids per query for one retriever, with per-query latency in ms."""

    ranked: dict[str, list[str]]
    latency_ms: dict[str, float]


def stored_queries(dataset: str, complete_only: bool = True) -> list[Query]:
    with connection() as conn:
        rows = conn.execute(
            "SELECT id, question, answers, gold_passage_ids, type, source, gold_complete"
            " FROM queries WHERE dataset = %s"
            + (" AND gold_complete" if complete_only else "")
            + " ORDER BY id",
            (dataset,),
        ).fetchall()
    return [Query(r[0], r[1], list(r[2]), list(r[3]), r[4], r[5], r[6]) for r in rows]


def run_retriever(
    retriever: Retriever, queries: list[Query], depth: int, desc: str = ""
) -> RankedRun:
    enc = get_encoder()
    ranked, latency = {}, {}
    for q in tqdm(queries, desc=desc or f"retrieve {retriever.mode}", unit="query"):
        t = time.perf_counter()  # includes encoding the query: what a caller waits for
        hits = retriever.retrieve(q.question, depth, qvec=enc.encode_query(q.question))
        latency[q.id] = (time.perf_counter() - t) * 1000
        ranked[q.id] = [h.passage_id for h in hits]
    return RankedRun(ranked, latency)


def summarize(run: RankedRun, queries: list[Query]) -> dict[str, float]:
    lat = list(run.latency_ms.values())
    n = max(len(queries), 1)
    return {
        "recall@2": sum(recall_at_k(run.ranked[q.id], q.gold_passage_ids, 2) for q in queries) / n,
        "recall@5": sum(recall_at_k(run.ranked[q.id], q.gold_passage_ids, 5) for q in queries) / n,
        "fcr@5": sum(full_chain(run.ranked[q.id], q.gold_passage_ids, 5) for q in queries) / n,
        "latency_ms_p50": percentile(lat, 50),
        "latency_ms_p95": percentile(lat, 95),
    }


def evaluate_retrieval(dataset: str) -> dict[str, object]:
    version = require_version(dataset)
    queries = stored_queries(dataset)
    dense, graph = DenseRetriever(dataset), GraphRetriever(dataset)
    modes = {}
    for r in (dense, graph):
        modes[r.mode] = summarize(run_retriever(r, queries, DEPTH), queries)
    modes["graph"]["fallbacks"] = graph.fallbacks
    return {
        "dataset": dataset,
        "n_queries": len(queries),
        "openie": version.openie,
        "index_version": version.id,
        "modes": modes,
    }
