"""Synthetic knowledge graphs with the shape of a real index, at any number of passages.

The shape is read off an index report (`reports/index/<dataset>.json`: entities, facts,
passage–entity and synonym edges per passage) and, where the graph itself is at hand, its
entity popularity: most entities appear in one passage, a few (dates, countries, common
names) in hundreds. Passages are generated one block at a time:

- each passage mentions `new_entities` entities of its own and `linked_entities` already
  known ones, drawn by a Zipf law over entity ids (rank r ∝ r^-zipf_s, ids shuffled), which
  gives the heavy tail of the real passages-per-entity counts;
- its facts join pairs of its entities (fact edges carry the co-occurrence weight 1);
- synonym edges join an entity to a popular one (weight uniform in [0.8, 1]: above the
  synonym threshold).

Node numbering follows the index: entities 0..E−1, then passages E..E+P−1.

`synthetic_index` turns one into the library's in-memory index (`GraphIndex`, what
`load_graph_index` builds from Postgres) with embeddings shaped like sentence embeddings,
so the graph retriever's own seeding and PPR run on it unchanged.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class GraphShape:
    new_entities: float  # entities first mentioned per passage
    linked_entities: float  # mentions of known entities per passage
    facts: float  # per passage
    synonyms: float  # per passage
    zipf_s: float = 1.1  # popularity law of linked entities

    @classmethod
    def from_report(cls, path: Path, zipf_s: float = 1.1) -> GraphShape:
        r = json.loads(path.read_text())
        p = float(r["passages"])
        return cls(
            new_entities=r["entities"] / p,
            linked_entities=(r["passage_entity_edges"] - r["entities"]) / p,
            facts=r["facts"] / p,
            synonyms=r["synonym_edges"] / p,
            zipf_s=zipf_s,
        )

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


# 2Wiki, spaCy OpenIE, index version 1 (reports/index/2wikimultihopqa.json): 6,119 passages,
# 46,394 entities, 63,584 facts, 69,370 passage–entity edges, 127,564 synonym edges
TWO_WIKI = GraphShape(
    new_entities=46394 / 6119,
    linked_entities=(69370 - 46394) / 6119,
    facts=63584 / 6119,
    synonyms=127564 / 6119,
)


@dataclass
class SyntheticGraph:
    n_entities: int
    n_passages: int
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    passage_entities: list[np.ndarray]  # per sampled query passage: its entity ids
    entity_passages: np.ndarray  # passages mentioning each entity
    # facts are the first n_facts edges (src → dst: subject → object); the passage of each
    fact_passage: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))

    @property
    def n_facts(self) -> int:
        return int(self.fact_passage.size)

    @property
    def n_nodes(self) -> int:
        return self.n_entities + self.n_passages

    @property
    def n_edges(self) -> int:
        return int(self.src.size)


def _zipf_ids(rng: np.random.Generator, n_ids: int, size: int, s: float) -> np.ndarray:
    """`size` draws of ids in [0, n_ids) with P(rank r) ∝ r^-s, ranks mapped to shuffled ids."""
    ranks = np.arange(1, n_ids + 1, dtype=np.float64)
    p = ranks**-s
    p /= p.sum()
    cdf = np.cumsum(p)
    draws = np.searchsorted(cdf, rng.random(size), side="right")
    draws = np.minimum(draws, n_ids - 1)
    perm = rng.permutation(n_ids)
    return perm[draws]


def _counts(rng: np.random.Generator, mean: float, n: int) -> np.ndarray:
    return rng.poisson(mean, n).astype(np.int64)


def synthetic_graph(
    n_passages: int, shape: GraphShape = TWO_WIKI, seed: int = 0, sample_passages: int = 200
) -> SyntheticGraph:
    rng = np.random.default_rng(seed)
    new = np.maximum(_counts(rng, shape.new_entities, n_passages), 1)
    n_e = int(new.sum())
    first = np.concatenate([[0], np.cumsum(new)[:-1]])  # passage i owns ids first[i]..+new[i]
    linked = _counts(rng, shape.linked_entities, n_passages)
    # passage → entity edges: its own entities, then linked popular ones
    own_p = np.repeat(np.arange(n_passages), new)
    own_e = np.arange(n_e)
    link_p = np.repeat(np.arange(n_passages), linked)
    link_e = _zipf_ids(rng, n_e, int(linked.sum()), shape.zipf_s)
    pe_p = np.concatenate([own_p, link_p])
    pe_e = np.concatenate([own_e, link_e])
    order = np.lexsort((pe_e, pe_p))
    pe_p, pe_e = pe_p[order], pe_e[order]
    keep = np.ones(pe_p.size, dtype=bool)  # one edge per (passage, entity)
    keep[1:] = (pe_p[1:] != pe_p[:-1]) | (pe_e[1:] != pe_e[:-1])
    pe_p, pe_e = pe_p[keep], pe_e[keep]
    starts = np.searchsorted(pe_p, np.arange(n_passages + 1))
    size = np.diff(starts)
    # facts: pairs of a passage's entities (subject: one of its own, object: any of them)
    n_f = _counts(rng, shape.facts, n_passages)
    f_p = np.repeat(np.arange(n_passages), n_f)
    subj = first[f_p] + (rng.random(f_p.size) * new[f_p]).astype(np.int64)
    obj = pe_e[starts[f_p] + (rng.random(f_p.size) * size[f_p]).astype(np.int64)]
    fact_ok = subj != obj
    subj, obj, f_p = subj[fact_ok], obj[fact_ok], f_p[fact_ok]
    # synonyms: an entity to a popular one
    n_syn = int(round(shape.synonyms * n_passages))
    syn_a = rng.integers(0, n_e, n_syn)
    syn_b = _zipf_ids(rng, n_e, n_syn, shape.zipf_s)
    syn_ok = syn_a != syn_b
    syn_a, syn_b = syn_a[syn_ok], syn_b[syn_ok]
    src = np.concatenate([subj, n_e + pe_p, syn_a])
    dst = np.concatenate([obj, pe_e, syn_b])
    weight = np.concatenate(
        [np.ones(subj.size), np.ones(pe_p.size), rng.uniform(0.8, 1.0, syn_a.size)]
    )
    sample = rng.choice(n_passages, min(sample_passages, n_passages), replace=False)
    return SyntheticGraph(
        n_e,
        n_passages,
        src.astype(np.int64),
        dst.astype(np.int64),
        weight,
        [pe_e[starts[i] : starts[i + 1]] for i in sample],
        np.bincount(pe_e, minlength=n_e).astype(np.float64),
        f_p.astype(np.int32),
    )


LATENT = 32  # the synthetic embeddings' intrinsic dimension


def corpus_embeddings(
    g: SyntheticGraph, dim: int, rng: np.random.Generator, chunk: int = 500_000
) -> tuple[np.ndarray, np.ndarray]:
    """Unit float32 embeddings (as the index holds them) for passages and facts, shaped
    like sentence embeddings: passages around topic centres in a LATENT-d space, each fact
    near its passage's latent point, both projected to `dim` with noise (a pool of noise
    rows, reused: drawing tens of millions × dim normals would dominate the benchmark)."""
    topics = rng.standard_normal((max(g.n_passages // 200, 8), LATENT)).astype(np.float32)
    basis = rng.standard_normal((LATENT, dim)).astype(np.float32) / np.sqrt(LATENT)
    pool = 0.3 * rng.standard_normal((65_536, dim)).astype(np.float32)
    latent = topics[rng.integers(0, len(topics), g.n_passages)]
    latent += 0.6 * rng.standard_normal(latent.shape).astype(np.float32)

    def table(n: int, latent_of: Any) -> np.ndarray:
        out = np.empty((n, dim), dtype=np.float32)
        for lo in range(0, n, chunk):
            z = latent_of(lo, min(lo + chunk, n))
            x = z @ basis + pool[rng.integers(0, len(pool), len(z))]
            x /= np.linalg.norm(x, axis=1, keepdims=True)
            out[lo : lo + len(z)] = x
        return out

    def fact_latent(lo: int, hi: int) -> np.ndarray:
        fp = g.fact_passage[lo:hi]
        return latent[fp] + 0.4 * rng.standard_normal((len(fp), LATENT)).astype(np.float32)

    return table(g.n_passages, lambda lo, hi: latent[lo:hi]), table(g.n_facts, fact_latent)


def synthetic_index(
    g: SyntheticGraph,
    transition: Any,
    passage_emb: np.ndarray,
    fact_emb: np.ndarray,
    fact_ends: np.ndarray,
    encoder: str,
) -> Any:
    """The library's `GraphIndex` over a synthetic graph: its transition (built by the
    caller, `Transition.from_edges`, as the loader does), embeddings, fact ends and the
    passages per entity (HippoRAG 2's divisor); no edge list (only graph strategies at the
    stored edge scales run on it) and no Postgres behind it."""
    from r2adapter.retrieve.graph_index import GraphIndex
    from r2adapter.store.graph_store import IndexVersion

    version = IndexVersion(
        0,
        "synthetic",
        encoder,
        int(passage_emb.shape[1]),
        "synthetic",
        "",
        {"passages": g.n_passages, "entities": g.n_entities, "facts": g.n_facts},
    )
    return GraphIndex(
        version,
        g.n_entities,
        [f"p{i}" for i in range(g.n_passages)],
        [""] * g.n_passages,
        passage_emb,
        fact_emb,
        fact_ends,
        g.entity_passages,
        transition,
    )
