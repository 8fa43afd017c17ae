"""ADR's dual hypergraph (ADR §3.1, after DHI) from OpenIE output, as pure functions.

H_K: entities are the knowledge graph's phrase nodes, pairwise edges its facts; a
higher-order factual hyperedge (|e| ≥ 3) joins the entities that one sentence's facts
relate. OpenIE backends give triples per passage, not per sentence, so each triple is
placed in the passage sentence that names both its ends (else one end; else nowhere).
π maps each higher-order hyperedge to one insight vertex of H_D, whose atomic insight is
extractive: the source sentence, behind its passage's title (the sentence's usual subject:
"He was born in …"). Deep insight edges of H_D are the Leiden communities of the insight
vertices, joined by shared entities and by embedding neighbours; each carries a narrative:
its most central member insights within a token budget.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from r2adapter.config import AdrParams
from r2adapter.data.schema import Extraction
from r2adapter.index.openie import normalize_phrase

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])|\n+")


def split_sentences(text: str) -> list[str]:
    """Sentences by end punctuation before a capital or digit, and by line breaks."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def sentence_of(subject: str, obj: str, normalised: Sequence[str]) -> int | None:
    """The first sentence (normalised, space-padded) naming both ends; else one end."""
    s, o = f" {normalize_phrase(subject)} ", f" {normalize_phrase(obj)} "
    best, where = 0, None
    for i, sent in enumerate(normalised):
        score = (s in sent) + (o in sent)
        if score > best:
            best, where = score, i
            if score == 2:
                break
    return where


@dataclass(frozen=True)
class Hyperedge:
    passage_id: str
    sentence: str
    members: tuple[int, ...]  # entity ids, sorted
    insight: str  # π(e)'s atomic insight text


def hyperedges(
    passages: Sequence[tuple[str, str, str]],
    extractions: Sequence[Extraction],
    entity_id: dict[str, int],
    min_size: int = 3,
) -> list[Hyperedge]:
    """Higher-order factual hyperedges: per (passage, sentence), the entities of the triples
    placed in that sentence, when there are at least `min_size` of them."""
    out: list[Hyperedge] = []
    for (pid, title, text), ex in zip(passages, extractions, strict=True):
        if not ex.triples:
            continue
        sents = split_sentences(text)
        norm = [f" {normalize_phrase(x)} " for x in sents]
        members: dict[int, set[int]] = defaultdict(set)
        for s_raw, _, o_raw in ex.triples:
            s, o = entity_id.get(normalize_phrase(s_raw)), entity_id.get(normalize_phrase(o_raw))
            if s is None or o is None or s == o:
                continue  # the graph dropped it too (r2adapter/index/graph.py)
            i = sentence_of(s_raw, o_raw, norm)
            if i is not None:
                members[i].update((s, o))
        for i in sorted(members):
            if len(members[i]) >= min_size:
                sent = sents[i]
                out.append(Hyperedge(pid, sent, tuple(sorted(members[i])), f"{title}: {sent}"))
    return out


def insight_links(
    edges: Sequence[Hyperedge],
    emb: np.ndarray,
    max_entity_insights: int = 50,
    knn: int = 5,
    threshold: float = 0.6,
) -> dict[tuple[int, int], float]:
    """Weighted links between insight vertices: +1 per shared entity (an entity in more
    than `max_entity_insights` insights links none), + cosine for each of a vertex's `knn`
    nearest neighbours at cosine ≥ `threshold`."""
    by_entity: dict[int, list[int]] = defaultdict(list)
    for v, e in enumerate(edges):
        for ent in e.members:
            by_entity[ent].append(v)
    links: dict[tuple[int, int], float] = defaultdict(float)
    for vs in by_entity.values():
        if 2 <= len(vs) <= max_entity_insights:
            for i, a in enumerate(vs):
                for b in vs[i + 1 :]:
                    links[(a, b)] += 1.0
    n = len(edges)
    if knn and n > 1:
        k = min(knn + 1, n)
        near: dict[tuple[int, int], float] = {}
        for start in range(0, n, 2048):
            sims = emb[start : start + 2048] @ emb.T
            idx = np.argpartition(-sims, k - 1, axis=1)[:, :k]
            for row, cols in enumerate(idx):
                a = start + row
                for b in cols:
                    if b != a and sims[row, b] >= threshold:
                        near[(a, int(b)) if a < b else (int(b), a)] = float(sims[row, b])
        for key, sim in near.items():  # a mutual neighbour counts once
            links[key] += sim
    return dict(links)


