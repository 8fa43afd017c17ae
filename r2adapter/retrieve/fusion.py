"""`fusion`: dense ∪ graph, reciprocal-rank fused, and `hybrid`, dense ∪ lexical, fused the
same way — the composite strategies of the table (r2adapter/retrieve/strategies.py, `bases`),
served by running both retrievers on the one query embedding; `rrf` is also how the
strategy labels fuse the base rankings (r2adapter/kway/strategies.py `delivered`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from r2adapter.retrieve.base import Hit, Retriever


def rrf(rankings: Sequence[Sequence[str]], rrf_k: int = 60, depth: int = 20) -> list[str]:
    """Reciprocal-rank fusion: Σ 1/(rrf_k + rank) over the rankings (ties: first seen)."""
    score: dict[str, float] = {}
    for ranking in rankings:
        for rank, pid in enumerate(ranking, 1):
            score[pid] = score.get(pid, 0.0) + 1.0 / (rrf_k + rank)
    return sorted(score, key=lambda p: -score[p])[:depth]


class FusionRetriever(Retriever):
    mode = "fusion"

    def __init__(
        self,
        dense: Retriever,
        graph: Retriever,
        rrf_k: int = 60,
        depth: int = 20,
        mode: str = "fusion",
    ) -> None:
        self.dense, self.graph, self.rrf_k, self.depth = dense, graph, rrf_k, depth
        self.mode = mode  # "hybrid" fuses dense with the lexical retriever the same way

    def retrieve(self, query: str, k: int = 5, qvec: np.ndarray | None = None) -> list[Hit]:
        runs = [r.retrieve(query, max(k, self.depth), qvec=qvec) for r in (self.dense, self.graph)]
        by_id = {h.passage_id: h for run in runs for h in run}
        fused = rrf([[h.passage_id for h in run] for run in runs], self.rrf_k, max(k, self.depth))
        score = {
            pid: sum(
                1.0 / (self.rrf_k + i + 1)
                for run in runs
                for i, h in enumerate(run)
                if h.passage_id == pid
            )
            for pid in fused[:k]
        }
        return [Hit(pid, score[pid], by_id[pid].title, by_id[pid].text) for pid in fused[:k]]
