"""Local (forward-push) vs exact PPR, and top-N passage seeding, on a real index (issue 18).

For every complete-gold query of the dataset (2Wiki: 860) the graph search (and CatRAG's,
on its edited operator) runs once per configuration, on the same query embeddings:

- the exact solver (Chebyshev to ppr_tol), the reference;
- the local solver at each r_max of `--r-max`: the share of queries whose top-5 passages
  are the same set as the exact solver's (`top5_agreement`), Recall@5 and FCR@5 with
  their difference from exact, the PPR p50/p95 and the whole search's p50 (seeding + PPR,
  the query embedding given);
- with `--top-n`, only the top N passages by dense score seeded (graph.passage_seed_top_n),
  under either solver, against every passage seeded: the same figures, with a paired
  bootstrap 95% interval of the FCR@5 and Recall@5 change;
- with `--background`, the top N passages seeded exactly and the rest of the passage prior
  replaced by its mean (a flat background, which PPR's linearity would serve from one
  precomputed vector), exact solver: what that approximation costs in quality.

    .venv/bin/python benchmarks/bench_ppr_local.py                       # 2Wiki, graph + catrag
    .venv/bin/python benchmarks/bench_ppr_local.py --r-max 1e-6,1e-7 --top-n 100,500
    .venv/bin/python benchmarks/bench_ppr_local.py --quick               # 100 queries, graph

The last line printed is the JSON.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

if not __package__:  # `python benchmarks/bench_ppr_local.py`: the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import arg_parser, finish, new_result, require_db, summary_ms  # noqa: E402
from r2adapter.config import GraphParams, graph_params  # noqa: E402
from r2adapter.data.metrics import full_chain, recall_at_k  # noqa: E402
from r2adapter.evaluate.stats import paired_bootstrap  # noqa: E402

K = 5


def run(
    mode: str, dataset: str, params: GraphParams, queries: list[Any], vecs: np.ndarray
) -> dict[str, Any]:
    """One configuration over every query: top-5 passage ids, search and PPR ms."""
    from r2adapter.retrieve.strategies import make_retriever

    r = make_retriever(mode, dataset, params=params, seed_triplets=False)
    ppr_ms: list[float] = []
    r.observe = lambda ppr, op, info: ppr_ms.append(info["ppr_ms"])  # type: ignore[attr-defined]
    r.warmup()  # type: ignore[attr-defined]
    top: list[list[str]] = []
    search_ms: list[float] = []
    desc = f"{mode} {params.ppr_solver} r_max={params.ppr_r_max:g} N={params.passage_seed_top_n}"
    for q, v in tqdm(list(zip(queries, vecs, strict=True)), desc=desc, unit="q", mininterval=5):
        t0 = time.perf_counter()
        scores, g, _ = r.scores(v, None, q.question)  # type: ignore[attr-defined]
        best = np.argsort(-scores, kind="stable")[:K]
        search_ms.append((time.perf_counter() - t0) * 1e3)
        top.append([g.passage_ids[i] for i in best])
    return {"top": top, "search_ms": search_ms, "ppr_ms": ppr_ms}


def run_background(
    dataset: str, params: GraphParams, queries: list[Any], vecs: np.ndarray, n: int
) -> dict[str, Any]:
    """Graph search (exact solver) with the passage prior kept exactly for the top `n`
    passages by dense score and flattened to its mean elsewhere: by PPR's linearity that
    flat background is a constant times one PPR vector precomputed per graph, so a query
    would need only the top n passages (the approximation's quality, measured here)."""
    from r2adapter.retrieve.graph import GraphRetriever, run_ppr, seed_graph

    r = GraphRetriever(dataset, params=params, seed_triplets=False)
    g = r.cache.get(dataset)
    top: list[list[str]] = []
    search_ms: list[float] = []
    for v in tqdm(vecs, desc=f"graph exact top_n={n}+background", unit="q", mininterval=5):
        t0 = time.perf_counter()
        s = seed_graph(g, v, params)
        if s.matched:
            w = s.reset[g.n_entities :]  # a view: edits the reset
            rest = np.ones(len(w), dtype=bool)
            rest[np.argpartition(-w, n - 1)[:n]] = False
            w[rest] = w[rest].mean()
            scores = run_ppr(g.transition, s.reset, params)[g.n_entities :]
        else:
            scores = g.passage_emb @ v
        best = np.argsort(-scores, kind="stable")[:K]
        search_ms.append((time.perf_counter() - t0) * 1e3)
        top.append([g.passage_ids[i] for i in best])
    return {"top": top, "search_ms": search_ms, "ppr_ms": []}


def paired_ci(a: np.ndarray, b: np.ndarray, rounds: int = 2000) -> list[float]:
    """Paired bootstrap 95% interval of mean(b − a) (r2adapter/evaluate/stats.py, seed 0 as
    before: the same figures)."""
    return paired_bootstrap(b, a, seed=0, n_boot=rounds)["ci95"]


def figures(got: dict[str, Any], ref: dict[str, Any] | None, queries: list[Any]) -> dict[str, Any]:
    rec = np.array(
        [recall_at_k(t, q.gold_passage_ids, K) for t, q in zip(got["top"], queries, strict=True)]
    )
    fcr = np.array(
        [full_chain(t, q.gold_passage_ids, K) for t, q in zip(got["top"], queries, strict=True)]
    )
    got["_rec"], got["_fcr"] = rec, fcr
    out: dict[str, Any] = {
        "recall@5": float(rec.mean()),
        "fcr@5": float(fcr.mean()),
        "search_p50_ms": summary_ms(got["search_ms"]).get("p50_ms"),
        "search_p95_ms": summary_ms(got["search_ms"]).get("p95_ms"),
        "ppr_p50_ms": summary_ms(got["ppr_ms"]).get("p50_ms"),
        "ppr_p95_ms": summary_ms(got["ppr_ms"]).get("p95_ms"),
    }
    if ref is not None:
        same = [set(a) == set(b) for a, b in zip(got["top"], ref["top"], strict=True)]
        out.update(
            {
                "top5_agreement": float(np.mean(same)),
                "top5_disagree": int(len(same) - sum(same)),
                "recall@5_delta": out["recall@5"] - float(ref["_rec"].mean()),
                "fcr@5_delta": out["fcr@5"] - float(ref["_fcr"].mean()),
                "recall@5_delta_ci95": paired_ci(ref["_rec"], rec),
                "fcr@5_delta_ci95": paired_ci(ref["_fcr"], fcr),
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__ or "", "100 queries, graph only", "ppr_local.json")
    ap.add_argument("--dataset", default="2wikimultihopqa")
    ap.add_argument("--mode", action="append", choices=["graph", "catrag"])
    ap.add_argument("--r-max", default="1e-6,1e-7,1e-8", help="local solver thresholds")
    ap.add_argument("--top-n", default="", help="passage_seed_top_n values to try (e.g. 100,500)")
    ap.add_argument(
        "--background",
        default="",
        help="top N seeded exactly, the rest of the passage prior flat (graph, exact solver)",
    )
    args = ap.parse_args(argv)
    require_db()
    from r2adapter.data.adapters import dataset_name
    from r2adapter.evaluate.retrieval import stored_queries
    from r2adapter.index.encoder import get_encoder

    dataset = dataset_name(args.dataset)
    modes = args.mode or (["graph"] if args.quick else ["graph", "catrag"])
    r_maxes = [float(x) for x in args.r_max.split(",") if x.strip()]
    top_ns = [int(x) for x in args.top_n.split(",") if x.strip()]
    backgrounds = [int(x) for x in args.background.split(",") if x.strip()]
    queries = stored_queries(dataset)
    if args.quick:
        queries = queries[:100]
    vecs = get_encoder().encode([q.question for q in queries])
    base = graph_params()
    result = new_result("ppr_local", args.quick, dataset=dataset)
    result.update({"dataset": dataset, "n_queries": len(queries), "modes": {}})
    for mode in modes:
        rows: dict[str, Any] = {}
        exact = run(mode, dataset, replace(base, ppr_solver="exact"), queries, vecs)
        rows["exact"] = figures(exact, None, queries)
        for r_max in r_maxes:
            p = replace(base, ppr_solver="local", ppr_r_max=r_max)
            rows[f"local r_max={r_max:g}"] = figures(
                run(mode, dataset, p, queries, vecs), exact, queries
            )
        for n in top_ns:  # against every passage seeded, exact solver
            for solver in ("exact", "local"):
                p = replace(base, ppr_solver=solver, passage_seed_top_n=n)
                got = run(mode, dataset, p, queries, vecs)
                rows[f"{solver} top_n={n}"] = figures(got, exact, queries)
        if mode == "graph":
            for n in backgrounds:
                p = replace(base, ppr_solver="exact")
                got = run_background(dataset, p, queries, vecs, n)
                rows[f"exact top_n={n}+background"] = figures(got, exact, queries)
        result["modes"][mode] = rows
        head = f"{'R@5':>6} {'FCR@5':>6} {'agree':>6} {'search p50':>10} {'ppr p50':>8}"
        print(f"{mode}: {'config':<24} {head}")
        for name, m in rows.items():
            print(
                f"{'':>{len(mode) + 2}}{name:<24} {m['recall@5']:>6.3f} {m['fcr@5']:>6.3f} "
                f"{m.get('top5_agreement', 1.0):>6.3f} {m['search_p50_ms']:>10.2f} "
                f"{m['ppr_p50_ms'] or float('nan'):>8.2f}"
            )
    finish(result, args.out)
    print(json.dumps({"dataset": dataset, "n_queries": len(queries), "modes": result["modes"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
