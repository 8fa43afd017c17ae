"""Synonym edges: the all-pairs pass against pgvector HNSW, on a real index's entities.

The entities and their cached embeddings are read (only read) from the environment's
database (the latest index version of --dataset, default 2Wiki); the HNSW pass runs in a
fresh scratch Postgres (benchmarks/scratch_db.py), so the main database gets no table or
index. Reported: seconds of each pass, the edges each finds, the HNSW pass's recall of
the all-pairs edges, the edges only it finds, and the largest score difference.

    .venv/bin/python benchmarks/bench_synonyms_hnsw.py                 # 2Wiki, all entities
    .venv/bin/python benchmarks/bench_synonyms_hnsw.py --quick         # the first 5,000
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

if not __package__:  # `python benchmarks/bench_synonyms_hnsw.py`: the root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (  # noqa: E402
    arg_parser,
    compare_edges,
    die,
    finish,
    new_result,
    require_db,
)
from benchmarks.scratch_db import BenchError, vector_connection  # noqa: E402


def entities(dataset: str, limit: int | None) -> tuple[int, list[str], Any]:
    import numpy as np

    from r2adapter.store import graph_store as gs
    from r2adapter.store.db import connection

    v = gs.require_version(dataset)
    with connection() as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM entities WHERE index_version = %s ORDER BY id", (v.id,)
            )
        ]
    names = names[:limit] if limit else names
    cached = gs.cached_text_embeddings(v.encoder, "entity", names)
    missing = [n for n in names if n not in cached]
    if missing:
        die(f"{len(missing)} entity embeddings of index version {v.id} are not cached")
    return v.id, names, np.stack([cached[n] for n in names])


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__, "the first 5,000 entities", "synonyms_hnsw.json")
    ap.add_argument("--dataset", default="2wikimultihopqa")
    ap.add_argument("--limit", type=int, help="the first N entities only")
    ap.add_argument("--ef-search", type=int, default=200)
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construction", type=int, default=64)
    args = ap.parse_args(argv)
    from r2adapter.config import graph_params
    from r2adapter.index.graph import synonym_edges
    from r2adapter.index.synonyms_hnsw import synonym_edges_hnsw

    require_db()
    p = graph_params()
    limit = 5000 if args.quick and not args.limit else args.limit
    version, names, emb = entities(args.dataset, limit)
    print(f"{args.dataset} index version {version}: {len(names):,} entities")
    result = new_result("synonyms_hnsw", args.quick)
    result.update(
        {
            "dataset": args.dataset,
            "index_version": version,
            "entities": len(names),
            "threshold": p.synonym_threshold,
            "top_k": p.synonym_top_k,
            "hnsw": {
                "m": args.m,
                "ef_construction": args.ef_construction,
                "ef_search": args.ef_search,
            },
        }
    )
    t = time.perf_counter()
    exact = synonym_edges(emb, names, p.synonym_threshold, p.synonym_top_k)
    result["all_pairs_s"] = time.perf_counter() - t
    try:
        with vector_connection("synonyms-hnsw") as conn:
            t = time.perf_counter()
            approx = synonym_edges_hnsw(
                conn, emb, names, p.synonym_threshold, p.synonym_top_k,
                args.ef_search, args.m, args.ef_construction,
            )  # fmt: skip
            result["hnsw_s"] = time.perf_counter() - t
    except BenchError as e:
        die(str(e))
    result.update(compare_edges(exact, approx))
    edges = result["edges"]
    print(
        f"all-pairs {result['all_pairs_s']:.1f} s, {edges['all_pairs']:,} edges; HNSW "
        f"{result['hnsw_s']:.1f} s, {edges['hnsw']:,} edges: recall {result['recall']:.4f}, "
        f"{result['hnsw_only']:,} edges only HNSW finds, max score diff "
        f"{result['max_score_diff']:.1e} (load {os.getloadavg()[0]:.2f})"
    )
    finish(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
