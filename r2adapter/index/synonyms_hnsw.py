"""Synonym edges through pgvector's HNSW index instead of the all-pairs pass (issue 18,
part 4): each entity's top-k neighbours by cosine from an HNSW graph built over the
entity embeddings, kept where cosine ≥ the threshold. The all-pairs pass
(`r2adapter.index.graph.synonym_edges`) multiplies every entity by every other (quadratic:
51 s at 2Wiki's 46k entities, ≈ 16 days at 7.6M); an HNSW build and its top-k searches
cost O(E log E). Same rule as the all-pairs pass: pairs (a < b), symmetric (b among a's
neighbours or a among b's), the higher score kept, phrases of ≤ 2 alphanumeric characters
without synonyms. Approximate: `benchmarks/bench_synonyms.py` measures its recall against
the all-pairs pass and where it becomes the faster one (`graph.synonym_search`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import psycopg
from psycopg import sql

from r2adapter.config import GraphParams


def synonym_search(p: GraphParams, n_entities: int) -> str:
    """`exact` (all-pairs) or `hnsw`: graph.synonym_search, `auto` by the number of
    entities (HNSW above graph.synonym_hnsw_above)."""
    if p.synonym_search != "auto":
        return p.synonym_search
    return "hnsw" if n_entities > p.synonym_hnsw_above else "exact"


def synonym_edges_hnsw(
    conn: psycopg.Connection,
    embeddings: np.ndarray,
    names: Sequence[str],
    threshold: float = 0.8,
    top_k: int = 100,
    ef_search: int = 200,
    m: int = 16,
    ef_construction: int = 64,
    ef_first: int = 40,
    stats: dict[str, float] | None = None,
) -> list[tuple[int, int, float]]:
    """`conn`: a pgvector-registered connection; the entities go into a temporary table
    with its HNSW index (dropped at the end of the transaction).

    Two passes: most entities have a handful of neighbours above the threshold (2Wiki: 5.5
    on average), so every entity is searched first at `ef_first` (a neighbour list that
    short); an entity whose list comes back full, every neighbour above the threshold (a
    cluster of near-duplicates may hold more), is searched again at `ef_search` with the
    full top_k. One pass at ef_search 40 alone kept 81.6% of 2Wiki's pairs; with the second
    pass 99.98% of 50k real entities' pairs (benchmarks/results/synonyms_growth.json).
    `stats`, when given, receives each stage's seconds and the entities searched twice."""
    n = len(names)
    if n < 2:
        return []
    eligible = [i for i, name in enumerate(names) if sum(c.isalnum() for c in name) > 2]
    dim = int(embeddings.shape[1])
    # the entity itself comes back first; an HNSW scan returns at most ef_search rows, so a
    # smaller ef_search is also a smaller neighbour list (faster, and it may miss pairs)
    k = min(top_k + 1, n, ef_search)
    first = min(k, ef_first)
    pairs: dict[tuple[int, int], float] = {}
    took = stats if stats is not None else {}
    t = time.perf_counter()
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
        # pgvector builds the graph in memory while it fits maintenance_work_mem (Postgres'
        # default 64 MB: ~35k entities of 384 dimensions) and far slower on disk beyond it
        # (50k real entities: 198 s of a 407 s pass); room for the vectors and links, twice
        build_mb = min(max(64, 2 * len(eligible) * (4 * dim + 16 * m) // 2**20), 8192)
        cur.execute(
            sql.SQL("SET LOCAL maintenance_work_mem = {}").format(sql.Literal(f"{build_mb}MB"))
        )
        cur.execute(
            sql.SQL(
                "CREATE INDEX ON syn_entities USING hnsw (emb vector_cosine_ops)"
                " WITH (m = {}, ef_construction = {})"
            ).format(sql.Literal(m), sql.Literal(ef_construction))
        )
        took["build_s"], t = time.perf_counter() - t, time.perf_counter()
        found = _search(cur, first, ef_search if first == k else ef_first, threshold, None)
        if first < k:
            per_entity: dict[int, int] = {}
            for a, _, _ in found:
                per_entity[a] = per_entity.get(a, 0) + 1
            full = [a for a, c in per_entity.items() if c >= first - 1]  # self may be absent
            took["first_pass_s"], t = time.perf_counter() - t, time.perf_counter()
            took["searched_twice"] = len(full)
            if full:
                found += _search(cur, k, ef_search, threshold, full)
            took["second_pass_s"] = time.perf_counter() - t
        for a, b, score in found:
            key = (a, b) if a < b else (b, a)
            pairs[key] = max(pairs.get(key, 0.0), float(score))
    return [(a, b, s) for (a, b), s in sorted(pairs.items())]


def _search(
    cur: psycopg.Cursor, k: int, ef_search: int, threshold: float, ids: list[int] | None
) -> list[tuple[int, int, float]]:
    """(entity, neighbour, cosine) for the top k of each entity (of `ids`, else all),
    kept above the threshold."""
    cur.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(ef_search)))
    where = "" if ids is None else " AND a.id = ANY(%s)"
    cur.execute(
        "SELECT a.id, b.id, b.score FROM syn_entities a CROSS JOIN LATERAL ("
        " SELECT n.id, 1 - (n.emb <=> a.emb) AS score FROM syn_entities n"
        " ORDER BY n.emb <=> a.emb LIMIT %s) b"
        " WHERE b.id <> a.id AND b.score >= %s" + where,
        (k, threshold) if ids is None else (k, threshold, ids),
    )
    return [(int(a), int(b), float(s)) for a, b, s in cur]
