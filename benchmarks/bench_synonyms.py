"""Synonym edges at growing sizes: the all-pairs pass against pgvector HNSW (two passes),
to find where HNSW becomes the faster one (graph.synonym_search: auto's threshold).

The embeddings are real all-MiniLM-L6-v2 embeddings of short texts, read (only read) from
the environment's cache (`text_embeddings`): every cached entity phrase of every indexed
corpus first (69k here), in a fixed random order, then the cached fact texts ("subject
relation object", 93k), so sizes up to the entities' count are entities only. The HNSW
pass runs in a fresh scratch Postgres (benchmarks/scratch_db.py). Per size: seconds of each
pass (HNSW: index build, first pass, second pass), edges, the HNSW edges' recall of the
all-pairs edges, the edges only HNSW finds, the largest score difference.

    .venv/bin/python benchmarks/bench_synonyms.py --sizes 20000,50000,100000
    .venv/bin/python benchmarks/bench_synonyms.py --quick          # 2,000 and 5,000
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

if not __package__:  # `python benchmarks/bench_synonyms.py`: the root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (  # noqa: E402
    arg_parser,
    compare_edges,
    die,
    finish,
    new_result,
    require_db,
    save_json,
)
from benchmarks.scratch_db import BenchError, vector_connection  # noqa: E402


def pool(encoder: str, seed: int = 0) -> tuple[list[str], Any, int]:
    """Cached entity texts (shuffled), then cached fact texts (shuffled), with their
    embeddings; and how many are entities."""
    import numpy as np

    from r2adapter.store.db import connection
    from r2adapter.store.graph_store import as_array

    rng = np.random.default_rng(seed)
    names: list[str] = []
    vecs: list[Any] = []
    n_entities = 0
    for kind in ("entity", "fact"):
        with connection() as conn:
            rows = conn.execute(
                "SELECT text, embedding FROM text_embeddings WHERE encoder = %s AND kind = %s"
                " ORDER BY text",
                (encoder, kind),
            ).fetchall()
        for i in rng.permutation(len(rows)):
            names.append(rows[i][0])
            vecs.append(as_array(rows[i][1]))
        n_entities = n_entities or len(names)
    return names, np.stack(vecs), n_entities


def measure(conn: Any, emb: Any, names: list[str], p: Any) -> dict[str, Any]:
    """Both passes over these entities, timed, and the HNSW edges against the exact ones."""
    from r2adapter.index.graph import synonym_edges
    from r2adapter.index.synonyms_hnsw import synonym_edges_hnsw

    row: dict[str, Any] = {"load_start": os.getloadavg()[0]}
    t = time.perf_counter()
    exact = synonym_edges(emb, names, p.synonym_threshold, p.synonym_top_k)
    row["all_pairs_s"] = time.perf_counter() - t
    stats: dict[str, float] = {}
    t = time.perf_counter()
    approx = synonym_edges_hnsw(conn, emb, names, p.synonym_threshold, p.synonym_top_k, stats=stats)
    row["hnsw_s"] = time.perf_counter() - t
    row["hnsw_stages"] = stats
    row.update(compare_edges(exact, approx))
    row["hnsw_over_all_pairs"] = row["hnsw_s"] / row["all_pairs_s"]
    row["load_end"] = os.getloadavg()[0]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__, "sizes 2,000 and 5,000", "synonyms_growth.json")
    ap.add_argument("--sizes", default="20000,50000,100000", help="comma-separated sizes")
    ap.add_argument("--encoder", default="all-MiniLM-L6-v2")
    args = ap.parse_args(argv)
    from r2adapter.config import graph_params

    require_db()
    sizes = [2000, 5000] if args.quick else [int(s) for s in args.sizes.split(",") if s]
    p = graph_params()
    names, emb, n_entities = pool(args.encoder)
    if max(sizes) > len(names):
        die(f"only {len(names):,} cached embeddings: sizes up to that")
    print(f"pool: {n_entities:,} entity texts, then {len(names) - n_entities:,} fact texts")
    result = new_result("synonyms_growth", args.quick)
    result.update(
        {
            "encoder": args.encoder,
            "pool": {"entities": n_entities, "facts": len(names) - n_entities},
            "threshold": p.synonym_threshold,
            "top_k": p.synonym_top_k,
            "hnsw": {"m": 16, "ef_construction": 64, "ef_first": 40, "ef_search": 200},
            "sizes": {},
        }
    )
    try:
        with vector_connection("synonyms-growth") as conn:
            for n in sizes:
                row = measure(conn, emb[:n], names[:n], p)
                row["entity_texts"] = min(n, n_entities)
                result["sizes"][str(n)] = row
                save_json(args.out, result)  # each size as it finishes
                print(
                    f"{n:>8,}: all-pairs {row['all_pairs_s']:7.1f} s, HNSW "
                    f"{row['hnsw_s']:7.1f} s ({row['hnsw_over_all_pairs']:.2f}x; build "
                    f"{row['hnsw_stages']['build_s']:.1f} s, searched twice "
                    f"{int(row['hnsw_stages'].get('searched_twice', 0))}), "
                    f"{row['edges']['all_pairs']:,} edges, recall {row['recall']:.4f}, "
                    f"{row['hnsw_only']} HNSW-only (load {row['load_end']:.2f})",
                    flush=True,
                )
    except BenchError as e:
        die(str(e))
    finish(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
