"""PPR latency: our power iteration (r2adapter.retrieve.ppr) against igraph's prpack.

Two graphs:
  (a) synthetic, embedding-like: nodes are unit vectors in 32-d drawn around cluster
      centres; each node is linked to its nearest neighbours in its cluster, plus
      cross-cluster edges whose endpoints follow a power-law (Chung-Lu) degree
      distribution; weights from cosine. Resets as HippoRAG 2 seeds them: ~5 phrase
      nodes (the nodes nearest a query vector) plus weak mass (dense score × 0.05) on
      the ~20% of nodes that play passages.
  (b) the real graph of each indexed dataset, loaded from Postgres with
      load_graph_index(require_version(dataset)), seeded by reset_vector() from the
      dataset's own questions.

Per graph: N resets, ours and prpack interleaved on each (order alternating), p50/p95 ms,
speedup = prpack p50 / ours p50, max |ours - prpack|. Excluded from the timings: the
igraph Graph construction and the reset's conversion to a Python list (both done once,
before the clock: favours prpack), and our Transition build (reported separately).
prpack runs on one OpenMP thread by default (--prpack-threads), as ours runs on one: with
its default of all cores it is erratic on a shared machine (33 to 300 ms on the same call).
--candidates also times the solver (power iteration vs Chebyshev) and matrix layout
(float64 vs float32, natural vs RCM order) apart, against prpack on the same resets.

    .venv/bin/python -m benchmarks.perf.bench_ppr                 # full: synthetic 100k + DB
    .venv/bin/python -m benchmarks.perf.bench_ppr --candidates    # and the candidate changes
    .venv/bin/python -m benchmarks.perf.bench_ppr --quick         # small synthetic + DB
    .venv/bin/python -m benchmarks.perf.bench_ppr --synthetic-only --quick   # no database
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm import tqdm

from benchmarks.lib.common import RESULTS, indexed_datasets, require_db
from r2adapter.config import GraphParams
from r2adapter.evaluate.results_file import machine_info, save_json, summary_ms, timestamp
from r2adapter.retrieve.ppr import Transition, personalized_pagerank, ppr_solve

if TYPE_CHECKING:  # imported in main(), after OMP_NUM_THREADS is set for its libgomp
    import igraph as ig

DEFAULT_DATASETS = ("musique", "2wikimultihopqa")
TARGET_P50_MS = 50.0  # ours, at 100k nodes
TARGET_SPEEDUP = 4.0  # prpack p50 / ours p50
AGREEMENT = 1e-6  # max abs difference to prpack, as tests/test_ppr_graph.py


# ---- synthetic embedding-like graph ----------------------------------------------------


@dataclass
class SyntheticGraph:
    n: int
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    vectors: np.ndarray  # (n, dim) unit vectors
    cluster: np.ndarray  # cluster id per node
    centres: np.ndarray  # (clusters, dim)
    spread: np.ndarray  # noise scale per cluster
    is_passage: np.ndarray  # bool: node seeded with weak dense mass

    def stats(self) -> dict[str, Any]:
        deg = np.bincount(np.concatenate([self.src, self.dst]), minlength=self.n)
        cross = self.cluster[self.src] != self.cluster[self.dst]
        return {
            "nodes": self.n,
            "edges": int(self.src.size),
            "clusters": int(self.centres.shape[0]),
            "dim": int(self.vectors.shape[1]),
            "cross_cluster_edges": int(cross.sum()),
            "isolated_nodes": int((deg == 0).sum()),
            "degree_max": int(deg.max()),
            "degree_p50": float(np.percentile(deg, 50)),
            "degree_p99": float(np.percentile(deg, 99)),
            "largest_cluster": int(np.bincount(self.cluster).max()),
            "passage_nodes": int(self.is_passage.sum()),
            "weight_mean_intra": float(self.weight[~cross].mean()) if (~cross).any() else 0.0,
            "weight_mean_cross": float(self.weight[cross].mean()) if cross.any() else 0.0,
        }


def _pair_keys(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    return np.minimum(a, b) * n + np.maximum(a, b)


def synthetic_graph(
    n: int,
    m: int,
    clusters: int,
    dim: int = 32,
    seed: int = 0,
    knn: int = 3,
    intra_share: float = 0.75,
    passage_share: float = 0.2,
    pareto_shape: float = 1.2,
) -> SyntheticGraph:
    """n nodes, exactly m distinct undirected edges (m_intra kNN + the rest cross-cluster)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    sizes = rng.lognormal(0.0, 0.8, clusters)  # uneven topics
    cluster = rng.choice(clusters, n, p=sizes / sizes.sum())
    spread = rng.uniform(0.12, 0.3, clusters)  # per-dimension noise: tight and loose topics
    vec = centres[cluster] + spread[cluster, None] * rng.standard_normal((n, dim))
    vec /= np.linalg.norm(vec, axis=1, keepdims=True)

    # within each cluster: every node to its nearest neighbour, then some of the next ones
    first, more = [], []
    order = np.argsort(cluster, kind="stable")
    bounds = np.searchsorted(cluster[order], np.arange(clusters + 1))
    for c in range(clusters):
        idx = order[bounds[c] : bounds[c + 1]]
        if idx.size < 2:
            continue
        sims = vec[idx] @ vec[idx].T
        np.fill_diagonal(sims, -np.inf)
        k = min(knn, idx.size - 1)
        nn = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        nn = np.take_along_axis(nn, np.argsort(-np.take_along_axis(sims, nn, 1), axis=1), 1)
        first.append(_pair_keys(idx, idx[nn[:, 0]], n))
        if k > 1:
            more.append(_pair_keys(np.repeat(idx, k - 1), idx[nn[:, 1:]].ravel(), n))
    m_intra = int(round(m * intra_share))
    k1 = np.unique(np.concatenate(first)) if first else np.zeros(0, np.int64)
    kr = np.setdiff1d(np.concatenate(more), k1) if more else np.zeros(0, np.int64)
    if k1.size >= m_intra:
        intra = rng.choice(k1, m_intra, replace=False)
    else:
        extra = rng.choice(kr, min(m_intra - k1.size, kr.size), replace=False)
        intra = np.concatenate([k1, extra])

    # across clusters: Chung-Lu endpoints with Pareto fitness -> power-law degrees
    fitness = rng.pareto(pareto_shape, n) + 1.0
    p = fitness / fitness.sum()
    have = set(intra.tolist())
    cross: list[int] = []
    need = m - intra.size
    while len(cross) < need:
        a = rng.choice(n, 2 * need, p=p)
        b = rng.choice(n, 2 * need, p=p)
        ok = cluster[a] != cluster[b]
        for key in _pair_keys(a[ok], b[ok], n).tolist():
            if key not in have:
                have.add(key)
                cross.append(key)
                if len(cross) == need:
                    break
    keys = np.concatenate([intra, np.asarray(cross, dtype=np.int64)])
    src, dst = keys // n, keys % n
    cos = np.einsum("ij,ij->i", vec[src], vec[dst])
    weight = np.maximum(cos, 0.0) + 0.05  # positive; cross-cluster cosines hover near 0
    perm = rng.permutation(keys.size)
    return SyntheticGraph(
        n,
        src[perm],
        dst[perm],
        weight[perm],
        vec,
        cluster,
        centres,
        spread,
        rng.random(n) < passage_share,
    )


