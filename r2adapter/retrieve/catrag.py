"""CatRAG (Lau et al., "Breaking the Static Graph: Context-Aware Traversal for Robust RAG"):
HippoRAG 2's graph search with the static transition turned into a query-specific one
before PPR. Three edits, each of which `ablate` can turn off:

- **anchoring** (symbolic anchoring): the query's named entities (spaCy, parsed beside the
  fact search; with `anchor_phrases: entities_and_chunks` its noun chunks too), matched to
  phrase nodes by normalised exact name (with `entity_match: embedding`, else by the
  nearest entity embedding at cosine ≥
  `entity_match_threshold`), join the reset vector with the weak weight ε
  (`anchor_epsilon`) ÷ the passages holding them, as fact seeds are divided; a phrase that
  is already a seed keeps its seed weight.
- **edges** (query-aware dynamic edge weighting): for the top `n_seed` seeds (fact seeds
  and anchors by reset weight), Stage I keeps the `k_edge` fact neighbours whose joining
  facts score highest against the query and gives the rest the `tier_pruned` multiplier;
  Stage II puts each kept seed → neighbour transition in a tier (irrelevant, weak, high,
  direct) whose multiplier scales the edge. The tier comes from graph.tier_source
  (r2adapter/retrieve/catrag_tiers.py): `similarity` (bands over the best joining fact's
  query score, no LLM), `learned` (a logistic scorer trained on the training split, no
  LLM) or `llm` (the paper's judge; the similarity tiers when it fails, counted).
- **keyfact** (key-fact passage enhancement): among a top-fact phrase's passage edges,
  those to a passage that holds one of the query's top facts with that phrase weigh ×β
  (`keyfact_beta`), the phrase's total passage weight kept.

The edits touch only the edited nodes' out-transitions, i.e. their columns of the
column-stochastic transition (as the released code edits the out-edges of seeds in a
directed igraph): the graph is not rebuilt per query. The edited operator is no longer
symmetric, so PPR runs on it by `ppr.ppr_edited` (Chebyshev semi-iteration, which still
converges for any column-stochastic operator, with a power-iteration fallback; checked
against igraph's prpack), or, with the local solver (graph.ppr_solver), by forward push
along the edited columns (`ppr.ppr_local`). With every edit ablated catrag is graph
retrieval, to the solver's tolerance.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from r2adapter.config import CATRAG_PARTS as ABLATIONS  # its components (--ablate)
from r2adapter.config import GraphParams
from r2adapter.errors import R2AError
from r2adapter.index.encoder import Encoder
from r2adapter.index.openie import normalize_phrase
from r2adapter.retrieve.catrag_graph import CatragMaps, catrag_maps, entity_embeddings
from r2adapter.retrieve.catrag_tiers import (
    LearnedTiers,
    SimilarityTiers,
    TierModel,
    TierQuery,
    TierSource,
    load_tiers,
    stage_one_kept,
)
from r2adapter.retrieve.graph import GraphRetriever, Seeding, run_ppr, seed_graph
from r2adapter.retrieve.graph_index import GRAPHS, SYNONYM_EDGE, GraphCache, GraphIndex, Operator
from r2adapter.retrieve.ppr import ColumnEdits


def check_ablations(ablate: Iterable[str]) -> tuple[str, ...]:
    out = tuple(dict.fromkeys(ablate))
    unknown = [a for a in out if a not in ABLATIONS]
    if unknown:
        raise R2AError(
            f"unknown catrag ablation(s) {', '.join(unknown)}: choose from {', '.join(ABLATIONS)}"
        )
    return out


# ---- the three edits ----------------------------------------------------------------------


def anchor_entities(
    g: GraphIndex,
    maps: CatragMaps,
    phrases: list[str],
    threshold: float,
    embed: Encoder | None,
) -> list[int]:
    """Phrase nodes named by the query's phrases: normalised exact match, else (with an
    encoder to `embed` them) the nearest entity by embedding at cosine ≥ threshold."""
    found: list[int] = []
    unmatched: list[str] = []
    for phrase in phrases:
        key = normalize_phrase(phrase)
        if not key:
            continue
        e = maps.name_to_entity.get(key)
        if e is not None:
            found.append(e)
        else:
            unmatched.append(key)
    if unmatched and embed is not None and g.n_entities:
        emb = entity_embeddings(g)
        sims = embed.encode(unmatched) @ emb.T
        best = sims.argmax(axis=1)
        found += [int(e) for e, s in zip(best, sims.max(axis=1), strict=True) if s >= threshold]
    return list(dict.fromkeys(found))


def keyfact_passages(maps: CatragMaps, g: GraphIndex, top: list[int]) -> dict[int, set[int]]:
    """Phrase → passage nodes holding one of the query's top facts that has this phrase."""
    out: dict[int, set[int]] = {}
    for f in top:
        held = set(maps.passages_of(f).tolist())
        for e in g.fact_ends[f].tolist():
            out.setdefault(int(e), set()).update(held)
    return out