def communities(
    n: int,
    links: dict[tuple[int, int], float],
    resolution: float = 0.1,
    seed: int = 13,
    objective: str = "CPM",
) -> tuple[list[list[int]], np.ndarray]:
    """Leiden communities of the insight vertices (CPM by default: its resolution is a
    density, so community sizes do not grow with the corpus as modularity's do), each
    sorted by decreasing centrality (weighted degree inside the community, normalised to
    its maximum), and the centrality of every vertex. Every vertex is in exactly one."""
    import igraph as ig

    pairs = sorted(links)
    g = ig.Graph(n=n, edges=pairs)
    g.es["weight"] = [links[p] for p in pairs]
    state = random.getstate()
    random.seed(seed)  # igraph draws from Python's random: a fixed seed, a fixed partition
    try:
        part = g.community_leiden(
            objective_function=objective, weights="weight", resolution=resolution,
            n_iterations=-1,
        )  # fmt: skip
    finally:
        random.setstate(state)
    membership = np.asarray(part.membership, dtype=np.int64)
    strength = np.zeros(n)
    for (a, b), w in links.items():
        if membership[a] == membership[b]:
            strength[a] += w
            strength[b] += w
    groups: dict[int, list[int]] = defaultdict(list)
    for v, c in enumerate(membership):
        groups[int(c)].append(v)
    centrality = np.zeros(n)
    out = []
    for c in sorted(groups, key=lambda c: min(groups[c])):
        vs = groups[c]
        top = max(strength[v] for v in vs)
        for v in vs:
            centrality[v] = strength[v] / top if top > 0 else 1.0
        out.append(sorted(vs, key=lambda v: (-centrality[v], v)))
    return out, centrality


def narrative_members(members: Sequence[int], tokens: Sequence[int], budget: int) -> list[int]:
    """The members an extractive narrative shows: in order of centrality while they fit
    `budget` tokens (the first always)."""
    chosen: list[int] = []
    used = 0
    for v in members:
        if chosen and used + tokens[v] > budget:
            break
        chosen.append(v)
        used += tokens[v]
    return chosen


def narrative(
    members: Sequence[int], texts: Sequence[str], tokens: Sequence[int], budget: int
) -> str:
    """The extractive narrative of a deep insight edge (its most central insights)."""
    return " ".join(texts[v] for v in narrative_members(members, tokens, budget))


@dataclass
class DualHypergraph:
    """What the index step stores: H_K's higher-order hyperedges (π: hyperedge i is insight
    vertex i), the insight vertices' texts, tokens and embeddings, and H_D's deep insight
    edges (members by centrality) with their narratives, tokens and embeddings."""

    hyperedges: list[Hyperedge]
    insight_tokens: list[int]
    insight_emb: np.ndarray
    edges: list[list[int]]
    centrality: np.ndarray
    narratives: list[str]
    narrative_tokens: list[int]
    narrative_emb: np.ndarray
    llm_fallbacks: int = 0  # LLM-written texts that timed out or failed: extractive used

    def counts(self) -> dict[str, int]:
        sizes = [len(m) for m in self.edges]
        return {
            "adr_hyperedges": len(self.hyperedges),
            "adr_insight_vertices": len(self.hyperedges),
            "adr_insight_edges": len(self.edges),
            "adr_largest_insight_edge": max(sizes, default=0),
            "adr_singleton_insight_edges": sum(s == 1 for s in sizes),
            "adr_llm_fallbacks": self.llm_fallbacks,
        }


Embed = Callable[[str, list[str]], np.ndarray]  # (kind, texts) -> normalised embeddings
Count = Callable[[list[str]], list[int]]  # texts -> token counts


def build_dual_hypergraph(
    passages: Sequence[tuple[str, str, str]],
    extractions: Sequence[Extraction],
    entity_id: dict[str, int],
    embed: Embed,
    count: Count,
    p: AdrParams,
    write_insight: Callable[[list[str]], tuple[list[str], int]] | None = None,
) -> DualHypergraph:
    """H_K's higher-order hyperedges, π and H_D with `p` (AdrParams). `write_insight` turns
    extractive texts into LLM-written ones (returning how many fell back); None: extractive."""
    edges = hyperedges(passages, extractions, entity_id, p.min_hyperedge)
    fallbacks = 0
    texts = [e.insight for e in edges]
    if write_insight is not None and texts:
        texts, fallbacks = write_insight(texts)
        edges = [
            Hyperedge(e.passage_id, e.sentence, e.members, t)
            for e, t in zip(edges, texts, strict=True)
        ]
    tokens = count(texts)
    emb = embed("insight", texts)
    links = insight_links(edges, emb, p.max_entity_insights, p.knn, p.knn_threshold)
    groups, centrality = communities(len(edges), links, p.resolution, p.seed, p.objective)
    stories = [narrative(g, texts, tokens, p.narrative_tokens) for g in groups]
    return DualHypergraph(
        edges,
        tokens,
        emb,
        groups,
        centrality,
        stories,
        count(stories),
        narrative_embeddings(embed, stories, texts, emb),
        fallbacks,
    )


def narrative_embeddings(
    embed: Embed, stories: Sequence[str], texts: Sequence[str], emb: np.ndarray
) -> np.ndarray:
    """The narratives' embeddings: a narrative that is one insight's text (a singleton edge,
    or one whose first member fills the budget: 2Wiki 732 of 1,631) has that insight's
    vector, embedded already; the others are embedded as narratives."""
    at = {t: i for i, t in enumerate(texts)}
    rest = [s for s in stories if s not in at]
    fresh = embed("narrative", rest)
    if len(rest) == len(stories):
        return fresh
    out = np.empty((len(stories), emb.shape[1]), dtype=np.float32)
    j = 0
    for i, s in enumerate(stories):
        if s in at:
            out[i] = emb[at[s]]
        else:
            out[i] = fresh[j]
            j += 1
    return out
