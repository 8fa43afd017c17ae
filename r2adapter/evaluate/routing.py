"""Routing metrics on a labelled split: graph-class F1/recall against the preference labels,
graph usage, end-to-end hybrid Recall@k from both retrievers' stored rankings, latency."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from r2adapter.data.metrics import percentile, recall_at_k
from r2adapter.evaluate.timing import time_per_query
from r2adapter.label.annotate import LabelRecord
from r2adapter.route.base import Router
from r2adapter.route.threshold import f1_recall


def routing_metrics(
    graph: np.ndarray, records: Sequence[LabelRecord], k: int = 5
) -> dict[str, float]:
    truth = np.array([r.preference == "graph" for r in records])
    precision, recall, f1 = f1_recall(graph.astype(bool), truth)
    hybrid = [
        recall_at_k(r.graph_top if g else r.dense_top, r.gold, k)
        for r, g in zip(records, graph, strict=True)
    ]
    hybrid2 = [
        recall_at_k(r.graph_top if g else r.dense_top, r.gold, 2)
        for r, g in zip(records, graph, strict=True)
    ]
    return {
        "n": len(records),
        "graph_usage": float(np.mean(graph)) if len(graph) else 0.0,
        "precision_graph": precision,
        "recall_graph": recall,
        "f1_graph": f1,
        f"recall@{k}": float(np.mean(hybrid)) if hybrid else 0.0,
        "recall@2": float(np.mean(hybrid2)) if hybrid2 else 0.0,
    }


def time_router(
    router: Router, records: Sequence[LabelRecord], embeddings: np.ndarray | None
) -> tuple[np.ndarray, list[float]]:
    """Route one query at a time, as the service does; returns decisions and ms per query
    (the one timer and its thread policy: r2adapter/evaluate/timing.py).

    The embedding router is timed on the query embedding the dense retriever computes anyway.
    """

    def one(i: int) -> bool:
        qvecs = embeddings[i : i + 1] if embeddings is not None else None
        return bool(router.decide([records[i].question], qvecs).graph[0])

    decisions, ms = time_per_query(one, len(records))
    return np.array(decisions), [float(v) for v in ms]


def evaluate_routers(
    routers: Sequence[Router],
    records: Sequence[LabelRecord],
    embeddings: np.ndarray | None = None,
    k: int = 5,
) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for router in routers:
        decisions, latency = time_router(router, records, embeddings)
        out[router.name] = {
            **routing_metrics(decisions, records, k),
            "latency_ms_p50": percentile(latency, 50),
            "latency_ms_p95": percentile(latency, 95),
        }
    return out


def recovered_gain(routers: dict[str, dict], name: str = "r2a", k: int = 5) -> float | None:
    """PGR = (hybrid − best single) / (oracle − best single)."""
    key = f"recall@{k}"
    if name not in routers or "oracle" not in routers:
        return None
    best = max(routers["always_dense"][key], routers["always_graph"][key])
    room = routers["oracle"][key] - best
    return (routers[name][key] - best) / room if room > 1e-9 else None