def edited_columns(
    g: GraphIndex,
    op: Operator,
    edges: dict[int, tuple[np.ndarray, np.ndarray]],
    keyfact: dict[int, set[int]],
    beta: float,
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Node → (targets, change of P[target, node]): each edited node's out-weights
    rescaled (edge multipliers; key-fact passages × β with the passage total kept), then
    normalised again, minus the static column."""
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    adj = op.adjacency
    for u in sorted(set(edges) | set(keyfact)):
        lo, hi = adj.indptr[u], adj.indptr[u + 1]
        targets = adj.indices[lo:hi]  # sorted
        w = adj.data[lo:hi]
        total = float(w.sum())
        if total <= 0:
            continue
        new = w.copy()
        if u in edges:
            nbrs, mult = edges[u]
            at = np.searchsorted(targets, nbrs)
            ok = (at < len(targets)) & (targets[np.minimum(at, len(targets) - 1)] == nbrs)
            new[at[ok]] *= mult[ok]
        boosted = keyfact.get(u)
        if boosted:
            is_passage = targets >= g.n_entities
            hit = is_passage & np.isin(targets, np.fromiter(boosted, dtype=np.int64))
            if hit.any():
                before = float(new[is_passage].sum())
                new[hit] *= beta
                after = float(new[is_passage].sum())
                if after > 0:
                    new[is_passage] *= before / after
        new_total = float(new.sum())
        col = new / new_total if new_total > 0 else np.zeros_like(new)
        change = col - w / total
        if len(change) and np.abs(change).max() > 1e-15:
            out[u] = (targets.copy(), change)
    return out


# ---- the retriever ------------------------------------------------------------------------

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """Where a query's spaCy parse runs, beside its fact search (both release the GIL in
    their numeric kernels)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="catrag-ner")
        return _POOL


@dataclass(frozen=True)
class Adaptation:
    """A query's edits: node → (targets, change of its column), and how many anchors."""

    columns: dict[int, tuple[np.ndarray, np.ndarray]]
    anchors: int
    anchor_ms: float  # finding the anchors (spaCy, the name and embedding match)


