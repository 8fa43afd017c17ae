"""The query rewriter's effect on graph retrieval (R²Adapter Figures 5 and 8).

Two parts. `--all-queries` (issue 15): per rewriter backend (`--backends`, default
structural,llm) and dataset (`--datasets`), every complete-gold query: the share parsed,
fallbacks by reason, ms per rewrite p50/p95, and graph Recall@2/Recall@5/FCR@5 of q, of q′
and of q′ with its triplets seeding PPR, with a paired bootstrap interval of the gain over q.
A dataset that is not indexed gets the rewrite figures alone.

Without it, the ε rule (eq. 7):

For the labelled queries of a dataset (the configured label rule, every split; another stored rule
when that one is missing): route each with the champion router, keep the queries routed to
graph, and for each ε in {0.4, 0.6, 0.8, 1.0} rewrite those with p_graph < ε (eq. 7) with
the Rewriter on the default LLM (the local model unless one is configured), then run graph
retrieval, GraphRetriever(dataset).retrieve(q', 5). Over the routed-to-graph subset:
how many were rewritten, the fallback rate by reason, graph Recall@2/@5 with and without
rewriting, and the mean rewrite time, with the backend `--backend` (default llm). ε = 1.0 is
"rewrite every graph-routed query" (p_graph < 1 always). A query is rewritten once and
reused at every ε (the set for ε = 0.4 is contained in the set for 0.6, and so on); a
fallback keeps the query as it is, so its retrieval is the one without rewriting.

    .venv/bin/python benchmarks/bench_rewriter.py --dataset musique
    .venv/bin/python benchmarks/bench_rewriter.py --dataset musique --quick   # 30 queries
    .venv/bin/python benchmarks/bench_rewriter.py --all-queries --backends structural \
        --datasets 2wikimultihopqa,musique,hotpotqa --out benchmarks/results/rewriter_all.json
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

if not __package__:  # `python benchmarks/bench_rewriter.py`: put the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (  # noqa: E402
    add_champion_args,
    arg_parser,
    champion_dataset,
    die,
    finish,
    loadavg,
    new_result,
    pct,
    require_db,
)
from r2adapter.evaluate.stats import mean_interval  # noqa: E402

EPSILONS = (0.4, 0.6, 0.8, 1.0)
KS = (2, 5)
SERVICE_BUDGET_S = float(os.environ.get("R2A_REWRITE_BUDGET_S", "5"))  # serving/state.py


def labelled(dataset: str, rule: str, split: str) -> tuple[list[Any], str, str | None]:
    """The labels for `rule`, else for another stored rule (with a note saying so)."""
    from r2adapter.errors import R2AError
    from r2adapter.label.annotate import db_labels
    from r2adapter.store.db import connection

    try:
        return db_labels(dataset, rule, split), rule, None
    except R2AError as e:
        first_error = str(e)
    with connection() as conn:
        rules = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT rule FROM labels WHERE dataset = %s ORDER BY rule", (dataset,)
            ).fetchall()
        ]
    for other in rules:
        try:
            recs = db_labels(dataset, other, split)
        except R2AError:
            continue
        return recs, other, f"no {rule} labels ({first_error}); used the stored {other} labels"
    die(first_error)
    raise AssertionError  # not reached


def load_llm_or_die(budget_s: float) -> tuple[Any, dict[str, Any]]:
    """The default LLM, loaded and answering, or exit 1 with one line."""
    from r2adapter.errors import R2AError
    from r2adapter.llm import get_llm

    try:
        llm = get_llm(default_local=True)
        if llm is None:
            raise R2AError("no LLM configured")
        t0 = time.perf_counter()
        load = getattr(llm, "load", None)
        if callable(load):
            load()
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        llm.complete(
            [{"role": "user", "content": "Say OK."}],
            max_tokens=2,
            temperature=0.0,
            timeout=max(budget_s, 30.0),
        )
        probe_ms = (time.perf_counter() - t0) * 1000
    except R2AError as e:
        die(f"no LLM can be loaded: {' '.join(str(e).split())[:300]}")
    assert llm is not None  # die() exits
    return llm, {
        "identity": llm.identity,
        "load_s": round(load_s, 2),
        "probe_ms": round(probe_ms, 1),
    }


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


def recall(ids: list[str], gold: list[str], k: int) -> float:
    from r2adapter.data.metrics import recall_at_k

    return recall_at_k(ids, gold, k)


def mean(v: list[float]) -> float | None:
    return float(np.mean(v)) if v else None


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__, "the first 30 labelled queries", "rewriter.json")
    add_champion_args(ap, "labelled, indexed dataset")
    ap.add_argument(
        "--rule", help="label rule (default: params.yaml label.rule; falls back to any stored)"
    )
    ap.add_argument("--split", default="all", help="label split: all, train, val or test")
    ap.add_argument("--queries", type=int, help="first N labelled queries (default all; quick 30)")
    ap.add_argument(
        "--epsilons",
        default=",".join(str(e) for e in EPSILONS),
        help="comma-separated ε values (default %(default)s)",
    )
    ap.add_argument(
        "--budget",
        type=float,
        default=20.0,
        help="seconds per rewrite (default %(default)s; the service's R2A_REWRITE_BUDGET_S is "
        f"{SERVICE_BUDGET_S:g}: how many rewrites took longer is reported too)",
    )
    ap.add_argument(
        "--threads",
        type=int,
        help="torch threads for this process (router, encoder, local LLM); default: torch's. "
        "On a busy machine 1 can be several times faster than all cores",
    )
    ap.add_argument("--backend", default="llm", choices=["structural", "llm"], help="ε part")
    ap.add_argument("--all-queries", action="store_true", help="the per-backend part (above)")
    ap.add_argument("--backends", default="structural,llm", help="--all-queries: backends")
    ap.add_argument(
        "--datasets",
        default="2wikimultihopqa,musique,hotpotqa",
        help="--all-queries: datasets (loaded; graph figures where indexed)",
    )
    args = ap.parse_args(argv)
    if args.all_queries:
        if args.budget <= 0:
            die("--budget must be positive")
        return main_all_queries(args)
    try:
        epsilons = sorted({float(x) for x in args.epsilons.split(",") if x.strip()})
    except ValueError:
        die(f"--epsilons must be numbers separated by commas, not {args.epsilons!r}")
    if not epsilons or args.budget <= 0 or (args.threads is not None and args.threads < 1):
        die("--epsilons needs at least one value; --budget and --threads must be positive")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    require_db()  # one line and exit 1 when Postgres is down
    dataset = champion_dataset(args.dataset, args.router)  # exit 1 when it is not indexed

    from r2adapter.errors import R2AError
    from r2adapter.registry.models import alias_version, load_router
    from r2adapter.retrieve.graph import GraphRetriever
    from r2adapter.retrieve.graph_index import GRAPHS
    from r2adapter.rewrite import Rewriter

    load_before = loadavg()
    from r2adapter.config import label_params

    records, rule, note = labelled(dataset, args.rule or label_params().rule, args.split)
    if note:
        print(f"note: {note}")
    n = args.queries or (30 if args.quick else len(records))
    records = records[:n]
    try:
        router, version = load_router(args.router, "champion")
        router.bind(dataset, GRAPHS)
        champ_tag = (getattr(alias_version(args.router, "champion"), "tags", None) or {}).get(
            "dataset"
        )
        graph = GraphRetriever(dataset)
    except R2AError as e:
        die(str(e))

    # -- route -----------------------------------------------------------------------------
    questions = [r.question for r in records]
    p_d, p_g = np.zeros(0), np.zeros(0)
    t0 = time.perf_counter()
    for i in tqdm(range(0, len(questions), 16), desc="route", unit="batch"):
        d, g = router.score(questions[i : i + 16])
        p_d, p_g = np.concatenate([p_d, d]), np.concatenate([p_g, g])
    route_s = time.perf_counter() - t0
    to_graph = [i for i in range(len(records)) if p_g[i] - p_d[i] > router.tau]
    if not to_graph:
        die(f"the champion routes none of the {len(records)} {dataset} queries to graph")

    # -- graph retrieval without rewriting ---------------------------------------------------
    k_max = max(KS)
    base: dict[int, list[str]] = {}
    base_ms: list[float] = []
    for i in tqdm(to_graph, desc="graph retrieval (q)", unit="query"):
        t0 = time.perf_counter()
        base[i] = [h.passage_id for h in graph.retrieve(questions[i], k_max)]
        base_ms.append((time.perf_counter() - t0) * 1000)

    # -- rewrite once per query that any ε asks for ------------------------------------------
    need = [i for i in to_graph if p_g[i] < max(epsilons)]
    if args.backend == "llm":
        llm, llm_info = load_llm_or_die(args.budget)
        rewriter = Rewriter(llm, budget_s=args.budget, backend="llm")
    else:
        llm_info = {"identity": "structural (no LLM)"}
        rewriter = Rewriter(backend=args.backend)
        rewriter.warmup()
    rewrites: dict[int, Any] = {}
    rewritten_ids: dict[int, list[str]] = {}
    bar = tqdm(need, desc="rewrite + graph retrieval (q')", unit="query")
    for i in bar:
        res = rewriter.rewrite(questions[i])
        rewrites[i] = res
        if res.rewritten_ok:
            rewritten_ids[i] = [h.passage_id for h in graph.retrieve(res.rewritten, k_max)]
        bar.set_postfix(ok=len(rewritten_ids), fallback=len(rewrites) - len(rewritten_ids))

    # -- per ε ------------------------------------------------------------------------------
    def ids_for(i: int, eps: float) -> list[str]:
        return rewritten_ids[i] if p_g[i] < eps and i in rewritten_ids else base[i]

    gold = {i: records[i].gold for i in to_graph}
    per_eps: dict[str, Any] = {}
    for eps in epsilons:
        attempted = [i for i in to_graph if p_g[i] < eps]
        ok = [i for i in attempted if i in rewritten_ids]
        reasons = Counter(rewrites[i].fallback for i in attempted if rewrites[i].fallback)
        row: dict[str, Any] = {
            "routed_to_graph": len(to_graph),
            "rewrite_attempted": len(attempted),
            "rewritten": len(ok),
            "fallbacks": sum(reasons.values()),
            "fallback_rate": sum(reasons.values()) / len(attempted) if attempted else None,
            "fallbacks_by_reason": dict(reasons),
            "rewrite_ms_mean": mean([rewrites[i].ms for i in attempted]),
            "rewrite_ms_p50": pct([rewrites[i].ms for i in attempted], 50) if attempted else None,
            # rewritten queries whose graph top-k differs from the query's (order / set)
            "topk_order_changed": sum(rewritten_ids[i] != base[i] for i in ok),
            "topk_set_changed": sum(set(rewritten_ids[i]) != set(base[i]) for i in ok),
            f"over_service_budget_{SERVICE_BUDGET_S:g}s": sum(
                rewrites[i].ms > SERVICE_BUDGET_S * 1000 for i in attempted
            ),
        }
        for k in KS:
            row[f"recall@{k}_without"] = mean([recall(base[i], gold[i], k) for i in to_graph])
            row[f"recall@{k}_with"] = mean([recall(ids_for(i, eps), gold[i], k) for i in to_graph])
            # the same on the queries actually changed, where any difference comes from
            row[f"recall@{k}_rewritten_only_without"] = mean(
                [recall(base[i], gold[i], k) for i in ok]
            )
            row[f"recall@{k}_rewritten_only_with"] = mean(
                [recall(rewritten_ids[i], gold[i], k) for i in ok]
            )
        per_eps[f"{eps:g}"] = row

    stats = rewriter.stats()
    result: dict[str, Any] = {
        **new_result("rewriter", args.quick, loadavg_1_5_15m_at_start=load_before),
        "config": {
            "dataset": dataset,
            "label_rule": rule,
            "label_rule_note": note,
            "split": args.split,
            "queries": len(records),
            "router": args.router,
            "champion_version": version,
            "champion_dataset_tag": champ_tag,
            "tau": router.tau,
            "champion_epsilon": getattr(router, "epsilon", None),
            "epsilons": epsilons,
            "rewrite_budget_s": args.budget,
            "service_rewrite_budget_s": SERVICE_BUDGET_S,
            "torch_threads": _torch_threads(),
            "backend": args.backend,
            "llm": llm_info,
            "graph_top_k": k_max,
        },
        "routing": {
            "routed_to_graph": len(to_graph),
            "graph_share": len(to_graph) / len(records),
            "route_s": round(route_s, 2),
            "p_graph_of_graph_routed": {
                q: pct([p_g[i] for i in to_graph], q) for q in (0, 25, 50, 75, 100)
            },
        },
        "graph_retrieval_ms_p50": pct(base_ms, 50),
        "dense_recall_at_label_time": {
            f"recall@{k}": mean([recall(records[i].dense_top, gold[i], k) for i in to_graph])
            for k in KS
        },
        "rewrites": {
            "queries_rewritten_once": len(need),
            "rewritten_ok": len(rewritten_ids),
            "fallbacks_by_reason": dict(
                Counter(r.fallback for r in rewrites.values() if r.fallback)
            ),
            "rewrite_ms_mean": mean([r.ms for r in rewrites.values()]),
            "triplets_mean": mean([len(r.triplets) for r in rewrites.values() if r.rewritten_ok]),
            "examples": [
                {"query": r.query, "rewritten": r.rewritten, "fallback": r.fallback}
                for r in list(rewrites.values())[:5]
            ],
            "rewriter_stats": stats,
        },
        "per_epsilon": per_eps,
        "notes": "Recall over the routed-to-graph subset; 'without' = graph retrieval of the "
        "query, 'with' = of q' where the query was rewritten (p_graph < ε and no fallback), "
        "else of the query. *_rewritten_only_* = the same over the rewritten queries alone. "
        "rewrite ms per query rewritten (LLM call included, cache hits never counted: each "
        "query is rewritten once); over_service_budget_*: rewrites that took longer than the "
        "service's budget, which the service would have dropped as timeouts. "
        "dense_recall_at_label_time: the stored labels' dense top "
        "list, for reference.",
    }

    print()
    head = (
        f"{'ε':>5}{'routed':>8}{'attempted':>10}{'rewritten':>10}{'fallback':>9}"
        f"{'R@2 w/o':>9}{'R@2 with':>9}{'R@5 w/o':>9}{'R@5 with':>9}{'ms mean':>9}"
    )
    print(f"{dataset}: {len(records)} labelled queries ({rule}), {len(to_graph)} routed to graph")
    print(head)
    print("-" * len(head))
    for eps_key, r in per_eps.items():
        fr = r["fallback_rate"]
        print(
            f"{eps_key:>5}{r['routed_to_graph']:>8}{r['rewrite_attempted']:>10}{r['rewritten']:>10}"
            f"{'-' if fr is None else f'{fr:.2f}':>9}"
            f"{r['recall@2_without']:>9.3f}{r['recall@2_with']:>9.3f}"
            f"{r['recall@5_without']:>9.3f}{r['recall@5_with']:>9.3f}"
            f"{r['rewrite_ms_mean'] or 0:>9.0f}"
        )
    print(f"fallbacks by reason: {result['rewrites']['fallbacks_by_reason']}")
    finish(result, args.out)
    return 0


# -- every query, per backend (issue 15): parse rate, time, graph recall with and without --


def bootstrap_ci(diff: list[float], reps: int = 2000, seed: int = 0) -> list[float]:
    """Paired bootstrap 95% interval of the mean of per-query differences, rounded to 4
    places (r2adapter/evaluate/stats.py `mean_interval`, seed 0 as before: the same
    figures)."""
    if not diff:
        return [0.0, 0.0]
    return [round(v, 4) for v in mean_interval(diff, seed=seed, n_boot=reps)]


def graph_figures(ranked: dict[str, list[str]], gold: dict[str, list[str]]) -> dict[str, float]:
    from r2adapter.data.metrics import full_chain

    ids = list(gold)
    n = max(len(ids), 1)
    return {
        "recall@2": sum(recall(ranked[i], gold[i], 2) for i in ids) / n,
        "recall@5": sum(recall(ranked[i], gold[i], 5) for i in ids) / n,
        "fcr@5": sum(full_chain(ranked[i], gold[i], 5) for i in ids) / n,
    }


def paired(
    with_: dict[str, list[str]], base: dict[str, list[str]], gold: dict[str, list[str]]
) -> dict[str, Any]:
    """Gain over no rewrite, with its paired bootstrap interval, for Recall@5 and FCR@5."""
    from r2adapter.data.metrics import full_chain

    out: dict[str, Any] = {}
    for name, fn in (
        ("recall@5", lambda r, g: recall(r, g, 5)),
        ("fcr@5", lambda r, g: full_chain(r, g, 5)),
    ):
        diff = [fn(with_[i], gold[i]) - fn(base[i], gold[i]) for i in gold]
        out[f"{name}_gain"] = round(float(np.mean(diff)), 4) if diff else 0.0
        out[f"{name}_gain_ci95"] = bootstrap_ci(diff)
    return out


def all_queries(dataset: str, backends: list[str], n: int | None, budget: float) -> dict[str, Any]:
    """Graph retrieval of every complete-gold query of `dataset` on q, on each backend's q′,
    and on q′ with its triplets seeding PPR; a fallback keeps q."""
    from r2adapter.evaluate.retrieval import rewrite_summary, stored_queries
    from r2adapter.retrieve.graph import GraphRetriever
    from r2adapter.rewrite import Rewriter
    from r2adapter.store.graph_store import latest_version

    queries = stored_queries(dataset)[:n]
    indexed = latest_version(dataset) is not None
    gold = {q.id: q.gold_passage_ids for q in queries}
    out: dict[str, Any] = {"dataset": dataset, "queries": len(queries), "indexed": indexed}
    if indexed:
        plain = GraphRetriever(dataset, seed_triplets=False)
        seeded = GraphRetriever(dataset, seed_triplets=True)
        base = {
            q.id: [h.passage_id for h in plain.retrieve(q.question, 5)]
            for q in tqdm(queries, desc=f"{dataset} graph (q)", unit="query")
        }
        out["without"] = graph_figures(base, gold)
    for backend in backends:
        rw = Rewriter(backend=backend, budget_s=budget)
        rw.warmup()
        res = {
            q.id: rw.rewrite(q.question)
            for q in tqdm(queries, desc=f"{dataset} rewrite {backend}", unit="query")
        }
        row: dict[str, Any] = rewrite_summary(backend, list(res.values()), False)
        row.pop("seed_triplets"), row.pop("applies_to")
        row["examples"] = [
            {"query": r.query, "rewritten": r.rewritten, "fallback": r.fallback}
            for r in list(res.values())[:3]
        ]
        if indexed:
            for name, retriever in (("with", plain), ("with_seeding", seeded)):
                ranked = {
                    i: (
                        [h.passage_id for h in retriever.retrieve(r.rewritten, 5)]
                        if r.rewritten_ok
                        else base[i]
                    )
                    for i, r in tqdm(res.items(), desc=f"{dataset} graph ({name})", unit="query")
                }
                row[name] = {**graph_figures(ranked, gold), **paired(ranked, base, gold)}
        out[backend] = row
    return out


def main_all_queries(args: Any) -> int:
    require_db()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    n = args.queries or (30 if args.quick else None)
    load_before = loadavg()
    rows = [all_queries(d, backends, n, args.budget) for d in datasets]
    result = {
        **new_result("rewriter_all_queries", args.quick, loadavg_1_5_15m_at_start=load_before),
        "config": {"backends": backends, "datasets": datasets, "queries": n, "budget": args.budget},
        "datasets": rows,
        "notes": "Every complete-gold query; graph top 5 of q ('without'), of q' where the "
        "backend parsed the query ('with'; else q), and of q' with its triplets seeding PPR "
        "('with_seeding'). *_gain_ci95: paired bootstrap 95% interval of the per-query "
        "difference against 'without'. ms: the rewrite alone, per query.",
    }
    print()
    for r in rows:
        w = r.get("without")
        print(
            f"{r['dataset']}: {r['queries']} queries" + ("" if r["indexed"] else " (not indexed)")
        )
        if w:
            print(
                f"  {'none':<22} R@2 {w['recall@2']:.3f}  R@5 {w['recall@5']:.3f}  "
                f"FCR@5 {w['fcr@5']:.3f}"
            )
        for b in backends:
            x = r[b]
            print(
                f"  {b}: parsed {x['parsed']:.1%}, fallbacks {x['fallbacks']}, "
                f"p50 {x['ms_p50']:.2f} ms, p95 {x['ms_p95']:.2f} ms"
            )
            for name in ("with", "with_seeding"):
                if name in x:
                    m = x[name]
                    print(
                        f"  {b + ' ' + name:<22} R@2 {m['recall@2']:.3f}  R@5 {m['recall@5']:.3f}"
                        f"  FCR@5 {m['fcr@5']:.3f}  ΔFCR@5 {m['fcr@5_gain']:+.3f} "
                        f"{m['fcr@5_gain_ci95']}  ΔR@5 {m['recall@5_gain']:+.3f}"
                    )
    finish(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
