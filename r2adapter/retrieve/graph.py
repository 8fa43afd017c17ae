"""Graph retrieval (HippoRAG 2): query → facts → phrase seeds + dense passage seeds → PPR."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from r2adapter.config import GraphParams, graph_params, rewrite_params
from r2adapter.index.encoder import Encoder, get_encoder
from r2adapter.retrieve.base import Hit, Retriever
from r2adapter.retrieve.dense import check_encoder
from r2adapter.retrieve.graph_index import GRAPHS, GraphCache, GraphIndex, Operator
from r2adapter.retrieve.ppr import (
    ColumnEdits,
    Transition,
    personalized_pagerank,
    ppr_edited,
    ppr_local,
    ppr_solver,
)
from r2adapter.retrieve.topk import top_k_stable
from r2adapter.store.graph_store import passages_by_id

if TYPE_CHECKING:
    from r2adapter.retrieve.graph_llm import FactFilter


def minmax(x: np.ndarray) -> np.ndarray:
    if x.size == 0:
        return x
    lo, hi = float(x.min()), float(x.max())
    return np.ones_like(x) if hi - lo < 1e-12 else (x - lo) / (hi - lo)


@dataclass
class Seeding:
    """One query's seeds: the reset vector, whether a fact matched (else the caller falls
    back to dense), the best normalised score of each fact over the query's vectors, the
    top facts of every vector, the phrase seeds with their weights, and the passages' dense
    scores (CatRAG's learned tiers read the dense top 5)."""

    reset: np.ndarray
    matched: bool
    fact_scores: np.ndarray
    top: list[int]
    seeds: dict[int, float]
    passage_scores: np.ndarray


def seed_graph(
    g: GraphIndex,
    qvec: np.ndarray,
    p: GraphParams,
    fact_queries: np.ndarray | None = None,
    keep: Callable[[np.ndarray], np.ndarray] | None = None,
    fact_query_weight: float = 1.0,
) -> Seeding:
    """HippoRAG 2's seeding (`reset_vector`), keeping what CatRAG reads besides the reset.
    `keep`: the fact filter (graph.fact_filter), applied to the query's own top facts;
    when it keeps none (and no fact query seeds), the seeding is unmatched: dense.
    `fact_query_weight` (rewrite.seed_weight) scales the phrase seeds a fact query reaches:
    each is min-max normalised on its own, so an off-chain triplet's best fact would
    otherwise weigh as much as the question's."""
    reset = np.zeros(g.n_nodes, dtype=np.float64)
    dense = seed_passages(reset, g, qvec, p)
    if len(g.fact_emb) == 0:
        return Seeding(reset, False, np.zeros(0), [], {}, dense)
    vecs = [qvec] if fact_queries is None else [qvec, *fact_queries]
    weight: dict[int, float] = {}
    best: np.ndarray | None = None
    top_all: list[int] = []
    for i, v in enumerate(vecs):
        scores, top = top_facts(g, v, p)
        if i == 0 and keep is not None:
            top = keep(top)
        best = scores if best is None else np.maximum(best, scores)
        top_all.extend(int(f) for f in top if int(f) not in top_all)
        scale = 1.0 if i == 0 else fact_query_weight
        for e, w in phrase_seeds(g, scores, top, p).items():
            weight[e] = max(w * scale, weight.get(e, 0.0))
    for e, w in weight.items():
        reset[e] = w
    assert best is not None
    matched = bool(weight) and sum(weight.values()) > 0
    return Seeding(reset, matched, best, top_all, weight, dense)


def seed_passages(reset: np.ndarray, g: GraphIndex, qvec: np.ndarray, p: GraphParams) -> np.ndarray:
    """Every passage's min-max normalised dense score × passage_node_weight into `reset`
    (HippoRAG 2), or with `passage_seed_top_n` N > 0 only the top N passages', normalised
    over those N (what an approximate nearest-neighbour search returns: the work of seeding
    then does not grow with the corpus). Returns the dense scores."""
    scores = g.passage_emb @ qvec
    n = p.passage_seed_top_n
    if 0 < n < len(scores):
        top = np.argpartition(-scores, n - 1)[:n]
        reset[g.n_entities + top] = minmax(scores[top]) * p.passage_node_weight
    else:
        reset[g.n_entities :] = minmax(scores) * p.passage_node_weight
    return scores


def run_ppr(
    t: Transition, reset: np.ndarray, p: GraphParams, edits: ColumnEdits | None = None
) -> np.ndarray:
    """PPR over the transition (or the edited operator, `edits`) by the configured solver."""
    if ppr_solver(p, t.n) == "local":
        return ppr_local(t, reset, p.damping, p.ppr_r_max, edits)
    if edits is not None:
        return ppr_edited(t, reset, edits, p.damping, p.ppr_tol, p.ppr_max_iter)[0]
    return personalized_pagerank(t, reset, p.damping, p.ppr_tol, p.ppr_max_iter)


def reset_vector(
    g: GraphIndex,
    qvec: np.ndarray,
    p: GraphParams,
    fact_queries: np.ndarray | None = None,
    fact_query_weight: float = 1.0,
) -> tuple[np.ndarray, bool]:
    """Seeds for PPR; the flag is False when no fact matched (the caller falls back to dense).

    `fact_queries`: more query vectors (a rewrite's triplets, rewrite/parse.py
    `triplet_queries`), each matched against the facts on its own; every query's top
    phrases seed PPR together, a phrase reached by several keeping its highest weight
    (a fact query's × `fact_query_weight`)."""
    s = seed_graph(g, qvec, p, fact_queries, fact_query_weight=fact_query_weight)
    return s.reset, s.matched


def top_facts(g: GraphIndex, qvec: np.ndarray, p: GraphParams) -> tuple[np.ndarray, np.ndarray]:
    """The query's min-max normalised score of every fact, and its top `fact_top_k` facts
    (the graph search's fact step; `fact_filter: none` keeps them all)."""
    fact_scores = minmax(g.fact_emb @ qvec)
    return fact_scores, top_k_stable(fact_scores, p.fact_top_k)


def phrase_seeds(
    g: GraphIndex, fact_scores: np.ndarray, top: np.ndarray, p: GraphParams
) -> dict[int, float]:
    """`released` (HippoRAG 2 as released): a phrase weighs its last top fact's score ÷ its
    passages and is ranked by its mean fact score; `averaged` (the later upstream code):
    it weighs the mean of score ÷ passages over its top facts and is ranked by that."""
    phrase_weight: dict[int, float] = {}
    phrase_scores: dict[int, list[float]] = {}
    for f in top:
        score = float(fact_scores[f])
        for e in g.fact_ends[f]:
            e = int(e)
            # fact score ÷ number of passages holding the phrase (HippoRAG 2)
            weighted = score / max(g.entity_passages[e], 1.0)
            if p.seed_weighting == "averaged":
                phrase_scores.setdefault(e, []).append(weighted)
            else:
                phrase_weight[e] = weighted
                phrase_scores.setdefault(e, []).append(score)
    rank = {e: float(np.mean(v)) for e, v in phrase_scores.items()}
    ranked = sorted(rank, key=lambda e: -rank[e])[: p.linking_top_k]
    if p.seed_weighting == "averaged":
        return {e: rank[e] for e in ranked}
    return {e: phrase_weight[e] for e in ranked}


def ppr_structure(ppr: np.ndarray, op: Operator) -> dict[str, float]:
    """Where the PPR mass sits (CatRAG §6), two readings.

    Over every node, as before: `hub_mass`, the share on the top 1% of all nodes by
    weighted degree, and `ppr_weighted_strength`, the mean weighted degree under the mass.
    Every passage is seeded (dense score × passage_node_weight), so passages hold most of
    the reset and most of the mass there. Entity-normalised, the paper's reading (its hubs
    are bridge entities): the mass renormalised over the phrase nodes, `hub_mass_entities`
    its share on the top 1% of phrase nodes by strength and
    `ppr_weighted_strength_entities` the mean strength under it; `entity_mass` is the
    phrase nodes' share of the whole vector, which says how much the second reading
    weighs. A graph whose operator does not know its phrase nodes gives the first only."""
    out = {
        "hub_mass": float(ppr[op.hubs].sum()),
        "ppr_weighted_strength": float(ppr @ op.strength),
    }
    n_e = op.n_entities
    if n_e > 0:
        ent = ppr[:n_e]
        total = float(ent.sum())
        out["entity_mass"] = total / max(float(ppr.sum()), 1e-300)
        if total > 0:
            out["hub_mass_entities"] = float(ent[op.entity_hubs].sum()) / total
            out["ppr_weighted_strength_entities"] = float(ent @ op.strength[:n_e]) / total
    return out


class GraphRetriever(Retriever):
    mode = "graph"
    link_heads: bool | None = None  # seed only linked triplet heads; None: rewrite.link_heads
    seed_weight: float | None = None  # a triplet's seeds × this; None: rewrite.seed_weight

    def __init__(
        self,
        dataset: str,
        encoder: Encoder | None = None,
        cache: GraphCache = GRAPHS,
        params: GraphParams | None = None,
        seed_triplets: bool = True,
    ) -> None:
        """`seed_triplets`: a rewritten query's triplets become fact queries of their own
        (rewrite/parse.py `triplet_queries`), their top facts seeding PPR beside the query's
        (issue 15). On by default: on 2Wiki's 860 complete-gold questions with the
        structural rewrite it lifts graph FCR@5 .551 → .705 and Recall@5 .789 → .875, where
        q′ alone gives .549 and .790. A query without triplet lines is searched as before."""
        self.dataset = dataset
        self.params = params or graph_params()  # params.yaml `graph:`
        # params.yaml `rewrite:`, read once here (not per query): which triplets seed, and how much
        self.rewrite = rewrite_params()
        self.check_params()  # before the encoder loads: a bad option is one line, at once
        self.encoder = encoder or get_encoder()
        self.cache = cache
        check_encoder(self.cache.get(dataset).version, self.encoder)
        self.seed_triplets = seed_triplets
        self.fallbacks = 0
        self.fact_filter: FactFilter | None = None
        if self.params.fact_filter == "llm":  # HippoRAG 2's recognition memory
            from r2adapter.retrieve.graph_llm import FactFilter

            self.fact_filter = FactFilter(self.params)
        # called with each query's PPR vector and the graph's operator (evaluation reads
        # where the mass sits, `ppr_structure`); None in serving
        self.observe: Callable[[np.ndarray, Operator, dict[str, float]], None] | None = None

    def check_params(self) -> None:
        """One line for a bad option, before anything loads (graph.* are checked when
        params.yaml is read; a strategy adds its own)."""

    def stats(self) -> dict[str, Any]:
        """Counts for the evaluation report beside `fallbacks`: the LLM fact filter's
        (calls, fallbacks by reason, queries it left without facts); catrag adds its
        tier source's."""
        return self.fact_filter.stats() if self.fact_filter is not None else {}

    def fact_keeper(self, g: GraphIndex, query: str) -> Callable[[np.ndarray], np.ndarray] | None:
        """`seed_graph`'s `keep` for this query: the LLM fact filter, or None."""
        f = self.fact_filter
        if f is None or not query:
            return None
        return lambda top: f.keep(g, query, top)

    @property
    def scales(self) -> tuple[float, float]:
        return (self.params.fact_edge_scale, self.params.synonym_edge_scale)

    def warmup(self) -> None:
        """Build what the first query would (the transition at these edge scales; the
        operator an observer reads), so that no query's time includes it."""
        g = self.cache.get(self.dataset)
        g.transition_for(*self.scales)
        if self.fact_filter is not None:
            self.fact_filter.warmup(g)
        if self.observe is not None:
            g.operator(*self.scales)

    def scores(
        self, qvec: np.ndarray, fact_queries: np.ndarray | None = None, query: str = ""
    ) -> tuple[np.ndarray, GraphIndex, bool]:
        """Passage scores; `query` (the text, which only strategies that read it use)."""
        g = self.cache.get(self.dataset)
        s = seed_graph(
            g, qvec, self.params, fact_queries, self.fact_keeper(g, query), self.fact_weight
        )
        reset, matched = s.reset, s.matched
        if not matched:
            self.fallbacks += 1
            return g.passage_emb @ qvec, g, False
        t0 = time.perf_counter()
        ppr = run_ppr(g.transition_for(*self.scales), reset, self.params)
        if self.observe is not None:
            ms = (time.perf_counter() - t0) * 1000
            self.observe(ppr, g.operator(*self.scales), {"ppr_ms": ms})
        return ppr[g.n_entities :], g, True

    @property
    def fact_weight(self) -> float:
        """The weight of a rewrite's fact queries in the seeding (rewrite.seed_weight)."""
        return self.rewrite.seed_weight if self.seed_weight is None else self.seed_weight

    def retrieve(self, query: str, k: int = 5, qvec: np.ndarray | None = None) -> list[Hit]:
        query = query.strip()  # a stored question may keep spaces at its ends
        vec = self.encoder.encode_query(query) if qvec is None else qvec
        texts: list[str] = []
        if self.seed_triplets:  # rewrite.link_heads: only heads the graph knows (issue 24)
            from r2adapter.retrieve.seeding import seed_texts

            link = self.rewrite.link_heads if self.link_heads is None else self.link_heads
            texts = seed_texts(query, self.cache.get(self.dataset), link)
        extra = self.encoder.encode(texts) if texts else None
        scores, g, _ = self.scores(vec, extra, query)
        top = np.argsort(-scores, kind="stable")[:k]
        ids = [g.passage_ids[i] for i in top]
        found = passages_by_id(self.dataset, ids)
        return [
            Hit(pid, float(scores[i]), found[pid].title, found[pid].text)
            for pid, i in zip(ids, top, strict=True)
            if pid in found
        ]
