"""How an ADR operator ranks its passages (`adr.passage_rank`, issue 26).

- `similarity` (the default): by the query cosine of the fact or insight that brought each
  passage (operators.py, unchanged).
- `ppr`: the operator's entities seed a Personalized PageRank on the dataset's graph index
  (the `graph` strategy's, r2adapter/retrieve/graph_index.py), beside the graph retriever's
  own dense passage seeding (`seed_passages`) and through its own solver (`run_ppr`); the
  top passages by PPR score. An entity's reset weight is its operator score (an anchor's:
  1 when the question names it, else its cosine; an entity of complex's grounded facts: the
  best query cosine of those facts, clipped at 0) divided by the passages holding it, as
  HippoRAG 2 divides a phrase seed's fact score. No entity to seed: the graph retriever's
  own fallback, the passages by dense cosine (counted as `fallback`).
- `ppr_facts`: the graph retriever's own seeding restricted to the operator's facts (simple
  and moderate: E_sub's, complex: E_ground's, best first by query cosine, before any
  `fact_tokens` budget): its top `graph.fact_top_k` facts give the phrase seeds by
  `phrase_seeds` (HippoRAG 2's fact step over these facts instead of the corpus's, scores
  min-max normalised over every fact as there), beside the dense passage seeds. On 2Wiki
  seeding the anchors themselves (`ppr`) puts the walk on the entities the question names;
  the facts' ends also hold the bridge entity the second hop needs (docs/adr.md). No fact:
  dense over the corpus (counted as `fallback`).
- `dense`: every candidate passage the operator's facts and insights bring (not cut at
  `max_passages`) by its stored embedding's cosine to the query (the vectors the graph
  index holds, those pgvector serves dense retrieval); no candidate: dense over the corpus
  (counted as `fallback`).

ADR's entity ids are the graph's phrase node ids: the hypergraph is built over the index
version's own entity list (adr/build.py), and `load_adr_index` reads the entity names from
that version's graph; `PassageRanker` checks the versions and the names agree.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from r2adapter.config import GraphParams, graph_params
from r2adapter.errors import R2AError
from r2adapter.retrieve.graph import minmax, phrase_seeds, run_ppr, seed_passages
from r2adapter.retrieve.graph_index import GRAPHS, GraphCache, GraphIndex
from r2adapter.retrieve.topk import top_k_stable

PASSAGE_RANKS = ("similarity", "ppr", "ppr_facts", "dense")

Ranked = list[tuple[str, float]]


def fact_entities(
    fact_ends: np.ndarray, facts: Iterable[int], scores: Iterable[float]
) -> dict[int, float]:
    """The entities of these facts, each with the best score of its facts (clipped at 0)."""
    out: dict[int, float] = {}
    for f, s in zip(facts, scores, strict=True):
        for e in fact_ends[int(f)]:
            e = int(e)
            out[e] = max(out.get(e, 0.0), max(float(s), 0.0))
    return out


class PassageRanker:
    """The `ppr`, `ppr_facts` and `dense` rankings over one graph index (the ADR index's
    version)."""

    def __init__(self, g: GraphIndex, params: GraphParams | None = None) -> None:
        self.g = g
        self.params = params or graph_params()
        self.row = {pid: i for i, pid in enumerate(g.passage_ids)}
        self.transition = g.transition_for(
            self.params.fact_edge_scale, self.params.synonym_edge_scale
        )

    def _top(self, scores: np.ndarray, k: int) -> Ranked:
        top = top_k_stable(scores, k)
        return [(self.g.passage_ids[i], float(scores[i])) for i in top]

    def corpus_dense(self, qvec: np.ndarray, k: int) -> Ranked:
        """The fallback: every passage by dense cosine (the graph retriever's when no fact
        matches)."""
        return self._top(self.g.passage_emb @ qvec, k)

    def walk(self, qvec: np.ndarray, weights: dict[int, float], k: int) -> tuple[Ranked, bool]:
        """The top k passages by PPR from phrase nodes at these reset weights and the graph
        retriever's dense passage seeds; no positive weight: the dense fallback. (ranking,
        fallback)"""
        g = self.g
        reset = np.zeros(g.n_nodes, dtype=np.float64)
        dense = seed_passages(reset, g, qvec, self.params)
        seeded = False
        for e, w in weights.items():
            if w > 0:
                reset[e] = w
                seeded = True
        if not seeded:
            return self._top(dense, k), True
        ppr = run_ppr(self.transition, reset, self.params)
        return self._top(ppr[g.n_entities :], k), False

    def ppr(self, qvec: np.ndarray, entities: dict[int, float], k: int) -> tuple[Ranked, bool]:
        """`ppr`: each entity (→ its operator score) at score ÷ its passages."""
        n = self.g.entity_passages
        weights = {e: max(s, 0.0) / max(float(n[e]), 1.0) for e, s in entities.items()}
        return self.walk(qvec, weights, k)

    def ppr_facts(self, qvec: np.ndarray, facts: list[int], k: int) -> tuple[Ranked, bool]:
        """`ppr_facts`: the phrase seeds of the first `fact_top_k` of the operator's facts
        (best first), weighted as the graph retriever weighs its top facts' ends."""
        if not facts:
            return self.corpus_dense(qvec, k), True
        scores = minmax(self.g.fact_emb @ qvec)
        top = np.asarray(facts[: self.params.fact_top_k], dtype=np.int64)
        return self.walk(qvec, phrase_seeds(self.g, scores, top, self.params), k)

    def dense(self, qvec: np.ndarray, candidates: Iterable[str], k: int) -> tuple[Ranked, bool]:
        """The top k of `candidates` by dense cosine, ties by passage id; (ranking,
        fallback: none of them is a passage of the graph)."""
        ids = sorted({pid for pid in candidates if pid in self.row})
        if not ids:
            return self.corpus_dense(qvec, k), True
        sims = self.g.passage_emb[[self.row[pid] for pid in ids]] @ qvec
        return [(ids[i], float(sims[i])) for i in top_k_stable(sims, k)], False


def ranker_for(
    dataset: str, version: int, entity_names: list[str], cache: GraphCache = GRAPHS
) -> PassageRanker:
    """The ranker over the dataset's graph index, which must be the ADR index's version
    with the same phrase nodes; else one line naming the rebuild."""
    fix = f"rebuild with `r2a index --dataset {dataset} --adr`"
    try:
        g = cache.get(dataset)
    except R2AError as e:
        raise R2AError(f"adr.passage_rank: no graph index of '{dataset}' ({e}); {fix}") from e
    if g.version.id != version or g.entity_names != entity_names:
        raise R2AError(
            f"adr.passage_rank: the graph index of '{dataset}' (version {g.version.id}) is not "
            f"the ADR hypergraph's (version {version}); {fix}"
        )
    return PassageRanker(g)