def synthetic_resets(g: SyntheticGraph, count: int, seed: int, phrases: int = 5) -> list:
    """HippoRAG 2-like seeds: a query vector near a cluster centre; its `phrases` nearest
    non-passage nodes get their cosine; every passage node gets minmax(cosine) × 0.05."""
    rng = np.random.default_rng(seed)
    sizes = np.bincount(g.cluster, minlength=g.centres.shape[0]).astype(np.float64)
    passage_weight = GraphParams().passage_node_weight
    resets = []
    for _ in range(count):
        c = rng.choice(sizes.size, p=sizes / sizes.sum())
        q = g.centres[c] + g.spread[c] * rng.standard_normal(g.vectors.shape[1])
        q /= np.linalg.norm(q)
        scores = g.vectors @ q
        reset = np.zeros(g.n)
        ps = scores[g.is_passage]
        reset[g.is_passage] = (ps - ps.min()) / max(ps.max() - ps.min(), 1e-12) * passage_weight
        phrase_scores = np.where(g.is_passage, -np.inf, scores)
        top = np.argpartition(-phrase_scores, phrases)[:phrases]
        reset[top] = np.maximum(phrase_scores[top], 1e-3)
        resets.append(reset)
    return resets


# ---- real graphs from Postgres ---------------------------------------------------------


