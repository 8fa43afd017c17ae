"""Growth curves: how each per-query and per-build cost of the library's graph retrieval
grows with the corpus.

Synthetic graphs with the shape of the 2Wiki index (`benchmarks/lib/synthetic_graph.py`:
entities, facts, passage–entity and synonym edges per passage, a Zipf tail of popular
entities) become the library's in-memory index (`GraphIndex`, what `load_graph_index`
builds from Postgres: the PPR transition, float32 passage and fact embeddings, fact ends,
passages per entity), and the graph retriever runs on it as it does in the service: its
own seeding (`graph.seed_graph`: every fact scored against the query, the top facts →
phrase seeds, passages seeded by their dense score) and PPR (`graph.run_ppr`) under
`GraphParams` (params.yaml's `graph:`, with `--top-n`, `--r-max` and the solver set for
the scale configuration). Nothing of the retrieval is re-implemented here; per size:

- graph: the transition's build time (`graph_load_s`: `Transition.from_edges`, as the
  loader does; reverse Cuthill–McKee only up to ppr.RCM_MAX_NODES), its memory (`csr_mb`;
  `push_mb` for the local solver's transposed copy) and what the process grew by
  (`rss_graph_mb`); the index's embeddings (`embeddings_mb`, 384-d float32, clustered like
  sentence embeddings, each fact near its passage);
- `graph_search_p50_ms`: `GraphRetriever.scores` (seeding, PPR, the passages' scores)
  and the top 5 taken as `GraphRetriever.retrieve` takes them, after the query's
  embedding and before the passages' rows are read from Postgres;
- on the first `--exact-queries`: `seed_p50_ms` (`seed_graph` alone), the local forward
  push (`ppr_local_*`, `run_ppr` with graph.ppr_solver local, r_max `--r-max`) and the
  exact solver (`ppr_exact_*`, Chebyshev to graph.ppr_tol) from the same reset, and how
  often their top-5 passages agree (`top5_agreement`);
- pgvector HNSW on embedding-like vectors up to `--hnsw-max` rows: build seconds, table +
  index MB, top-5 p50 at the smallest ef_search in (40, 80, 160, 320) whose recall@5
  against exact search is ≥ .95 (`hnsw_p50_ms`; absent above `--hnsw-max`: a 1M-row build
  takes longer on 2 cores than the whole benchmark may).

Queries run one at a time on one BLAS thread (a service worker's query); each timing is
kept by the wall clock (`*_p50_ms`) and by the thread's CPU time (`*_cpu_p50_ms`), which
the other jobs of a shared machine do not inflate. Seeding only the
top N passages is the scale configuration, not the retriever's default: on 2Wiki it loses
FCR@5 .03–.04 (benchmarks/results/ppr_local_graph.json), see docs/scaling.md. The
library's seeding scores every fact and every passage per query (the top N passages are
taken from all the scores), and the index holds every fact's float32 embedding (1.5 KB a
fact: ≈ 16 GB at 1M passages), so the largest size this machine holds is set by memory.

Each cost is fitted against size on log–log axes (the slope: 1 = linear); the plot is saved
beside the JSON. The last line printed is the JSON.

    .venv/bin/python -m benchmarks.perf.bench_scale                          # 10k, 100k
    .venv/bin/python -m benchmarks.perf.bench_scale --sizes 10000,300000 --hnsw-max 10000
    .venv/bin/python -m benchmarks.perf.bench_scale --quick                  # 2k, 20k; no HNSW
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
from threadpoolctl import threadpool_limits
from tqdm import tqdm

from benchmarks.lib.common import R2A, arg_parser, finish, new_result
from benchmarks.lib.synthetic_graph import (
    TWO_WIKI,
    GraphShape,
    corpus_embeddings,
    synthetic_graph,
    synthetic_index,
)
from r2adapter.config import GraphParams, graph_params
from r2adapter.evaluate.results_file import summary_ms
from r2adapter.index.encoder import Encoder
from r2adapter.retrieve.graph import GraphRetriever, run_ppr, seed_graph
from r2adapter.retrieve.graph_index import GraphCache, GraphIndex
from r2adapter.retrieve.ppr import Transition
from r2adapter.retrieve.topk import top_k_stable

# the scale configuration's r_max: with the top N passages seeded (not every passage) the
# reset is concentrated and 1e-6 keeps the exact top 5 (`top5_agreement`, same run); the
# retriever's default (graph.ppr_r_max 1e-8) is set for every passage seeded
R_MAX = 1e-6
PASSAGE_SEEDS = 100  # graph.passage_seed_top_n of the scale configuration
DIM = 384  # all-MiniLM-L6-v2
ENCODER = "synthetic-384"  # the name the synthetic index and its stand-in encoder share
# the costs fitted against size (log–log slope) and plotted
CURVES = (
    "graph_search_cpu_p50_ms",
    "ppr_exact_p50_ms",
    "ppr_local_p50_ms",
    "graph_search_p50_ms",
    "seed_p50_ms",
    "hnsw_p50_ms",
    "csr_mb",
    "graph_load_s",
    "hnsw_build_s",
)
# what each query times, by wall clock and by the thread's CPU time (`*_cpu_p50_ms`)
TIMED = ("graph_search", "seed", "ppr_local", "ppr_exact")
# the GraphParams fields the run reports (the rest are the indexing's or catrag's)
REPORTED = (
    "linking_top_k",
    "fact_top_k",
    "passage_node_weight",
    "damping",
    "ppr_tol",
    "ppr_solver",
    "ppr_r_max",
    "passage_seed_top_n",
    "seed_weighting",
    "fact_filter",
    "fact_edge_scale",
    "synonym_edge_scale",
)


class StandInEncoder:
    """The retriever checks that the index's encoder is its own; queries arrive embedded,
    so nothing is ever encoded."""

    name = ENCODER
    dim = DIM


class OneIndex(GraphCache):
    """A graph cache that holds one synthetic index (no Postgres behind it)."""

    def __init__(self, index: GraphIndex) -> None:
        super().__init__()
        self.index = index

    def get(self, dataset: str) -> GraphIndex:
        return self.index


def scale_params(top_n: int, r_max: float) -> GraphParams:
    """params.yaml's `graph:` with the scale configuration: the top N passages seeded,
    local PPR at `r_max`, no LLM fact filter."""
    p = replace(
        graph_params(),
        passage_seed_top_n=top_n,
        ppr_solver="local",
        ppr_r_max=r_max,
        fact_filter="none",
    )
    p.check()
    return p


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def csr_mb(m: Any) -> float:
    return (m.data.nbytes + m.indices.nbytes + m.indptr.nbytes) / 2**20


def top5(ppr: np.ndarray, n_entities: int) -> set[int]:
    return set(top_k_stable(ppr[n_entities:], 5).tolist())


def bench_graph(
    n: int, shape: GraphShape, queries: int, exact_max: int, exact_queries: int, p: GraphParams
) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    t0 = time.perf_counter()
    g = synthetic_graph(n, shape, seed=n % 1000, sample_passages=queries)
    gen_s = time.perf_counter() - t0
    base_rss = rss_mb()
    t0 = time.perf_counter()
    t = Transition.from_edges(g.n_nodes, g.src, g.dst, g.weight)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    push = t.push
    push_s = time.perf_counter() - t0
    row: dict[str, Any] = {
        "passages": n,
        "nodes": g.n_nodes,
        "entities": g.n_entities,
        "facts": g.n_facts,
        "edges": g.n_edges,
        "generate_s": gen_s,
        "graph_load_s": load_s,
        "push_build_s": push_s,
        "csr_mb": csr_mb(t.matrix),
        "push_mb": csr_mb(push.out),
        "rss_graph_mb": rss_mb() - base_rss,
    }
    fact_ends = np.stack([g.src[: g.n_facts], g.dst[: g.n_facts]], axis=1).astype(np.int64)
    del g.src, g.dst, g.weight
    gc.collect()
    t0 = time.perf_counter()
    passage_emb, fact_emb = corpus_embeddings(g, DIM, rng)
    row["embed_generate_s"] = time.perf_counter() - t0
    row["embeddings_mb"] = (passage_emb.nbytes + fact_emb.nbytes) / 2**20
    # queries: a fact of a sampled passage, with noise (what a question about it looks like)
    f_sample = rng.choice(g.n_facts, queries, replace=False)
    qv = fact_emb[f_sample].copy()
    qv += 0.5 * rng.standard_normal(qv.shape).astype(np.float32) / np.sqrt(DIM)
    qv /= np.linalg.norm(qv, axis=1, keepdims=True)
    index = synthetic_index(g, t, passage_emb, fact_emb, fact_ends, ENCODER)
    del passage_emb, fact_emb
    retriever = GraphRetriever(
        "synthetic",
        encoder=cast(Encoder, StandInEncoder()),
        cache=OneIndex(index),
        params=p,
        seed_triplets=False,
    )
    exact_p = replace(p, ppr_solver="exact")
    wall: dict[str, list[float]] = {k: [] for k in TIMED}
    cpu: dict[str, list[float]] = {k: [] for k in TIMED}
    agree: list[bool] = []
    unmatched = 0

    def timed(key: str, fn: Any) -> Any:
        t0, c0 = time.perf_counter(), time.thread_time()
        out = fn()
        wall[key].append((time.perf_counter() - t0) * 1e3)
        cpu[key].append((time.thread_time() - c0) * 1e3)
        return out

    def search(q: np.ndarray) -> bool:
        scores, _, matched = retriever.scores(q)
        np.argsort(-scores, kind="stable")[:5]  # GraphRetriever.retrieve's top k
        return bool(matched)

    blas = threadpool_limits(1)  # one query, one core (as a service's worker runs it)
    for i, q in enumerate(tqdm(qv, desc=f"search {n:,}", unit="q", mininterval=5)):
        unmatched += not timed("graph_search", lambda q=q: search(q))
        if i >= exact_queries:
            continue
        s = timed("seed", lambda q=q: seed_graph(index, q, p))
        local = timed("ppr_local", lambda s=s: run_ppr(t, s.reset, p))
        if g.n_nodes <= exact_max:
            exact = timed("ppr_exact", lambda s=s: run_ppr(t, s.reset, exact_p))
            agree.append(top5(exact, g.n_entities) == top5(local, g.n_entities))
    blas.unregister()
    for key in TIMED:  # the thread's CPU time: what the query cost, whatever else ran
        row[f"{key}_cpu_p50_ms"] = summary_ms(cpu[key]).get("p50_ms")
    loc, ex, se = (summary_ms(wall[k]) for k in ("ppr_local", "ppr_exact", "graph_search"))
    seed_ms, search_ms, exact_ms = wall["seed"], wall["graph_search"], wall["ppr_exact"]
    row.update(
        {
            "seed_p50_ms": summary_ms(seed_ms).get("p50_ms"),
            "ppr_local_p50_ms": loc.get("p50_ms"),
            "ppr_local_p95_ms": loc.get("p95_ms"),
            "ppr_exact_p50_ms": ex.get("p50_ms"),
            "ppr_exact_p95_ms": ex.get("p95_ms"),
            "graph_search_p50_ms": se.get("p50_ms"),
            "graph_search_p95_ms": se.get("p95_ms"),
            "unmatched": unmatched,  # queries the retriever sent to dense (no fact matched)
            "top5_agreement": float(np.mean(agree)) if agree else None,
            "exact_queries": len(exact_ms),
            "queries": len(search_ms),
            "rss_mb": rss_mb(),
        }
    )
    return row


def embedding_like(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """Unit vectors around cluster centres in a low-rank subspace: the neighbourhood
    structure of sentence embeddings (HNSW recall on isotropic noise means nothing)."""
    centres = rng.standard_normal((max(n // 200, 8), 64)).astype(np.float32)
    basis = rng.standard_normal((64, dim)).astype(np.float32)
    out = np.empty((n, dim), dtype=np.float32)
    for lo in range(0, n, 100_000):
        hi = min(lo + 100_000, n)
        c = centres[rng.integers(0, len(centres), hi - lo)]
        z = c + 0.6 * rng.standard_normal((hi - lo, 64)).astype(np.float32)
        x = z @ basis + 0.3 * rng.standard_normal((hi - lo, dim)).astype(np.float32)
        out[lo:hi] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def bench_hnsw(url: str, n: int, dim: int, queries: int) -> dict[str, Any]:
    import psycopg
    from pgvector.psycopg import register_vector

    rng = np.random.default_rng(n)
    x = embedding_like(n + queries, dim, rng)
    data, qs = x[:n], x[n:]
    exact = [set(np.argsort(-(data @ q))[:5].tolist()) for q in qs]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        conn.execute("DROP TABLE IF EXISTS scale_vectors")
        conn.execute(f"CREATE TABLE scale_vectors (id int PRIMARY KEY, emb vector({dim}))")
        t0 = time.perf_counter()
        with conn.cursor().copy(
            "COPY scale_vectors (id, emb) FROM STDIN WITH (FORMAT BINARY)"
        ) as cp:
            cp.set_types(["int4", "vector"])
            for i in tqdm(range(n), desc=f"COPY {n:,}", unit="row", mininterval=2):
                cp.write_row((i, data[i]))
        copy_s = time.perf_counter() - t0
        conn.execute("SET maintenance_work_mem = '1GB'")
        t0 = time.perf_counter()
        conn.execute("CREATE INDEX ON scale_vectors USING hnsw (emb vector_cosine_ops)")
        build_s = time.perf_counter() - t0
        size = conn.execute("SELECT pg_total_relation_size('scale_vectors')").fetchone()
        row: dict[str, Any] = {
            "rows": n,
            "copy_s": copy_s,
            "hnsw_build_s": build_s,
            "hnsw_table_mb": (size[0] if size else 0) / 2**20,
        }
        for ef in (40, 80, 160, 320):
            conn.execute(f"SET hnsw.ef_search = {ef}")
            ms, hits = [], 0
            for q, gold in zip(qs, exact, strict=True):
                t0 = time.perf_counter()
                got = conn.execute(
                    "SELECT id FROM scale_vectors ORDER BY emb <=> %s LIMIT 5", (q,)
                ).fetchall()
                ms.append((time.perf_counter() - t0) * 1e3)
                hits += len(gold & {r[0] for r in got})
            recall = hits / (5 * len(qs))
            row.update({"hnsw_ef_search": ef, "hnsw_recall_at_5": recall})
            row["hnsw_p50_ms"] = summary_ms(ms)["p50_ms"]
            if recall >= 0.95:
                break
        conn.execute("DROP TABLE scale_vectors")
    return row


def slope(sizes: list[int], values: list[float | None]) -> float | None:
    pts = [(s, v) for s, v in zip(sizes, values, strict=True) if v and v > 0]
    if len(pts) < 2:
        return None
    xs, ys = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return float(np.polyfit(xs, ys, 1)[0])


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(int(s) for s in result["sizes"])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key in CURVES[:-1]:  # build seconds would crowd the plot
        xs = [s for s in sizes if result["sizes"][str(s)].get(key)]
        if len(xs) < 1:
            continue
        ys = [result["sizes"][str(s)][key] for s in xs]
        k = result["slopes"].get(key)
        ax.loglog(xs, ys, marker="o", label=f"{key} (slope {k:.2f})" if k else key)
    ax.set_xlabel("passages")
    ax.set_ylabel("ms / MB / s")
    ax.set_title("Cost against corpus size (log–log)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__ or "", "sizes 2k and 20k, 30 queries, no HNSW", "scale.json")
    ap.add_argument("--sizes", default="10000,100000", help="passages, comma-separated")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument(
        "--exact-queries", type=int, default=20, help="queries the exact solver runs (per size)"
    )
    ap.add_argument("--hnsw-max", type=int, default=100_000, help="largest HNSW table (rows)")
    ap.add_argument(
        "--exact-max",
        type=int,
        default=20_000_000,
        help="largest graph (nodes) the exact solver runs on",
    )
    ap.add_argument(
        "--shape-from",
        type=Path,
        help="an index report to take the shape from (default: the 2Wiki index's shape)",
    )
    ap.add_argument("--db", choices=["scratch", "env"], default="scratch")
    ap.add_argument("--r-max", type=float, default=R_MAX, help="local PPR's residual threshold")
    ap.add_argument(
        "--top-n",
        type=int,
        default=PASSAGE_SEEDS,
        help="passages seeded by their dense score per query (graph.passage_seed_top_n)",
    )
    args = ap.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        print(f"error: --sizes must be integers, got {args.sizes!r}", file=sys.stderr)
        return 1
    if args.quick:
        sizes, args.queries, args.hnsw_max = [2_000, 20_000], 30, 0
    if not sizes or min(sizes) < 100:
        print("error: --sizes must be at least 100 passages each", file=sys.stderr)
        return 1
    shape = GraphShape.from_report(args.shape_from) if args.shape_from else TWO_WIKI
    p = scale_params(args.top_n, args.r_max)
    result = new_result("scale", args.quick)
    result.update(
        {
            "shape": shape.to_dict(),
            "graph_params": {k: v for k, v in asdict(p).items() if k in REPORTED},
            "r_max": p.ppr_r_max,
            "ppr_tol": p.ppr_tol,
            "passage_seeds": p.passage_seed_top_n,
            "search": "the library's GraphRetriever.scores (graph.seed_graph + graph.run_ppr) "
            "on a synthetic GraphIndex; every fact and passage scored exactly",
            "sizes": {},
        }
    )
    for n in sizes:
        result["sizes"][str(n)] = bench_graph(
            n, shape, args.queries, args.exact_max, args.exact_queries, p
        )
        gc.collect()
    hnsw_sizes = [n for n in sizes if n <= args.hnsw_max]
    if hnsw_sizes:
        from r2adapter.evaluate.scratch_db import database

        with database(R2A, args.db, None, "scale") as db:
            for n in hnsw_sizes:
                result["sizes"][str(n)].update(bench_hnsw(db.url, n, 384, 50))
    keys = CURVES
    result["slopes"] = {
        k: slope(sizes, [result["sizes"][str(n)].get(k) for n in sizes]) for k in keys
    }
    first, last = result["sizes"][str(sizes[0])], result["sizes"][str(sizes[-1])]
    result["graph_search_growth"] = last["graph_search_p50_ms"] / first["graph_search_p50_ms"]
    result["graph_search_cpu_growth"] = (
        last["graph_search_cpu_p50_ms"] / first["graph_search_cpu_p50_ms"]
    )
    print(
        f"{'passages':>10} {'nodes':>11} {'csr MB':>8} {'load s':>7} {'exact p50':>10} "
        f"{'local p50':>10} {'search p50':>11} {'top5 agree':>10} {'hnsw p50':>9}"
    )
    for n in sizes:
        r = result["sizes"][str(n)]
        print(
            f"{n:>10,} {r['nodes']:>11,} {r['csr_mb']:>8.1f} {r['graph_load_s']:>7.2f} "
            f"{r['ppr_exact_p50_ms'] or float('nan'):>10.2f} {r['ppr_local_p50_ms']:>10.2f} "
            f"{r['graph_search_p50_ms']:>11.2f} {r['top5_agreement'] or float('nan'):>10.2f} "
            f"{r.get('hnsw_p50_ms', float('nan')):>9.2f}"
        )
    print("slopes (log–log):", {k: round(v, 2) for k, v in result["slopes"].items() if v})
    print(
        f"graph search p50 growth {sizes[0]:,} → {sizes[-1]:,}: "
        f"{result['graph_search_growth']:.2f}x (target ≤ 3x); CPU time "
        f"{result['graph_search_cpu_growth']:.2f}x"
    )
    out = finish(result, args.out)
    plot(result, out.with_suffix(".png"))
    growth = result["graph_search_growth"]
    print(
        json.dumps(
            {
                "sizes": result["sizes"],
                "slopes": result["slopes"],
                "graph_search_growth": growth,
                "graph_search_cpu_growth": result["graph_search_cpu_growth"],
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
