"""The query rewriter's effect on graph retrieval (R²Adapter Figures 5 and 8).

For the labelled queries of a dataset (the configured label rule, every split; another stored rule
when that one is missing): route each with the champion router, keep the queries routed to
graph, and for each ε in {0.4, 0.6, 0.8, 1.0} rewrite those with p_graph < ε (eq. 7) with
the Rewriter on the default LLM (the local model unless one is configured), then run graph
retrieval, GraphRetriever(dataset).retrieve(q', 5). Over the routed-to-graph subset:
how many were rewritten, the fallback rate by reason, graph Recall@2/@5 with and without
rewriting, and the mean rewrite time. A query is rewritten once and reused at every ε (the
set for ε = 0.4 is contained in the set for 0.6, and so on); a fallback keeps the query as
it is, so its retrieval is the one without rewriting.

    .venv/bin/python benchmarks/bench_rewriter.py --dataset musique
    .venv/bin/python benchmarks/bench_rewriter.py --dataset musique --quick   # 30 queries
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
    from r2adapter.llm.base import get_llm

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
    return llm, {
        "identity": llm.identity,
        "load_s": round(load_s, 2),
        "probe_ms": round(probe_ms, 1),
    }


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


def recall(ids: list[str], gold: list[str], k: int) -> float:
    from r2adapter.evaluate.metrics import recall_at_k

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
    args = ap.parse_args(argv)
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
        router.bind(dataset)
        champ_tag = (alias_version(args.router, "champion").tags or {}).get("dataset")
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
    llm, llm_info = load_llm_or_die(args.budget)
    rewriter = Rewriter(llm, budget_s=args.budget)
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
    for eps, r in per_eps.items():
        fr = r["fallback_rate"]
        print(
            f"{eps:>5}{r['routed_to_graph']:>8}{r['rewrite_attempted']:>10}{r['rewritten']:>10}"
            f"{'-' if fr is None else f'{fr:.2f}':>9}"
            f"{r['recall@2_without']:>9.3f}{r['recall@2_with']:>9.3f}"
            f"{r['recall@5_without']:>9.3f}{r['recall@5_with']:>9.3f}"
            f"{r['rewrite_ms_mean'] or 0:>9.0f}"
        )
    print(f"fallbacks by reason: {result['rewrites']['fallbacks_by_reason']}")
    finish(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