@dataclass
class RealGraph:
    dataset: str
    n: int
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    transition: Transition
    load_seconds: float
    info: dict[str, Any]


def load_real_graph(dataset: str) -> RealGraph:
    """load_graph_index() as the service calls it, with the edge list it hands to
    Transition.from_edges captured on the way, so igraph gets the very same graph."""
    from unittest import mock

    from r2adapter.retrieve import graph_index
    from r2adapter.store.graph_store import require_version

    captured: dict[str, Any] = {}
    original = Transition.from_edges

    def capture(n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> Transition:
        captured.update(n=n, src=np.asarray(src), dst=np.asarray(dst), weight=np.asarray(weight))
        return original(n, src, dst, weight)

    with mock.patch.object(graph_index.Transition, "from_edges", side_effect=capture):
        gi = graph_index.load_graph_index(require_version(dataset))
    if not captured:
        raise RuntimeError("load_graph_index() no longer calls Transition.from_edges")
    info = {
        "index_version": gi.version.id,
        "openie": gi.version.openie,
        "entities": gi.n_entities,
        "passages": len(gi.passage_ids),
        "nodes": gi.n_nodes,
        "edges": int(captured["src"].size),
        "isolated_nodes": int(gi.transition.dangling.sum()),
    }
    rg = RealGraph(
        dataset,
        int(captured["n"]),
        captured["src"],
        captured["dst"],
        captured["weight"],
        gi.transition,
        gi.load_seconds,
        info,
    )
    rg.info["_graph_index"] = gi  # popped before saving
    return rg


def real_resets(dataset: str, gi: Any, count: int) -> tuple[list, dict[str, Any]]:
    """reset_vector() for the dataset's own questions (the first `count` with a fact match)."""
    from r2adapter.evaluate.retrieval import stored_queries
    from r2adapter.index.encoder import get_encoder
    from r2adapter.retrieve.dense import check_encoder
    from r2adapter.retrieve.graph import reset_vector

    enc = get_encoder()
    check_encoder(gi.version, enc)
    questions = [q.question for q in stored_queries(dataset, complete_only=False)]
    params = GraphParams()
    resets, unmatched = [], 0
    for i in range(0, len(questions), 64):
        for qv in enc.encode(questions[i : i + 64]):
            reset, matched = reset_vector(gi, qv, params)
            if not matched:
                unmatched += 1
                continue
            resets.append(reset)
            if len(resets) == count:
                break
        if len(resets) == count:
            break
    return resets, {"questions_used": len(resets), "questions_without_fact_match": unmatched}


# ---- timing ----------------------------------------------------------------------------


def build_igraph(n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> ig.Graph:
    import igraph as ig

    g = ig.Graph(n=n, edges=list(zip(src.tolist(), dst.tolist(), strict=True)), directed=False)
    g.es["weight"] = np.asarray(weight, dtype=np.float64).tolist()
    return g


def prpack(g: ig.Graph, reset: list[float], damping: float) -> list[float]:
    return g.personalized_pagerank(
        directed=False, damping=damping, reset=reset, weights="weight", implementation="prpack"
    )


def iterations_to_converge(t: Transition, reset: np.ndarray, damping: float, tol: float) -> int:
    """Diagnostic: the matrix products personalized_pagerank takes on this reset."""
    return ppr_solve(t, reset, damping, tol, GraphParams().ppr_max_iter)[1]


def time_ppr(
    name: str,
    n: int,
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    resets: list,
    warmup: int,
    damping: float,
    tol: float,
    passage_mask: np.ndarray,
    transition: Transition | None = None,
    candidates: bool = False,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    built = Transition.from_edges(n, src, dst, weight)
    build_ms = (time.perf_counter() - t0) * 1000
    t = transition if transition is not None else built
    t0 = time.perf_counter()
    g = build_igraph(n, src, dst, weight)
    igraph_build_ms = (time.perf_counter() - t0) * 1000

    reset_lists = [r.tolist() for r in resets]  # once, outside prpack's clock
    for r, rl in zip(resets[:warmup], reset_lists[:warmup], strict=True):
        personalized_pagerank(t, r, damping, tol)
        prpack(g, rl, damping)
    resets, reset_lists = resets[warmup:], reset_lists[warmup:]

    ours_ms, ref_ms, diffs, ratio = [], [], [], []
    for i, (r, rl) in enumerate(
        tqdm(list(zip(resets, reset_lists, strict=True)), desc=f"ppr {name}", unit="reset")
    ):
        calls: list[tuple[str, Callable[[], Any]]] = [
            ("ours", lambda r=r: personalized_pagerank(t, r, damping, tol)),
            ("prpack", lambda rl=rl: prpack(g, rl, damping)),
        ]
        if i % 2:  # alternate who runs first: cache and frequency effects fall on both
            calls.reverse()
        out: dict[str, Any] = {}
        for who, fn in calls:
            t0 = time.perf_counter()
            out[who] = fn()
            (ours_ms if who == "ours" else ref_ms).append((time.perf_counter() - t0) * 1000)
        ratio.append(ref_ms[-1] / ours_ms[-1])
        diffs.append(float(np.abs(out["ours"] - np.asarray(out["prpack"])).max()))

    iters = [iterations_to_converge(t, r, damping, tol) for r in resets[: min(5, len(resets))]]
    x = np.random.default_rng(0).random(n)
    t0 = time.perf_counter()
    for _ in range(20):
        t.matrix @ x
    matvec_ms = (time.perf_counter() - t0) * 1000 / 20

    ours, ref = summary_ms(ours_ms), summary_ms(ref_ms)
    extra = {}
    if candidates:
        extra["candidates"] = time_candidates(
            name, t, n, src, dst, weight, g, resets, reset_lists, damping, tol, passage_mask
        )
    return {
        "nodes": n,
        "edges": int(src.size),
        "nnz": int(t.matrix.nnz),
        "repetitions": len(resets),
        "warmup": warmup,
        "damping": damping,
        "tol": tol,
        "ours": ours,
        "igraph_prpack": ref,
        "speedup_p50": ref["p50_ms"] / ours["p50_ms"],
        "speedup_median_of_pairs": float(np.median(ratio)),
        "max_abs_diff": max(diffs),
        "agrees_1e-6": max(diffs) < AGREEMENT,
        "ours_transition_build_ms": build_ms,
        "igraph_graph_build_ms": igraph_build_ms,
        "diagnostics": {
            "iterations_first_resets": iters,
            "matvec_ms": matvec_ms,
            "matvec_share_of_p50": matvec_ms * float(np.mean(iters)) / ours["p50_ms"],
        },
        **extra,
    }


# ---- variants of ppr.py (measured here; the project uses personalized_pagerank) --------


def power_iteration(
    t: Transition, reset: np.ndarray, damping: float, tol: float, max_iter: int = 100
) -> np.ndarray:
    """The power iteration ppr.py used before the Chebyshev solver (same fixed point):
    y ← d·P·y + (1 − d)·r until the L1 change is below tol, then y / Σy."""
    base = (reset[t.perm] * ((1.0 - damping) / float(reset.sum()))).astype(t.matrix.dtype)
    y = base.copy()
    for _ in range(max_iter):
        nxt = t.matrix @ y
        nxt *= damping
        nxt += base
        diff = float(np.abs(nxt - y).sum())
        y = nxt
        if diff < tol:
            break
    x = y.astype(np.float64)[t.inv]
    return x / x.sum()


def candidate_variants(
    t: Transition, n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray
) -> tuple[dict[str, tuple[Callable[..., Any], float]], dict[str, float]]:
    """name -> (ppr(reset, damping, tol), tol): the solver and the matrix layout apart, so
    each change's share of the speedup shows; and each layout's build time (ms)."""
    built, build_ms = {}, {}
    for key, kw in {
        "f64 natural": {"dtype": np.float64, "reorder": False},
        "f32 natural": {"dtype": np.float32, "reorder": False},
        "f32 rcm": {},
    }.items():
        t0 = time.perf_counter()
        built[key] = Transition.from_edges(n, src, dst, weight, **kw)
        build_ms[key] = (time.perf_counter() - t0) * 1000
    variants: dict[str, tuple[Callable[..., Any], float]] = {}
    for key, tt in built.items():
        variants[f"power {key} tol=1e-7"] = (
            lambda r, d, tl, tt=tt: power_iteration(tt, r, d, tl),
            1e-7,
        )
        variants[f"chebyshev {key} tol=1e-7"] = (
            lambda r, d, tl, tt=tt: personalized_pagerank(tt, r, d, tl),
            1e-7,
        )
    variants["chebyshev f32 rcm tol=1e-6"] = (
        lambda r, d, tl: personalized_pagerank(built["f32 rcm"], r, d, tl),
        1e-6,
    )
    return variants, build_ms


def time_candidates(
    name: str,
    t: Transition,
    n: int,
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    g: ig.Graph,
    resets: list,
    reset_lists: list,
    damping: float,
    tol: float,
    passage_mask: np.ndarray,
) -> dict[str, Any]:
    """Every candidate, ours and prpack on each reset, interleaved in rotating order; speedup
    against prpack and against ours in the same loop; top-5 passage agreement with ours."""
    variants, build_ms = candidate_variants(t, n, src, dst, weight)
    calls: list[tuple[str, Callable[..., Any], float]] = [
        ("ours", lambda r, d, tl: personalized_pagerank(t, r, d, tl), tol),
        *((k, f, tl) for k, (f, tl) in variants.items()),
    ]
    ms: dict[str, list[float]] = {k: [] for k, _, _ in calls}
    ms["prpack"] = []
    diff = dict.fromkeys(ms, 0.0)
    same_top5 = dict.fromkeys(ms, 0)
    pidx = np.flatnonzero(passage_mask)
    for i, (r, rl) in enumerate(
        tqdm(list(zip(resets, reset_lists, strict=True)), desc=f"candidates {name}", unit="reset")
    ):
        t0 = time.perf_counter()
        ref = np.asarray(prpack(g, rl, damping))
        ms["prpack"].append((time.perf_counter() - t0) * 1000)
        outs = {}
        k = i % len(calls)
        for who, fn, tl in calls[k:] + calls[:k]:
            t0 = time.perf_counter()
            outs[who] = fn(r, damping, tl)
            ms[who].append((time.perf_counter() - t0) * 1000)
        top_ours = set(pidx[np.argsort(-outs["ours"][pidx], kind="stable")[:5]].tolist())
        for who, out in outs.items():
            diff[who] = max(diff[who], float(np.abs(out - ref).max()))
            top = set(pidx[np.argsort(-out[pidx], kind="stable")[:5]].tolist())
            same_top5[who] += top == top_ours
    ref_p50 = summary_ms(ms["prpack"])["p50_ms"]
    ours_p50 = summary_ms(ms["ours"])["p50_ms"]
    out: dict[str, Any] = {"prpack_p50_ms": ref_p50, "extra_build_ms": build_ms}
    for who, _, tl in calls:
        s = summary_ms(ms[who])
        out[who] = {
            "tol": tl,
            "p50_ms": s["p50_ms"],
            "p95_ms": s["p95_ms"],
            "speedup_vs_prpack": ref_p50 / s["p50_ms"],
            "speedup_vs_ours": ours_p50 / s["p50_ms"],
            "max_abs_diff_vs_prpack": diff[who],
            "top5_passages_same_as_ours": same_top5[who] / len(resets),
        }
    return out


# ---- report ----------------------------------------------------------------------------


def table(rows: dict[str, dict[str, Any]]) -> str:
    head = (
        f"{'graph':<22}{'nodes':>9}{'edges':>9}{'ours p50':>10}{'p95':>8}{'prpack p50':>12}"
        f"{'p95':>8}{'speedup':>9}{'max|diff|':>11}{'build ms':>10}{'iters':>7}"
    )
    lines = [head, "-" * len(head)]
    for name, r in rows.items():
        lines.append(
            f"{name:<22}{r['nodes']:>9,}{r['edges']:>9,}{r['ours']['p50_ms']:>10.2f}"
            f"{r['ours']['p95_ms']:>8.2f}{r['igraph_prpack']['p50_ms']:>12.2f}"
            f"{r['igraph_prpack']['p95_ms']:>8.2f}{r['speedup_p50']:>8.2f}x"
            f"{r['max_abs_diff']:>11.1e}{r['ours_transition_build_ms']:>10.1f}"
            f"{int(np.median(r['diagnostics']['iterations_first_resets'])):>7}"
        )
    return "\n".join(lines)


def candidate_table(name: str, c: dict[str, Any]) -> str:
    head = (
        f"{'candidate (' + name + ')':<36}{'p50 ms':>8}{'p95 ms':>8}{'vs prpack':>11}"
        f"{'vs ours':>9}{'max|diff|':>11}{'top5 same':>11}"
    )
    lines = [head, "-" * len(head)]
    for who, v in c.items():
        if isinstance(v, dict) and "p50_ms" in v:
            lines.append(
                f"{who:<36}{v['p50_ms']:>8.2f}{v['p95_ms']:>8.2f}{v['speedup_vs_prpack']:>10.2f}x"
                f"{v['speedup_vs_ours']:>8.2f}x{v['max_abs_diff_vs_prpack']:>11.1e}"
                f"{v['top5_passages_same_as_ours']:>11.0%}"
            )
    lines.append(f"{'prpack':<36}{c['prpack_p50_ms']:>8.2f}")
    lines.append(
        "extra build ms: " + ", ".join(f"{k} {v:.0f}" for k, v in c["extra_build_ms"].items())
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small synthetic graph, few resets")
    ap.add_argument("--synthetic-only", action="store_true", help="skip the database graphs")
    ap.add_argument(
        "--dataset",
        action="append",
        help="indexed dataset to load from Postgres (repeatable); default: every indexed "
        f"one among {', '.join(DEFAULT_DATASETS)}",
    )
    ap.add_argument("--nodes", type=int, help="synthetic nodes (default 100000; quick 2000)")
    ap.add_argument("--edges", type=int, help="synthetic edges (default 2 x nodes)")
    ap.add_argument("--clusters", type=int, help="synthetic clusters (default nodes / 200)")
    ap.add_argument("--reps", type=int, help="resets per graph (default 30; quick 5)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--candidates",
        action="store_true",
        help="also time solver and layout variants apart (power/Chebyshev, f64/f32, RCM)",
    )
    ap.add_argument(
        "--prpack-threads",
        type=int,
        default=1,
        help="OpenMP threads for igraph (its wheel links libgomp); default 1, like ours; "
        "0 leaves the library default (all cores, erratic on a shared machine)",
    )
    ap.add_argument("--out", type=Path, default=RESULTS / "ppr.json")
    args = ap.parse_args(argv)
    # libgomp reads OMP_NUM_THREADS when igraph loads; later changes have no effect
    if args.prpack_threads > 0 and "igraph" not in sys.modules:
        os.environ["OMP_NUM_THREADS"] = str(args.prpack_threads)

    if not args.synthetic_only:
        require_db()  # one line and exit 1 when Postgres is down
    n = args.nodes or (2_000 if args.quick else 100_000)
    m = args.edges or 2 * n
    clusters = args.clusters or max(n // 200, 2)
    reps = args.reps or (5 if args.quick else 30)
    warmup = 1 if args.quick else 3
    p = GraphParams()

    result: dict[str, Any] = {
        "benchmark": "ppr",
        "timestamp": timestamp(),
        "quick": args.quick,
        "machine": machine_info(),
        "targets": {
            "ours_p50_ms_at_100k_nodes": TARGET_P50_MS,
            "speedup_vs_prpack": TARGET_SPEEDUP,
            "max_abs_diff": AGREEMENT,
        },
        "prpack_omp_threads": os.environ.get("OMP_NUM_THREADS", "library default"),
        "timing_notes": "ours: personalized_pagerank() incl. reset normalisation; prpack: "
        "Graph.personalized_pagerank(implementation='prpack') incl. its per-call "
        "preprocessing and the result list; excluded: igraph Graph build, reset.tolist(), "
        "our Transition build (reported as ours_transition_build_ms). Calls interleaved.",
        "graphs": {},
        "skipped": {},
    }

    t0 = time.perf_counter()
    sg = synthetic_graph(n, m, clusters, seed=args.seed)
    gen_s = time.perf_counter() - t0
    name = f"synthetic-{n // 1000}k" if n >= 1000 else f"synthetic-{n}"
    print(f"{name}: generated in {gen_s:.1f} s")
    res = time_ppr(
        name,
        n,
        sg.src,
        sg.dst,
        sg.weight,
        synthetic_resets(sg, reps + warmup, args.seed + 1),
        warmup,
        p.damping,
        p.ppr_tol,
        sg.is_passage,
        candidates=args.candidates,
    )
    res["graph"] = {**sg.stats(), "generate_s": gen_s}
    result["graphs"][name] = res

    if not args.synthetic_only:
        datasets, skipped = indexed_datasets(args.dataset, DEFAULT_DATASETS)
        result["skipped"].update(skipped)
        for ds in datasets:
            rg = load_real_graph(ds)
            gi = rg.info.pop("_graph_index")
            resets, qinfo = real_resets(ds, gi, reps + warmup)
            if len(resets) <= warmup:
                result["skipped"][ds] = "too few questions with a fact match"
                print(f"note: skipping '{ds}': {result['skipped'][ds]}")
                continue
            res = time_ppr(
                ds,
                rg.n,
                rg.src,
                rg.dst,
                rg.weight,
                resets,
                warmup,
                p.damping,
                p.ppr_tol,
                np.arange(rg.n) >= gi.n_entities,
                transition=rg.transition,
                candidates=args.candidates,
            )
            res["graph"] = {**rg.info, **qinfo, "load_graph_index_s": rg.load_seconds}
            result["graphs"][ds] = res

    print()
    print(table(result["graphs"]))
    syn = result["graphs"][name]
    if n >= 100_000:
        verdict = {
            "ours_p50_ms": syn["ours"]["p50_ms"] <= TARGET_P50_MS,
            "speedup": syn["speedup_p50"] >= TARGET_SPEEDUP,
            "agreement": all(r["agrees_1e-6"] for r in result["graphs"].values()),
        }
        result["targets_met"] = verdict
        print(
            f"\ntargets at {n:,} nodes: ours p50 {syn['ours']['p50_ms']:.1f} ms "
            f"(<= {TARGET_P50_MS:.0f}: {'met' if verdict['ours_p50_ms'] else 'MISSED'}), "
            f"speedup {syn['speedup_p50']:.2f}x (>= {TARGET_SPEEDUP:.0f}x: "
            f"{'met' if verdict['speedup'] else 'MISSED'}), agreement < {AGREEMENT:g}: "
            f"{'met' if verdict['agreement'] else 'MISSED'}"
        )
    for gname, r in result["graphs"].items():
        if "candidates" in r:
            print(f"\n{candidate_table(gname, r['candidates'])}")
    for ds, why in result["skipped"].items():
        print(f"skipped {ds}: {why}")
    result["machine"]["loadavg_1_5_15m_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(f"saved {save_json(args.out, result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