class CatragRetriever(GraphRetriever):
    """Graph retrieval on a query-adapted graph (the module docstring); `ablate` turns
    components off (ABLATIONS)."""

    mode = "catrag"

    def __init__(
        self,
        dataset: str,
        encoder: Encoder | None = None,
        cache: GraphCache = GRAPHS,
        params: GraphParams | None = None,
        seed_triplets: bool = True,
        ablate: Iterable[str] = (),
        tiers: TierSource | None = None,
    ) -> None:
        """`tiers`: Stage II's judge; None: the one graph.tier_source names."""
        ablate = check_ablations(ablate)
        super().__init__(dataset, encoder, cache, params, seed_triplets)
        # graph.catrag_ablate, then the caller's
        self.ablate = check_ablations((*self.params.catrag_ablate, *ablate))
        self.tiers = tiers or tier_source(self.params)
        self.check_synonyms()

    def check_synonyms(self) -> None:
        """graph.catrag_synonym_scale ≠ 1 on an index with no synonym edge would change
        nothing and say nothing: one line naming the rebuild instead."""
        if self.params.catrag_synonym_scale == 1.0:
            return
        g = self.cache.get(self.dataset)
        if g.edges is None or not bool((g.edges.kind == SYNONYM_EDGE).any()):
            raise R2AError(
                f"graph.catrag_synonym_scale is {self.params.catrag_synonym_scale:g} but index "
                f"version {g.version.id} of {self.dataset} holds no synonym edge: rebuild it "
                f"with `r2a index --dataset {self.dataset}` at a graph.synonym_threshold that "
                "links entities, or set graph.catrag_synonym_scale: 1.0"
            )

    def warmup(self) -> None:
        """Load what the first query would: the graph's maps, spaCy, the entity embeddings."""
        super().warmup()
        g = self.cache.get(self.dataset)
        catrag_maps(g)
        g.operator(*self.scales)
        if "anchoring" not in self.ablate:
            from r2adapter.nlp.ner import query_phrases

            query_phrases(["warm up"])
            if self.params.entity_match == "embedding":
                entity_embeddings(g)
        if "edges" not in self.ablate:
            self.tiers.warmup(g)

    def stats(self) -> dict[str, Any]:
        """The tier source's counts (an LLM's fallbacks) beside the graph search's."""
        return {**super().stats(), **self.tiers.stats()}

    def scores(
        self, qvec: np.ndarray, fact_queries: np.ndarray | None = None, query: str = ""
    ) -> tuple[np.ndarray, GraphIndex, bool]:
        """`query`: the text retrieved; its phrases anchor the walk (none without it)."""
        g = self.cache.get(self.dataset)
        p = self.params
        found: Future[list[int]] | None = None
        if self.anchoring and query:  # spaCy and the entity match run beside the fact search
            found = _pool().submit(self.anchor_candidates, g, query)
        seeding = seed_graph(g, qvec, p, fact_queries, self.fact_keeper(g, query), self.fact_weight)
        if not seeding.matched:
            self.fallbacks += 1
            return g.passage_emb @ qvec, g, False
        t0 = time.perf_counter()
        adapted = self.adapt(g, seeding, found, qvec, query)
        op = g.operator(*self.scales)
        columns = adapted.columns
        t1 = time.perf_counter()
        # every edit ablated (or none applies): the static graph
        edits = ColumnEdits.from_columns(op.transition, columns) if columns else None
        ppr = run_ppr(op.transition, seeding.reset, p, edits)
        figures = {
            "anchor_ms": adapted.anchor_ms,
            "edit_ms": (t1 - t0) * 1000 - adapted.anchor_ms,
            "ppr_ms": (time.perf_counter() - t1) * 1000,
            "anchors": float(adapted.anchors),
            "edited_columns": float(len(columns)),
        }
        if self.observe is not None:
            self.observe(ppr, op, figures)
        return ppr[g.n_entities :], g, True

    @property
    def scales(self) -> tuple[float, float]:
        """The graph's edge scales, synonym edges × graph.catrag_synonym_scale (CatRAG's
        released code: × 3)."""
        p = self.params
        return (p.fact_edge_scale, p.synonym_edge_scale * p.catrag_synonym_scale)

    @property
    def anchoring(self) -> bool:
        return "anchoring" not in self.ablate and self.params.anchor_epsilon > 0

    def anchor_candidates(self, g: GraphIndex, query: str) -> list[int]:
        """The phrase nodes the query's spaCy entities and noun chunks name."""
        from r2adapter.nlp.ner import query_phrases

        p = self.params
        phrases = query_phrases([query], chunks=p.anchor_phrases == "entities_and_chunks")[0]
        embed = self.encoder if p.entity_match == "embedding" else None
        return anchor_entities(g, catrag_maps(g), phrases, p.entity_match_threshold, embed)

    def anchored(
        self, g: GraphIndex, seeding: Seeding, found: Future[list[int]] | list[int] | None
    ) -> tuple[dict[int, float], int]:
        """The query's anchors (`found`: `anchor_candidates`, or its future) join
        `seeding.reset` (in place); returns every seed's reset weight and how many anchors."""
        weights = dict(seeding.seeds)
        anchors = 0
        if isinstance(found, Future):
            found = found.result()
        if self.anchoring and found:
            for e in found:
                if e in weights:
                    continue  # subordinate to the fact seeds: a seed keeps its weight
                w = self.params.anchor_epsilon / max(float(g.entity_passages[e]), 1.0)
                weights[e] = w
                seeding.reset[e] += w
                anchors += 1
        return weights, anchors

    def adapt(
        self,
        g: GraphIndex,
        seeding: Seeding,
        found: Future[list[int]] | list[int] | None,
        qvec: np.ndarray | None = None,
        query: str = "",
    ) -> Adaptation:
        """Anchors into `seeding.reset` (`anchored`); returns the edited columns and the
        number of anchors. `qvec`, `query`: what a tier source may read (the learned
        source needs `qvec`)."""
        p = self.params
        maps = catrag_maps(g)
        t0 = time.perf_counter()  # what anchoring adds: the wait for spaCy and the match
        weights, anchors = self.anchored(g, seeding, found)
        anchor_ms = (time.perf_counter() - t0) * 1000
        op = g.operator(*self.scales)
        edges: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if "edges" not in self.ablate:
            kept, ranked = stage_one_kept(g, maps, weights, seeding.fact_scores, p)
            judged = np.zeros(0)
            if len(kept):
                vec = np.zeros(g.passage_emb.shape[1]) if qvec is None else qvec
                q = TierQuery(g, op, vec, query, seeding.passage_scores, seeding.fact_scores)
                judged = self.tiers.multipliers(q, kept)
            at = 0
            for u, nbrs in ranked.items():
                mult = np.full(len(nbrs), p.tier_pruned, dtype=np.float64)
                n = min(p.k_edge, len(nbrs))
                mult[:n] = judged[at : at + n]
                at += n
                edges[u] = (nbrs, mult)
        keyfact: dict[int, set[int]] = {}
        if "keyfact" not in self.ablate and p.keyfact_beta != 1.0:
            keyfact = keyfact_passages(maps, g, seeding.top)
        columns = edited_columns(g, op, edges, keyfact, p.keyfact_beta)
        return Adaptation(columns, anchors, anchor_ms)


def tier_source(params: GraphParams, **options: Any) -> TierSource:
    """The source graph.tier_source names; `options` go to its constructor (a learned
    source's `model`, an LLM source's `llm`). A learned source without a model loads the
    dataset's saved one on first use (catrag_tiers.load_tiers: `r2a catrag train-tiers`
    makes it; a retrieval never trains)."""
    if params.tier_source == "similarity":
        return SimilarityTiers(params)
    if params.tier_source == "learned":

        def load(g: GraphIndex) -> TierModel:
            return load_tiers(g, params)

        return LearnedTiers(params, options.get("model"), load)
    if params.tier_source == "llm":
        from r2adapter.retrieve.catrag_llm import LLMTiers

        return LLMTiers(params, options.get("llm"))
    raise R2AError(
        f"unknown graph.tier_source {params.tier_source!r}: choose similarity, learned or llm"
    )


def similarity_retriever(dataset: str, params: GraphParams) -> CatragRetriever:
    """catrag with the similarity tiers: what the learned source is trained on (the
    transitions Stage I keeps do not depend on the tier source)."""
    return CatragRetriever(dataset, params=params, tiers=SimilarityTiers(params))
