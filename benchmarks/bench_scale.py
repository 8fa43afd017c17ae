"""Growth curves: how each per-query and per-build cost grows with the corpus.

Synthetic graphs with the shape of the 2Wiki index (`benchmarks/synthetic_graph.py`:
entities, facts, passage–entity and synonym edges per passage, a Zipf tail of popular
entities) at each size, and per size:

- graph: CSR build time (`graph_load_s`, edges → the PPR transition, as a service does on
  load; reverse Cuthill–McKee only up to ppr.RCM_MAX_NODES), its memory (`csr_mb`;
  `push_mb` for the local solver's transposed copy) and what the process grew by
  (`rss_graph_mb`);
- the corpus's embeddings (384-d, int8, clustered like sentence embeddings; each fact
  near its passage) and an in-memory ANN index over passages and one over facts
  (`benchmarks/ann_index.py`: IVF lists of 512 under a two-level quantizer; `ann_build_s`,
  `embeddings_mb`), each at the smallest nprobe whose recall against exact search is
  ≥ .95 for facts, ≥ .9 for the top N passages
  (`ann_fact_recall_at_5`, `ann_passage_recall_at_n`);
- `graph_search_p50_ms`: a whole graph search after the query's embedding, every
  per-query term that grew with the corpus included: the top facts by ANN (not a product
  with every fact) → phrase seeds (fact score ÷ passages, the best 5), the top
  `passage_seed_top_n` passages by ANN (not a score per passage) at 0.05 × their min-max
  score, local PPR (r_max = graph.ppr_r_max), the top 5 passages; `ann_p50_ms` is its two
  ANN lookups;
- PPR from those resets: the local forward push (`ppr_local_*`) and, on the first
  `--exact-queries`, the exact solver (`ppr_exact_*`, Chebyshev to ppr_tol 1e-6), p50/p95,
  and how often their top-5 passages agree (`top5_agreement`);
- pgvector HNSW on embedding-like vectors up to `--hnsw-max` rows: build seconds, table +
  index MB, top-5 p50 at the smallest ef_search in (40, 80, 160, 320) whose recall@5
  against exact search is ≥ .95 (`hnsw_p50_ms`; absent above `--hnsw-max`: a 1M-row build
  takes longer on 2 cores than the whole benchmark may).

Queries run one at a time on one BLAS thread (a service worker's query). Seeding only the
top N passages is the scale configuration, not the retriever's default: on 2Wiki it loses
FCR@5 .03–.04 (benchmarks/results/ppr_local_graph.json), see docs/scaling.md.

Each cost is fitted against size on log–log axes (the slope: 1 = linear); the plot is saved
beside the JSON. The last line printed is the JSON.

    .venv/bin/python benchmarks/bench_scale.py                          # 10k, 100k, 1M
    .venv/bin/python benchmarks/bench_scale.py --sizes 10000,100000 --hnsw-max 100000
    .venv/bin/python benchmarks/bench_scale.py --quick                  # 2k, 20k; no HNSW
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits
from tqdm import tqdm

if not __package__:  # `python benchmarks/bench_scale.py`: the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.ann_index import IVFIndex, quantize  # noqa: E402
from benchmarks.common import arg_parser, finish, new_result, summary_ms  # noqa: E402
from benchmarks.synthetic_graph import TWO_WIKI, GraphShape, synthetic_graph  # noqa: E402
from r2adapter.retrieve.ppr import Transition, ppr_solve  # noqa: E402

DAMPING = 0.5
PPR_TOL = 1e-6
# the scale configuration's r_max: with the top N passages seeded (not every passage) the
# reset is concentrated and 1e-6 keeps the exact top 5 (`top5_agreement`, same run); the
# retriever's default (graph.ppr_r_max 1e-8) is set for every passage seeded
R_MAX = 1e-6
PASSAGE_SEEDS = 100  # passages seeded by their dense score (graph.passage_seed_top_n)
LINKING_TOP_K = 5
FACT_TOP_K = 5
PASSAGE_NODE_WEIGHT = 0.05
DIM = 384  # all-MiniLM-L6-v2
LATENT = 32  # the synthetic embeddings' intrinsic dimension
LIST_SIZE = 512  # vectors per IVF list
# the costs fitted against size (log–log slope) and plotted
CURVES = (
    "ppr_exact_p50_ms",
    "ppr_local_p50_ms",
    "graph_search_p50_ms",
    "ann_p50_ms",
    "hnsw_p50_ms",
    "csr_mb",
    "graph_load_s",
    "hnsw_build_s",
)


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def csr_mb(m: Any) -> float:
    return (m.data.nbytes + m.indices.nbytes + m.indptr.nbytes) / 2**20


def top_passages(nodes: np.ndarray, values: np.ndarray, n_entities: int, k: int) -> set[int]:
    is_p = nodes >= n_entities
    nodes, values = nodes[is_p], values[is_p]
    top = np.argsort(-values, kind="stable")[:k]
    return set(nodes[top].tolist())


def corpus_embeddings(
    g: Any, dim: int, rng: np.random.Generator, chunk: int = 500_000
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """int8-quantized unit embeddings (vectors, scales) for passages and facts, shaped like
    sentence embeddings: passages around topic centres in a LATENT-d space, each fact near
    its passage's latent point, both projected to `dim` with noise (a pool of noise rows,
    reused: drawing tens of millions × dim normals would dominate the benchmark)."""
    topics = rng.standard_normal((max(g.n_passages // 200, 8), LATENT)).astype(np.float32)
    basis = rng.standard_normal((LATENT, dim)).astype(np.float32) / np.sqrt(LATENT)
    pool = 0.3 * rng.standard_normal((65_536, dim)).astype(np.float32)
    latent = topics[rng.integers(0, len(topics), g.n_passages)]
    latent += 0.6 * rng.standard_normal(latent.shape).astype(np.float32)

    def embed(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = z @ basis + pool[rng.integers(0, len(pool), len(z))]
        return quantize(x / np.linalg.norm(x, axis=1, keepdims=True))

    def table(n: int, latent_of: Any) -> tuple[np.ndarray, np.ndarray]:
        vec, scale = np.empty((n, dim), dtype=np.int8), np.empty(n, dtype=np.float32)
        for lo in range(0, n, chunk):
            vec[lo : lo + chunk], scale[lo : lo + chunk] = embed(latent_of(lo, lo + chunk))
        return vec, scale

    passages = table(g.n_passages, lambda lo, hi: latent[lo:hi])

    def fact_latent(lo: int, hi: int) -> np.ndarray:
        fp = g.fact_passage[lo:hi]
        return latent[fp] + 0.4 * rng.standard_normal((len(fp), LATENT)).astype(np.float32)

    return passages, table(g.n_facts, fact_latent)


def tune_nprobe(index: Any, queries: np.ndarray, k: int, target: float = 0.95) -> tuple[int, float]:
    """The smallest nprobe in (8, 16, ..., 256) whose recall@k against exact search over the
    stored vectors is ≥ target (the largest tried if none is), and its recall."""
    from benchmarks.ann_index import exact_top

    gold = index.ids[exact_top(index.vectors, index.scale, queries, k)]
    recall = 0.0
    for nprobe in (8, 16, 32, 64, 128, 256):
        hits = 0
        for q, want in zip(queries, gold, strict=True):
            got, _ = index.search(q, k, nprobe)
            hits += len(set(got.tolist()) & set(want.tolist()))
        recall = hits / (k * len(queries))
        if recall >= target:
            return nprobe, recall
    return nprobe, recall


def graph_search(
    g: Any,
    push: Any,
    fact_ends: np.ndarray,
    fact_index: Any,
    passage_index: Any,
    q: np.ndarray,
    knobs: tuple[int, int, int],
) -> tuple[np.ndarray, np.ndarray, set[int], Any, float]:
    """One query's graph search after its embedding: the top facts by ANN → phrase seeds
    (HippoRAG 2: the fact score ÷ the phrase's passages, the best linking_top_k phrases),
    the top-N passages by ANN seeded with 0.05 × their min-max score, local PPR, the top 5
    passages. Returns the reset (seeds, mass), the top-5 passage node ids, the push's
    result and its milliseconds."""
    fact_nprobe, passage_nprobe, top_n = knobs
    f_ids, f_scores = fact_index.search(q, FACT_TOP_K, fact_nprobe)
    lo, hi = float(f_scores.min()), float(f_scores.max())
    f_norm = np.ones_like(f_scores) if hi - lo < 1e-12 else (f_scores - lo) / (hi - lo)
    weight: dict[int, float] = {}
    rank: dict[int, list[float]] = {}
    for f, sc in zip(f_ids.tolist(), f_norm.tolist(), strict=True):
        for e in fact_ends[f].tolist():
            weight[e] = sc / max(float(g.entity_passages[e]), 1.0)
            rank.setdefault(e, []).append(sc)
    phrases = sorted(rank, key=lambda e: -float(np.mean(rank[e])))[:LINKING_TOP_K]
    p_ids, p_scores = passage_index.search(q, top_n, passage_nprobe)
    lo, hi = float(p_scores.min()), float(p_scores.max())
    p_norm = np.ones_like(p_scores) if hi - lo < 1e-12 else (p_scores - lo) / (hi - lo)
    seeds = np.concatenate([np.array(phrases, dtype=np.int64), g.n_entities + p_ids])
    mass = np.concatenate([np.array([weight[e] for e in phrases]), PASSAGE_NODE_WEIGHT * p_norm])
    keep = mass > 0
    seeds, mass = seeds[keep], mass[keep]
    t0 = time.perf_counter()
    res = push.solve(seeds, mass, DAMPING, R_MAX)
    ppr_ms = (time.perf_counter() - t0) * 1e3
    return seeds, mass, top_passages(res.nodes, res.values, g.n_entities, 5), res, ppr_ms


def bench_graph(
    n: int, shape: GraphShape, queries: int, exact_max: int, exact_queries: int
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
    fact_ends = np.stack([g.src[: g.n_facts], g.dst[: g.n_facts]], axis=1).astype(np.int32)
    del g.src, g.dst, g.weight
    gc.collect()
    # the corpus's embeddings and the in-memory ANN indexes over passages and facts
    t0 = time.perf_counter()
    (passage_emb, passage_scale), (fact_emb, fact_scale) = corpus_embeddings(g, DIM, rng)
    row["embed_generate_s"] = time.perf_counter() - t0
    # queries: a fact of a sampled passage, with noise (what a question about it looks like)
    f_sample = rng.choice(g.n_facts, queries, replace=False)
    qv = fact_emb[f_sample].astype(np.float32) * fact_scale[f_sample, None]
    qv += 0.5 * rng.standard_normal(qv.shape).astype(np.float32) / np.sqrt(DIM)
    qv /= np.linalg.norm(qv, axis=1, keepdims=True)
    passage_index = IVFIndex.build(passage_emb, passage_scale, LIST_SIZE, seed=1)
    del passage_emb, passage_scale  # the index holds its copy, in list order
    fact_index = IVFIndex.build(fact_emb, fact_scale, LIST_SIZE, seed=2)
    del fact_emb, fact_scale
    gc.collect()
    row.update(
        {
            "ann_build_s": passage_index.build_s + fact_index.build_s,
            "ann_fact_lists": fact_index.nlist,
            "embeddings_mb": (passage_index.vectors.nbytes + fact_index.vectors.nbytes) / 2**20,
        }
    )
    tune = qv[: min(20, queries)]
    fact_nprobe, fact_recall = tune_nprobe(fact_index, tune, FACT_TOP_K)
    # seeding weighs passages by 0.05 × score: .9 of the true top N is enough there
    passage_nprobe, passage_recall = tune_nprobe(passage_index, tune, PASSAGE_SEEDS, 0.9)
    row.update(
        {
            "ann_fact_nprobe": fact_nprobe,
            "ann_fact_recall_at_5": fact_recall,
            "ann_passage_nprobe": passage_nprobe,
            "ann_passage_recall_at_n": passage_recall,
            "passage_seed_top_n": PASSAGE_SEEDS,
        }
    )
    knobs = (fact_nprobe, passage_nprobe, PASSAGE_SEEDS)
    ann_ms, local_ms, exact_ms, search_ms, agree, pushes, residual = [], [], [], [], [], [], []
    blas = threadpool_limits(1)  # one query, one core (as a service's worker runs it)
    for i, q in enumerate(tqdm(qv, desc=f"search {n:,}", unit="q", mininterval=5)):
        t0 = time.perf_counter()
        fact_index.search(q, FACT_TOP_K, fact_nprobe)
        passage_index.search(q, PASSAGE_SEEDS, passage_nprobe)
        ann_ms.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        seeds, mass, top_local, res, ppr_ms = graph_search(
            g, push, fact_ends, fact_index, passage_index, q, knobs
        )
        search_ms.append((time.perf_counter() - t0) * 1e3)
        local_ms.append(ppr_ms)
        pushes.append(res.pushes)
        residual.append(res.residual)
        if g.n_nodes <= exact_max and i < exact_queries:
            reset = np.zeros(g.n_nodes)
            np.add.at(reset, seeds, mass)
            t0 = time.perf_counter()
            exact, _ = ppr_solve(t, reset, DAMPING, PPR_TOL, 200)
            exact_ms.append((time.perf_counter() - t0) * 1e3)
            nz = np.flatnonzero(exact)
            agree.append(top_passages(nz, exact[nz], g.n_entities, 5) == top_local)
    blas.unregister()
    loc, ex, se = summary_ms(local_ms), summary_ms(exact_ms), summary_ms(search_ms)
    row.update(
        {
            "ann_p50_ms": summary_ms(ann_ms).get("p50_ms"),
            "ppr_local_p50_ms": loc.get("p50_ms"),
            "ppr_local_p95_ms": loc.get("p95_ms"),
            "ppr_exact_p50_ms": ex.get("p50_ms"),
            "ppr_exact_p95_ms": ex.get("p95_ms"),
            "graph_search_p50_ms": se.get("p50_ms"),
            "graph_search_p95_ms": se.get("p95_ms"),
            "local_pushes_mean": float(np.mean(pushes)),
            "local_residual_max": float(np.max(residual)),
            "top5_agreement": float(np.mean(agree)) if agree else None,
            "exact_queries": len(exact_ms),
            "queries": len(local_ms),
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
    global R_MAX, PASSAGE_SEEDS
    ap = arg_parser(__doc__ or "", "sizes 2k and 20k, 30 queries, no HNSW", "scale.json")
    ap.add_argument("--sizes", default="10000,100000,1000000", help="passages, comma-separated")
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
        "--top-n", type=int, default=PASSAGE_SEEDS, help="passages seeded (by ANN) per query"
    )
    args = ap.parse_args(argv)
    R_MAX, PASSAGE_SEEDS = args.r_max, args.top_n
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
    result = new_result("scale", args.quick)
    result.update(
        {
            "shape": shape.to_dict(),
            "r_max": R_MAX,
            "ppr_tol": PPR_TOL,
            "passage_seeds": PASSAGE_SEEDS,
            "sizes": {},
        }
    )
    for n in sizes:
        result["sizes"][str(n)] = bench_graph(
            n, shape, args.queries, args.exact_max, args.exact_queries
        )
        gc.collect()
    hnsw_sizes = [n for n in sizes if n <= args.hnsw_max]
    if hnsw_sizes:
        from benchmarks.scratch_db import database

        with database(args.db, None, "scale") as db:
            for n in hnsw_sizes:
                result["sizes"][str(n)].update(bench_hnsw(db.url, n, 384, 50))
    keys = CURVES
    result["slopes"] = {
        k: slope(sizes, [result["sizes"][str(n)].get(k) for n in sizes]) for k in keys
    }
    first, last = result["sizes"][str(sizes[0])], result["sizes"][str(sizes[-1])]
    result["graph_search_growth"] = last["graph_search_p50_ms"] / first["graph_search_p50_ms"]
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
        f"{result['graph_search_growth']:.2f}x (target ≤ 3x)"
    )
    out = finish(result, args.out)
    plot(result, out.with_suffix(".png"))
    growth = result["graph_search_growth"]
    print(
        json.dumps(
            {"sizes": result["sizes"], "slopes": result["slopes"], "graph_search_growth": growth}
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
