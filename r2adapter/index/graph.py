"""Knowledge-graph construction from OpenIE output (HippoRAG 2), as pure functions.

Phrase nodes are the normalised subjects and objects of triples; a fact edge joins subject
and object, weighted by how often the pair co-occurs; every passage links to the phrases of
its triples; synonym edges join phrases whose embeddings have cosine ≥ the threshold.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from r2adapter.data.schema import Extraction, GraphParts
from r2adapter.index.openie import normalize_phrase


def build_parts(passage_ids: Sequence[str], extractions: Sequence[Extraction]) -> GraphParts:
    entity_id: dict[str, int] = {}
    fact_id: dict[tuple[int, str, int], int] = {}
    weight: Counter[int] = Counter()
    fact_passages: set[tuple[int, str]] = set()
    passage_entities: set[tuple[str, int]] = set()

    def node(phrase: str) -> int:
        return entity_id.setdefault(phrase, len(entity_id))

    for pid, ex in zip(passage_ids, extractions, strict=True):
        for s_raw, r, o_raw in ex.triples:
            s, o = normalize_phrase(s_raw), normalize_phrase(o_raw)
            if not s or not o or s == o:
                continue
            key = (node(s), r.strip().lower(), node(o))
            fid = fact_id.setdefault(key, len(fact_id))
            weight[fid] += 1
            fact_passages.add((fid, pid))
            passage_entities.add((pid, key[0]))
            passage_entities.add((pid, key[2]))
    return GraphParts(
        entities=list(entity_id),
        facts=list(fact_id),
        fact_weight=[weight[i] for i in range(len(fact_id))],
        fact_passages=sorted(fact_passages),
        passage_entities=sorted(passage_entities),
    )


SYNONYM_BLOCK_BYTES = 512 * 2**20


def synonym_edges(
    embeddings: np.ndarray,
    names: Sequence[str],
    threshold: float = 0.8,
    top_k: int = 100,
    block: int = 2048,
) -> list[tuple[int, int, float]]:
    """kNN over normalised entity embeddings: pairs (a < b) with cosine ≥ threshold among
    each entity's `top_k` nearest (itself counted, as HippoRAG 2's kNN does), scored by the
    higher of the two directions.

    Phrases of ≤ 2 alphanumeric characters get no synonyms (HippoRAG 2 skips them too).
    Vectorised by block of rows: a row with at most top_k + 1 entries ≥ the threshold keeps
    them all (they are all in its top k whatever the order), a crowded row the top k that
    `np.argpartition` picks; the same edges and scores as the per-pair loop it replaced
    (2Wiki's 46k entities: 21.5 s against 60.2 s, one core free).
    """
    n = len(names)
    if n < 2:
        return []
    eligible = np.array([sum(c.isalnum() for c in name) > 2 for name in names])
    emb = embeddings.astype(np.float32, copy=False)
    k = min(top_k + 1, n)
    # a block's similarities are rows x n float32: at most SYNONYM_BLOCK_BYTES (2Wiki's 46k
    # entities keep the 2,048 rows)
    block = max(64, min(block, SYNONYM_BLOCK_BYTES // (4 * n)))
    found_a, found_b, found_s = [], [], []
    for start in range(0, n, block):
        sims = emb[start : start + block] @ emb.T
        hit = sims >= threshold
        # counted before the eligibility masks: every entry takes a place in the top k
        crowded = np.flatnonzero(np.count_nonzero(hit, axis=1) > k)
        if crowded.size:
            top = np.argpartition(-sims[crowded], k - 1, axis=1)[:, :k]
            keep = np.zeros((crowded.size, n), dtype=bool)
            np.put_along_axis(keep, top, True, axis=1)
            hit[crowded] &= keep
        hit[~eligible[start : start + block]] = False
        hit[:, ~eligible] = False
        rows, cols = np.nonzero(hit)
        a = rows + start
        other = a != cols
        found_a.append(a[other])
        found_b.append(cols[other])
        found_s.append(sims[rows[other], cols[other]])
    a, b, s = np.concatenate(found_a), np.concatenate(found_b), np.concatenate(found_s)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    order = np.lexsort((-s, hi, lo))  # by pair, the higher score of its two directions first
    lo, hi, s = lo[order], hi[order], s[order]
    first = np.ones(len(lo), dtype=bool)
    first[1:] = (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])
    scores = s[first].astype(np.float64).tolist()
    return list(zip(lo[first].tolist(), hi[first].tolist(), scores, strict=True))
