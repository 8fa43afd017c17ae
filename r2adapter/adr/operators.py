"""ADR's three traversal operators (ADR §3.3) over the dual hypergraph of one index version.

- simple, localized fact anchoring: the k_e entities nearest the query (eq. 2, HNSW in
  pgvector), the factual edges touching them (eq. 3), no expansion.
- moderate, bottom-up diffusion: the simple context, plus the deep insight edges one hop
  above the anchored higher-order hyperedges (eq. 4–5; all of them, or the
  `max_up_edges` most query-similar when it is > 0).
- complex, top-down grounding: the k_d deep insight edges nearest the query (eq. 6, HNSW;
  an edge's similarity is its best member insight's by default, `edge_match`),
  grounded through π⁻¹ in their factual hyperedges and those hyperedges' facts (eq. 7).

Each returns two things. The passages its facts and insights come from, ranked by the query
similarity of the fact or insight that brought them (at most `max_passages`): what Recall@5
and FCR@5 count, as for every other strategy. And the context the paper hands a reader:
simple the factual content of E_sub (the facts touching the anchors and the facts of the
higher-order hyperedges they lie in), moderate that plus the narratives of E_up, complex the
narratives of E* plus the facts of E_ground; no passage text (`context_passages` adds the
first ranked ones) and no budget (`fact_tokens` > 0 caps the facts, `max_up_edges` > 0 the
edges of eq. 5): the paper states neither. Its size is counted in the reader's tokens. The
query embedding is the caller's (computed once).

`passage_rank` (adr/forms.py) says how the passages are ranked: `similarity` as above;
`ppr` from the operator's entities on the graph index (simple and moderate: the anchors;
complex: the entities of E_ground's facts); `ppr_facts` from the ends of its best facts, as
the graph retriever seeds from the corpus's; `dense` every candidate passage by its
embedding's cosine. Only the ranking changes (and the passages `context_passages` shows);
the facts and narratives do not. The ranking's time is the operator's.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from r2adapter.adr import store
from r2adapter.adr.forms import PassageRanker, fact_entities, ranker_for
from r2adapter.adr.hypergraph import narrative_members
from r2adapter.config import AdrParams, adr_params
from r2adapter.data.schema import fact_text
from r2adapter.errors import R2AError
from r2adapter.index.openie import normalize_phrase
from r2adapter.store.db import connection

OPERATORS = ("simple", "moderate", "complex")  # ADR's classes y = 1, 2, 3, in cost order
# `specific`: the entities nearest the query are fetched this many times k_e deep, so that
# k_e anchors remain once the unspecific ones are left out
NEAR_POOL = 4


def check_operator(name: str) -> str:
    """An operator (class label) name; anything else is a one-line error."""
    if name not in OPERATORS:
        raise R2AError(f"unknown ADR class {name!r}: choose one of {', '.join(OPERATORS)}")
    return name


@dataclass
class AdrContext:
    operator: str
    passages: list[tuple[str, float]]  # (passage id, score), best first
    facts: list[str]  # fact lines handed to the reader
    insights: list[str]  # narratives of deep insight edges handed to the reader
    tokens: int  # facts + narratives (+ `context_passages` passages), in the reader's tokens
    ms: float  # the operator's own time (the query embedding not included)
    anchors: list[str] = field(default_factory=list)  # entity names (simple, moderate)
    # `passage_rank` ppr or dense fell back to dense over the corpus (no entity to seed, no
    # candidate passage: adr/forms.py)
    fallback: bool = False

    @property
    def passage_ids(self) -> list[str]:
        return [p for p, _ in self.passages]


@dataclass
class AdrIndex:
    """The hypergraph of one index version in memory, with what traversal reads."""

    version: int
    dim: int
    entity_names: list[str]
    entity_id: dict[str, int]
    fact_emb: np.ndarray
    fact_lines: list[str]
    fact_tokens: np.ndarray
    fact_passages: list[list[str]]
    entity_facts: list[list[int]]
    entity_hyperedges: list[list[int]]
    hyperedge_passage: list[str]
    hyperedge_facts: list[list[int]]
    insight_emb: np.ndarray
    vertex_edge: np.ndarray  # insight vertex → its deep insight edge
    edge_members: list[list[int]]
    edge_shown: list[list[int]]  # the members a narrative shows (central, within budget)
    narratives: list[str]
    narrative_tokens: np.ndarray
    narrative_emb: np.ndarray
    passage_tokens: dict[str, int]
    # the specific entities (`specific_entities`): with `anchor_filter: specific` only they
    # anchor a query (eq. 2)
    entity_specific: np.ndarray


def specific_entities(
    names: list[str], insights: list[int] | np.ndarray, max_entity_insights: int
) -> np.ndarray:
    """Which entities are specific, in the paper's sense of an entity (a named thing an LLM
    would extract): a phrase node is not when every word of its name is a function word
    (spaCy's STOP_WORDS: "of", "the", "first") or when it is a hub, in more than
    `max_entity_insights` insights (higher-order hyperedges): the same limit by which the
    Leiden step (hypergraph.insight_links) lets such an entity link no insights ("film" on
    2Wiki: 103 insights)."""
    from spacy.lang.en.stop_words import STOP_WORDS

    out = np.ones(len(names), dtype=bool)
    for e, (name, n) in enumerate(zip(names, insights, strict=True)):
        words = name.split()
        out[e] = bool(words) and not all(w in STOP_WORDS for w in words)
        out[e] &= int(n) <= max_entity_insights
    return out


def load_adr_index(dataset: str, p: AdrParams | None = None) -> AdrIndex:
    from r2adapter.adr.build import token_counter
    from r2adapter.retrieve.graph_index import GRAPHS
    from r2adapter.store import graph_store as gs

    p = p or adr_params()
    version = store.require_hypergraph(dataset)
    g = GRAPHS.get(dataset)
    rows = store.read_hypergraph(version.id)
    with connection() as conn:
        facts = conn.execute(
            "SELECT subject_id, relation, object_id FROM facts WHERE index_version = %s"
            " ORDER BY id",
            (version.id,),
        ).fetchall()
        passages = conn.execute(
            "SELECT id, title, text FROM passages WHERE dataset = %s ORDER BY id", (dataset,)
        ).fetchall()
    names = g.entity_names
    count = token_counter(p)
    lines = [fact_text(names[s], r, names[o]) for s, r, o in facts]
    fact_passages: list[list[str]] = [[] for _ in facts]
    by_passage: dict[str, list[int]] = defaultdict(list)
    for f, pid in gs.read_fact_passages(version.id):
        fact_passages[f].append(pid)
        by_passage[pid].append(f)
    entity_facts: list[list[int]] = [[] for _ in names]
    for f, (s, o) in enumerate(g.fact_ends):
        entity_facts[int(s)].append(f)
        entity_facts[int(o)].append(f)
    entity_hyperedges: list[list[int]] = [[] for _ in names]
    hyperedge_facts = []
    for h, members in enumerate(rows.hyperedge_members):
        for e in members:
            entity_hyperedges[e].append(h)
        inside = set(members)
        hyperedge_facts.append(
            [
                f
                for f in by_passage[rows.hyperedge_passage[h]]
                if int(g.fact_ends[f, 0]) in inside and int(g.fact_ends[f, 1]) in inside
            ]
        )
    vertex_edge = np.zeros(len(rows.insight_text), dtype=np.int64)
    shown = []
    for eid, members in enumerate(rows.edge_members):
        vertex_edge[members] = eid
        shown.append(narrative_members(members, rows.insight_tokens.tolist(), p.narrative_tokens))
    ptok = count([f"{t}\n{x}" for _, t, x in passages])
    specific = specific_entities(names, [len(h) for h in entity_hyperedges], p.max_entity_insights)
    return AdrIndex(
        version.id,
        version.dim,
        names,
        {n: i for i, n in enumerate(names)},
        g.fact_emb,
        lines,
        np.array(count(lines), dtype=np.int64),
        fact_passages,
        entity_facts,
        entity_hyperedges,
        rows.hyperedge_passage,
        hyperedge_facts,
        rows.insight_emb,
        vertex_edge,
        rows.edge_members,
        shown,
        rows.narrative,
        rows.narrative_tokens,
        rows.narrative_emb,
        {pid: n for (pid, _, _), n in zip(passages, ptok, strict=True)},
        specific,
    )


class AdrOperators:
    """`run(operator, qvec) -> AdrContext` for one dataset's latest index version."""

    def __init__(self, dataset: str, p: AdrParams | None = None) -> None:
        self.p = p or adr_params()
        self.dataset = dataset
        self.ix = load_adr_index(dataset, self.p)
        self._ranker: PassageRanker | None = None

    def ranker(self) -> PassageRanker:
        """The graph index the `ppr`, `ppr_facts` and `dense` rankings read, loaded on first use."""
        r = getattr(self, "_ranker", None)
        if r is None:
            r = self._ranker = ranker_for(self.dataset, self.ix.version, self.ix.entity_names)
        return r

    # -- the pieces the operators share -------------------------------------------------
    def _facts(self, fact_ids: set[int], qvec: np.ndarray) -> tuple[list[int], np.ndarray]:
        ids = np.fromiter(fact_ids, dtype=np.int64, count=len(fact_ids))
        scores = self.ix.fact_emb[ids] @ qvec if len(ids) else np.zeros(0)
        order = np.argsort(-scores, kind="stable")
        return [int(i) for i in ids[order]], scores[order]

    def _fact_context(self, ranked: list[int]) -> tuple[list[str], int]:
        """The facts handed to the reader, best first: all of them (the paper), or those
        within `fact_tokens` when it is > 0."""
        lines, used = [], 0
        budget = self.p.fact_tokens
        for f in ranked:
            t = int(self.ix.fact_tokens[f])
            if budget and used + t > budget:
                break
            lines.append(self.ix.fact_lines[f])
            used += t
        return lines, used

    def _ranked_passages(
        self,
        scored: dict[str, float],
        qvec: np.ndarray,
        seeds: dict[int, float],
        fact_ids: list[int],
    ) -> tuple[list[tuple[str, float]], bool]:
        """The first `max_passages` by `passage_rank` (adr/forms.py); and whether it fell
        back. `scored`: every candidate passage with its similarity score; `seeds`: the
        operator's entities with their scores (ppr); `fact_ids`: its facts, best first
        (ppr_facts)."""
        k, form = self.p.max_passages, self.p.passage_rank
        if form == "ppr":
            return self.ranker().ppr(qvec, seeds, k)
        if form == "ppr_facts":
            return self.ranker().ppr_facts(qvec, fact_ids, k)
        if form == "dense":
            return self.ranker().dense(qvec, scored, k)
        best = sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))
        return best[:k], False

    def _finish(
        self,
        op: str,
        t0: float,
        scored: dict[str, float],
        facts: list[str],
        fact_tok: int,
        edges: list[int],
        anchors: list[str],
        qvec: np.ndarray,
        seeds: dict[int, float],
        fact_ids: list[int],
    ) -> AdrContext:
        passages, fallback = self._ranked_passages(scored, qvec, seeds, fact_ids)
        tokens = fact_tok + int(sum(self.ix.narrative_tokens[e] for e in edges))
        shown = passages[: self.p.context_passages]  # the paper hands none
        tokens += sum(self.ix.passage_tokens.get(pid, 0) for pid, _ in shown)
        stories = [self.ix.narratives[e] for e in edges]
        ms = (time.perf_counter() - t0) * 1000
        return AdrContext(op, passages, facts, stories, tokens, ms, anchors, fallback)

    def _anchor(
        self, qvec: np.ndarray, query: str = ""
    ) -> tuple[list[tuple[int, float]], list[int], np.ndarray]:
        """Eq. 2–3: the k_e anchor entities and the pairwise factual edges touching them
        (ranked by the query; they rank the passages). `embedding` (eq. 2 as written): the
        k_e nearest the query's embedding. `lexical`: first the entities the query names
        (longest first), then the nearest to fill k_e; when the named ones fill it, the
        nearest are not fetched (no pgvector round trip: simple and moderate then cost the
        walk only; 8% of 2Wiki's questions, 38% of hotpotqa_dev's, 43% of musique_dev's).
        With `anchor_filter: specific` only specific entities anchor (`specific_entities`),
        named or nearest."""
        named: list[tuple[int, float]] = []
        if self.p.anchor == "lexical" and query:
            named = [(e, 1.0) for e in self._named(query)]
        specific = self.p.anchor_filter == "specific"
        pool = self.p.k_e * (NEAR_POOL if specific else 1)
        near: list[tuple[int, float]] = []
        if len(named) < self.p.k_e:  # the named anchors fill k_e: no HNSW round trip
            with connection() as conn:
                near = store.nearest(
                    conn, "adr_entity_embeddings", self.ix.version, self.ix.dim, qvec, pool
                )
        if specific:
            near = [(e, s) for e, s in near if self.ix.entity_specific[e]]
        taken = {e for e, _ in named}
        anchors = (named + [(e, s) for e, s in near if e not in taken])[: self.p.k_e]
        sub = {f for e, _ in anchors for f in self.ix.entity_facts[e]}
        ranked, scores = self._facts(sub, qvec)
        return anchors, ranked, scores

    def _fact_passages(self, ranked: list[int], scores: np.ndarray) -> dict[str, float]:
        scored: dict[str, float] = {}
        for f, s in zip(ranked, scores, strict=True):
            for pid in self.ix.fact_passages[f]:
                if pid not in scored:
                    scored[pid] = float(s)  # facts come best first: the first is the max
        return scored

    def _insight_passages(self, vertices: list[int], qvec: np.ndarray, into: dict[str, float]):
        if not vertices:
            return
        sims = self.ix.insight_emb[vertices] @ qvec
        for v, s in zip(vertices, sims, strict=True):
            pid = self.ix.hyperedge_passage[v]
            into[pid] = max(into.get(pid, -1.0), float(s))

    def _named(self, query: str, longest: int = 8) -> list[int]:
        """Entities whose name the query holds as a word n-gram, longest first; an n-gram
        inside one already matched adds nothing. An unspecific entity is not matched (its
        words stay free for the n-grams inside it)."""
        words = normalize_phrase(query).split()
        covered = [False] * len(words)
        found: list[int] = []
        specific = self.p.anchor_filter == "specific"
        for n in range(min(longest, len(words)), 0, -1):
            for i in range(len(words) - n + 1):
                e = self.ix.entity_id.get(" ".join(words[i : i + n]))
                if e is None or (specific and not self.ix.entity_specific[e]):
                    continue
                if all(covered[i : i + n]) or e in found:
                    continue
                found.append(e)
                covered[i : i + n] = [True] * n
        return found

    # -- the operators ------------------------------------------------------------------
    def _sub_facts(
        self, anchors: list[tuple[int, float]], ranked: list[int], qvec: np.ndarray
    ) -> tuple[list[int], set[int]]:
        """Eq. 3's E_sub as the reader gets it: the pairwise facts touching the anchors and
        the facts of the higher-order hyperedges holding an anchor (best first), and those
        hyperedges (eq. 4's domain)."""
        hyper = {h for e, _ in anchors for h in self.ix.entity_hyperedges[e]}
        more = {f for h in hyper for f in self.ix.hyperedge_facts[h]} - set(ranked)
        if not more:
            return ranked, hyper
        every = set(ranked) | more
        return self._facts(every, qvec)[0], hyper

    def simple(self, qvec: np.ndarray, query: str = "") -> AdrContext:
        t0 = time.perf_counter()
        anchors, ranked, scores = self._anchor(qvec, query)
        sub = self._sub_facts(anchors, ranked, qvec)[0]
        facts, ftok = self._fact_context(sub)
        names = [self.ix.entity_names[e] for e, _ in anchors]
        scored = self._fact_passages(ranked, scores)
        seeds = dict(anchors)
        return self._finish("simple", t0, scored, facts, ftok, [], names, qvec, seeds, sub)

    def moderate(self, qvec: np.ndarray, query: str = "") -> AdrContext:
        t0 = time.perf_counter()
        anchors, ranked, scores = self._anchor(qvec, query)
        sub, seeds = self._sub_facts(anchors, ranked, qvec)
        facts, ftok = self._fact_context(sub)
        # eq. 4: π of the anchored higher-order hyperedges; eq. 5: the edges above them
        up = sorted({int(self.ix.vertex_edge[u]) for u in seeds})
        if 0 < self.p.max_up_edges < len(up):
            sims = self.ix.narrative_emb[up] @ qvec
            up = [up[i] for i in np.argsort(-sims, kind="stable")[: self.p.max_up_edges]]
        scored = self._fact_passages(ranked, scores)
        self._insight_passages([v for e in up for v in self.ix.edge_shown[e]], qvec, scored)
        names = [self.ix.entity_names[e] for e, _ in anchors]
        ents = dict(anchors)
        return self._finish("moderate", t0, scored, facts, ftok, up, names, qvec, ents, sub)

    def complex(self, qvec: np.ndarray, query: str = "") -> AdrContext:
        t0 = time.perf_counter()
        edges = self._top_edges(qvec)
        # eq. 7: π⁻¹ of every member insight vertex (vertex i is hyperedge i)
        ground = [v for e in edges for v in self.ix.edge_members[e]]
        ranked, fscores = self._facts({f for h in ground for f in self.ix.hyperedge_facts[h]}, qvec)
        facts, ftok = self._fact_context(ranked)
        scored: dict[str, float] = {}
        self._insight_passages(ground, qvec, scored)
        # ppr's seeds: the entities of E_ground's facts, each at its best fact's cosine
        seeds = (
            fact_entities(self.ranker().g.fact_ends, ranked, fscores)
            if self.p.passage_rank == "ppr"
            else {}
        )
        return self._finish("complex", t0, scored, facts, ftok, edges, [], qvec, seeds, ranked)

    def _top_edges(self, qvec: np.ndarray) -> list[int]:
        """Eq. 6: the k_d deep insight edges most similar to the query. `narrative`: by the
        narrative's embedding; `member`: by the edge's most similar member insight (the
        insight vertices' HNSW, edges in order of their best member)."""
        ix, k = self.ix, self.p.k_d
        with connection() as conn:
            if self.p.edge_match == "narrative":
                top = store.nearest(conn, "adr_insight_edges", ix.version, ix.dim, qvec, k)
                return [e for e, _ in top]
            near = store.nearest(
                conn, "adr_insight_vertices", ix.version, ix.dim, qvec, k * self.p.member_pool
            )
        edges: list[int] = []
        for v, _ in near:
            e = int(ix.vertex_edge[v])
            if e not in edges:
                edges.append(e)
                if len(edges) == k:
                    break
        return edges

    def run(self, operator: str, qvec: np.ndarray, query: str = "") -> AdrContext:
        """`query`: the question's text (lexical anchoring reads it)."""
        return getattr(self, check_operator(operator))(qvec, query)
