"""Synonym edges through pgvector's HNSW index instead of the all-pairs pass (issue 18,
part 4): each entity's top-k neighbours by cosine from an HNSW graph built over the
entity embeddings, kept where cosine ≥ the threshold. The all-pairs pass
(`r2adapter.index.graph.synonym_edges`) multiplies every entity by every other (quadratic:
51 s at 2Wiki's 46k entities, ≈ 16 days at 7.6M); an HNSW build and its top-k searches
cost O(E log E). Same rule as the all-pairs pass: pairs (a < b), symmetric (b among a's
neighbours or a among b's), the higher score kept, phrases of ≤ 2 alphanumeric characters
without synonyms. Approximate: `benchmarks/bench_synonyms_hnsw.py` measures its recall
against the all-pairs pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import psycopg
from psycopg import sql


def synonym_edges_hnsw(
    conn: psycopg.Connection,
    embeddings: np.ndarray,
    names: Sequence[str],
    threshold: float = 0.8,
    top_k: int = 100,
    ef_search: int = 200,
    m: int = 16,
    ef_construction: int = 64,
) -> list[tuple[int, int, float]]:
    """`conn`: a pgvector-registered connection; the entities go into a temporary table
    with its HNSW index (dropped at the end of the transaction)."""
    n = len(names)
    if n < 2:
        return []
    eligible = [i for i, name in enumerate(names) if sum(c.isalnum() for c in name) > 2]
    dim = int(embeddings.shape[1])
    # the entity itself comes back first; an HNSW scan returns at most ef_search rows, so a
    # smaller ef_search is also a smaller neighbour list (faster, and it may miss pairs)
    k = min(top_k + 1, n, ef_search)
    pairs: dict[tuple[int, int], float] = {}
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(
            sql.SQL(
                "CREATE TEMP TABLE syn_entities (id int, emb vector({})) ON COMMIT DROP"
            ).format(sql.Literal(dim))
        )
        with cur.copy("COPY syn_entities (id, emb) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "vector"])
            for i in eligible:
                copy.write_row((i, embeddings[i].astype(np.float32)))
        cur.execute(
            sql.SQL(
                "CREATE INDEX ON syn_entities USING hnsw (emb vector_cosine_ops)"
                " WITH (m = {}, ef_construction = {})"
            ).format(sql.Literal(m), sql.Literal(ef_construction))
        )
        cur.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(ef_search)))
        cur.execute(
            "SELECT a.id, b.id, b.score FROM syn_entities a CROSS JOIN LATERAL ("
            " SELECT n.id, 1 - (n.emb <=> a.emb) AS score FROM syn_entities n"
            " ORDER BY n.emb <=> a.emb LIMIT %s) b"
            " WHERE b.id <> a.id AND b.score >= %s",
            (k, threshold),
        )
        for a, b, score in cur:
            key = (a, b) if a < b else (b, a)
            pairs[key] = max(pairs.get(key, 0.0), float(score))
    return [(a, b, s) for (a, b), s in sorted(pairs.items())]
