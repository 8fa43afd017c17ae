"""Graph retrieval (HippoRAG 2): query → facts → phrase seeds + dense passage seeds → PPR."""

from __future__ import annotations

import numpy as np

from r2adapter.config import GraphParams
from r2adapter.index.encoder import Encoder, get_encoder
from r2adapter.retrieve.base import Hit, Retriever, check_query
from r2adapter.retrieve.dense import check_encoder
from r2adapter.retrieve.graph_index import GRAPHS, GraphCache, GraphIndex
from r2adapter.retrieve.ppr import personalized_pagerank
from r2adapter.store.graph_store import passages_by_id


def minmax(x: np.ndarray) -> np.ndarray:
    if x.size == 0:
        return x
    lo, hi = float(x.min()), float(x.max())
    return np.ones_like(x) if hi - lo < 1e-12 else (x - lo) / (hi - lo)


def reset_vector(g: GraphIndex, qvec: np.ndarray, p: GraphParams) -> tuple[np.ndarray, bool]:
    """Seeds for PPR; the flag is False when no fact matched (the caller falls back to dense)."""
    reset = np.zeros(g.n_nodes, dtype=np.float64)
    dense = minmax(g.passage_emb @ qvec)
    reset[g.n_entities :] = dense * p.passage_node_weight
    if len(g.fact_emb) == 0:
        return reset, False
    fact_scores = minmax(g.fact_emb @ qvec)
    top = np.argsort(-fact_scores, kind="stable")[: p.fact_top_k]
    phrase_weight: dict[int, float] = {}
    phrase_scores: dict[int, list[float]] = {}
    for f in top:
        score = float(fact_scores[f])
        for e in g.fact_ends[f]:
            e = int(e)
            # fact score ÷ number of passages holding the phrase (HippoRAG 2)
            phrase_weight[e] = score / max(g.entity_passages[e], 1.0)
            phrase_scores.setdefault(e, []).append(score)
    ranked = sorted(phrase_scores, key=lambda e: -float(np.mean(phrase_scores[e])))
    keep = ranked[: p.linking_top_k]
    for e in keep:
        reset[e] = phrase_weight[e]
    return reset, bool(keep) and sum(phrase_weight[e] for e in keep) > 0


class GraphRetriever(Retriever):
    mode = "graph"

    def __init__(
        self,
        dataset: str,
        encoder: Encoder | None = None,
        cache: GraphCache = GRAPHS,
        params: GraphParams | None = None,
    ) -> None:
        self.dataset = dataset
        self.encoder = encoder or get_encoder()
        self.cache = cache
        self.params = params or GraphParams()
        check_encoder(self.cache.get(dataset).version, self.encoder)
        self.fallbacks = 0

    def scores(self, qvec: np.ndarray) -> tuple[np.ndarray, GraphIndex, bool]:
        g = self.cache.get(self.dataset)
        reset, matched = reset_vector(g, qvec, self.params)
        if not matched:
            self.fallbacks += 1
            return g.passage_emb @ qvec, g, False
        ppr = personalized_pagerank(
            g.transition, reset, self.params.damping, self.params.ppr_tol, self.params.ppr_max_iter
        )
        return ppr[g.n_entities :], g, True

    def retrieve(self, query: str, k: int = 5, qvec: np.ndarray | None = None) -> list[Hit]:
        query = check_query(query)
        vec = self.encoder.encode_query(query) if qvec is None else qvec
        scores, g, _ = self.scores(vec)
        top = np.argsort(-scores, kind="stable")[:k]
        ids = [g.passage_ids[i] for i in top]
        found = passages_by_id(self.dataset, ids)
        return [
            Hit(pid, float(scores[i]), found[pid].title, found[pid].text)
            for pid, i in zip(ids, top, strict=True)
            if pid in found
        ]
