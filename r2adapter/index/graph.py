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


def synonym_edges(
    embeddings: np.ndarray,
    names: Sequence[str],
    threshold: float = 0.8,
    top_k: int = 100,
    block: int = 2048,
) -> list[tuple[int, int, float]]:
    """kNN over normalised entity embeddings: pairs (a < b) with cosine ≥ threshold.

    Phrases of ≤ 2 alphanumeric characters get no synonyms (HippoRAG 2 skips them too).
    """
    n = len(names)
    if n < 2:
        return []
    eligible = np.array([sum(c.isalnum() for c in name) > 2 for name in names])
    emb = embeddings.astype(np.float32, copy=False)
    edges: dict[tuple[int, int], float] = {}
    k = min(top_k + 1, n)
    for start in range(0, n, block):
        sims = emb[start : start + block] @ emb.T
        idx = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        for row, cols in enumerate(idx):
            a = start + row
            if not eligible[a]:
                continue
            for b in cols:
                score = float(sims[row, b])
                if b != a and score >= threshold and eligible[b]:
                    key = (a, int(b)) if a < b else (int(b), a)
                    edges[key] = max(edges.get(key, 0.0), score)
    return [(a, b, s) for (a, b), s in sorted(edges.items())]
