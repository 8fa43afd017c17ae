"""CatRAG against the HippoRAG 2 baseline (issue 14), through the library's retrieval
evaluation: every indexed dataset's complete-gold queries × the named retriever variants of
`r2a evaluate retrieval --variant` (r2adapter/evaluate/retrieval.py `VARIANTS`: graph as
today, with HippoRAG 2's edge weights, with the averaged seed weighting; catrag, with the
embedding entity match, with each component ablated, with learned tiers out of fold).
Per variant the library reports Recall@2/5, FCR@2/5, answer-in-context@5, hub mass,
PPR-weighted strength, latency p50/p95 and catrag's anchor and edit time; this script adds
the paired difference to `graph` on Recall@5, FCR@5 and answer-in-context@5 (bootstrap 95%
interval; McNemar's exact test on FCR@5; both from r2adapter/evaluate/stats.py) from the
per-query figures the evaluation returns.

    .venv/bin/python benchmarks/bench_catrag.py [--datasets 2wikimultihopqa] [--quick]

The same as, per dataset, `r2a evaluate retrieval --dataset D --variant all --json` plus
the paired statistics. Each variant runs over every query in turn (one variant after the
other, as the evaluation runs strategies); latency is the evaluation's: the query's
embedding and its retrieval. The default run is `fact_filter: none` throughout
(`catrag_llm` and `graph_fact_filter_llm`, through the configured LLM or the local model,
and `catrag_oracle_tiers`, the tiers read off the answer key, run only when named in
--variants); the tier source is `similarity` except in `catrag_learned_cv5` (5-fold
cross-fitting: each query retrieved with the scorer fitted on the stored queries outside
its fold; the fold models' coefficients are saved in its row).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

if not __package__:  # `python benchmarks/bench_catrag.py`: put the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (  # noqa: E402
    arg_parser,
    die,
    finish,
    indexed_datasets,
    loadavg,
    new_result,
    require_db,
)
from r2adapter.evaluate.retrieval import VARIANTS, check_variants  # noqa: E402

DATASETS = ("2wikimultihopqa", "musique", "hotpotqa")
QUICK_VARIANTS = ("graph", "catrag")
PAIRED = ("recall@5", "fcr@5", "answer_in_context@5")  # the differences to the baseline
# the forms of catrag its default is chosen among (fold_choice, union_fold_choice): its
# parts' subsets that keep anchoring (without it every subset lost on 2Wiki), with and
# without the released x3 synonyms, anchoring's ε at .1 and .5 beside the paper's .2, and
# anchors on named entities only (the paper's: `catrag_paper`, `*_entities`)
CANDIDATES = (
    "catrag_all_parts",
    "catrag_no_edges",
    "catrag_no_keyfact",
    "catrag_anchoring_only",
    "catrag_synonym_x3",
    "catrag_no_keyfact_synonym_x3",
    "catrag_anchoring_only_eps01",
    "catrag_anchoring_only_eps05",
    "catrag_no_keyfact_eps01",
    "catrag_paper",
    "catrag_anchoring_only_entities",
    "catrag_no_keyfact_entities",
    "catrag_no_edges_entities",
)


def paired(
    row: dict[str, Any], ours: dict[str, list[float]], base: dict[str, list[float]], vs: str
) -> None:
    """Paired differences to the variant `vs` on Recall@5, FCR@5 and answer-in-context@5
    (r2adapter/evaluate/stats.py: the 95% paired bootstrap at this benchmark's seed 0), and
    McNemar's exact test on FCR@5's discordant pairs, into `row`."""
    from r2adapter.evaluate.stats import discordant, mcnemar, paired_bootstrap

    for m in PAIRED:
        if m not in ours or m not in base or not ours[m]:
            continue
        pb = paired_bootstrap(ours[m], base[m], seed=0)
        row[f"{m}_vs_{vs}"] = round(pb["diff"], 4)
        row[f"{m}_vs_{vs}_ci95"] = [round(x, 4) for x in pb["ci95"]]
    wins, losses = discordant(ours["fcr@5"], base["fcr@5"])
    tail = "" if vs == "graph" else f"_vs_{vs}"  # against graph: the names of earlier runs
    row[f"fcr@5_wins_losses{tail}"] = [wins, losses]
    row[f"fcr@5_mcnemar_p{tail}"] = round(mcnemar(wins, losses, exact=True), 4)


def run_dataset(dataset: str, names: list[str], n: int | None) -> dict[str, Any]:
    """The library's evaluation of `names` on `dataset`, each row with its paired
    differences to graph (and, for a catrag variant whose tier source differs, to catrag)."""
    from r2adapter.evaluate.retrieval import evaluate_retrieval

    report: dict[str, Any] = evaluate_retrieval(dataset, variants=names, per_query=True, limit=n)
    per_query = report["per_query"]
    rows: dict[str, Any] = {}
    for name, row in report["modes"].items():
        spec = VARIANTS[name]
        bases = ["graph"] if name != "graph" and "graph" in per_query else []
        if spec.strategy == "catrag" and "tier_source" in spec.params and "catrag" in per_query:
            bases.append("catrag")
        for base in bases:
            paired(row, per_query[name], per_query[base], base)
        rows[name] = row
    out = {
        "dataset": dataset,
        "queries": report["n_queries"],
        "index_version": report["index_version"],
        "ppr": report["ppr"],
        "variants": rows,
        # per query, in query_ids' order: what a later choice or a paired test reads
        "query_ids": report["query_ids"],
        "per_query": {
            name: {m: [round(v, 4) for v in per_query[name][m]] for m in ("recall@5", "fcr@5")}
            for name in per_query
        },
    }
    choice = fold_choice(out)
    if choice:
        out["fold_choice"] = choice
    return out


def fold_choice(result: dict[str, Any], margin: float = 0.005) -> dict[str, Any]:
    """CatRAG's form chosen on the folds, never on the figures it is reported by: in each
    of the 5 folds (r2adapter/data/splits.py `fold_of`, the routers' folds), among the
    catrag variants of CANDIDATES that ran, the one with the best FCR@5 on the *other*
    four folds whose Recall@5 there is at least graph's − `margin`; scored on the held-out
    fold. Returns the choice per fold and the held-out figures of the chosen forms against
    graph on the same queries (paired)."""
    from r2adapter.data.splits import N_FOLDS, fold_of
    from r2adapter.evaluate.stats import paired_bootstrap

    pq, ids = result["per_query"], result["query_ids"]
    names = [n for n in CANDIDATES if n in pq]
    if "graph" not in pq or not names:
        return {}
    folds = np.array([fold_of(q, N_FOLDS) for q in ids])
    arr = {n: {m: np.asarray(pq[n][m]) for m in ("recall@5", "fcr@5")} for n in [*names, "graph"]}
    chosen_fcr, chosen_rec = np.zeros(len(ids)), np.zeros(len(ids))
    per_fold = []
    for k in range(N_FOLDS):
        dev, held = folds != k, folds == k
        g_rec = arr["graph"]["recall@5"][dev].mean()
        ok = [n for n in names if arr[n]["recall@5"][dev].mean() >= g_rec - margin] or names
        best = max(ok, key=lambda n: (arr[n]["fcr@5"][dev].mean(), arr[n]["recall@5"][dev].mean()))
        per_fold.append(best)
        chosen_fcr[held] = arr[best]["fcr@5"][held]
        chosen_rec[held] = arr[best]["recall@5"][held]
    g = arr["graph"]
    return {
        "candidates": names,
        "per_fold": per_fold,
        "held_out": {
            "fcr@5": float(chosen_fcr.mean()),
            "recall@5": float(chosen_rec.mean()),
            "fcr@5_vs_graph": paired_bootstrap(chosen_fcr, g["fcr@5"], seed=0),
            "recall@5_vs_graph": paired_bootstrap(chosen_rec, g["recall@5"], seed=0),
        },
    }


def merge_earlier(rows: list[dict[str, Any]], path: str) -> list[str]:
    """The variants of an earlier result (`--merge`) that this run did not evaluate, joined
    into each dataset's rows when the queries are the same; returns their names."""
    import json

    try:
        earlier = {r["dataset"]: r for r in json.loads(Path(path).read_text())["datasets"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        die(f"--merge {path}: not a result of this benchmark ({str(e).splitlines()[0]})")
    added: set[str] = set()
    for r in rows:
        old = earlier.get(r["dataset"])
        if old is None or "per_query" not in old:
            continue
        if old.get("query_ids") != r["query_ids"]:
            die(f"--merge {path}: {r['dataset']}'s queries differ from this run's")
        for name, pq in old["per_query"].items():
            if name not in r["per_query"]:
                r["per_query"][name] = pq
                r["variants"][name] = {**old["variants"][name], "merged": True}
                added.add(name)
    return sorted(added)


def union_fold_choice(results: list[dict[str, Any]], margin: float = 0.005) -> dict[str, Any]:
    """CatRAG's default chosen on the folds of every corpus run together (the development
    corpora's union): in each fold k, among the CANDIDATES that ran on every corpus, the
    one whose *worst* corpus gains most FCR@5 over graph on the other four folds (a
    default must not lose on any corpus), among those whose Recall@5 there is at least
    graph's − `margin` on every corpus; scored on fold k of each corpus. `all_folds`: the
    same rule over every query, the form the default takes (params.yaml
    graph.catrag_ablate and its overrides); its figures on the queries it was chosen on
    are not its estimate: `held_out` is."""
    from r2adapter.data.splits import N_FOLDS, fold_of
    from r2adapter.evaluate.stats import paired_bootstrap

    runs = [r for r in results if "per_query" in r and "graph" in r["per_query"]]
    names = [n for n in CANDIDATES if runs and all(n in r["per_query"] for r in runs)]
    if len(runs) < 2 or not names:
        return {}
    arr = {
        r["dataset"]: {
            n: {m: np.asarray(r["per_query"][n][m]) for m in ("recall@5", "fcr@5")}
            for n in [*names, "graph"]
        }
        for r in runs
    }
    folds = {r["dataset"]: np.array([fold_of(q, N_FOLDS) for q in r["query_ids"]]) for r in runs}

    def choose(dev: dict[str, np.ndarray]) -> tuple[str, dict[str, float]]:
        def gain(n: str, d: str, m: str) -> float:
            return float(arr[d][n][m][dev[d]].mean() - arr[d]["graph"][m][dev[d]].mean())

        ok = [n for n in names if all(gain(n, d, "recall@5") >= -margin for d in arr)] or names
        worst = {n: min(gain(n, d, "fcr@5") for d in arr) for n in ok}
        best = max(ok, key=lambda n: (worst[n], np.mean([gain(n, d, "fcr@5") for d in arr])))
        return best, worst

    per_fold, held = (
        [],
        {d: {m: np.zeros(len(folds[d])) for m in ("recall@5", "fcr@5")} for d in arr},
    )
    for k in range(N_FOLDS):
        best, _ = choose({d: folds[d] != k for d in arr})
        per_fold.append(best)
        for d in arr:
            h = folds[d] == k
            for m in ("recall@5", "fcr@5"):
                held[d][m][h] = arr[d][best][m][h]
    final, worst = choose({d: np.ones(len(folds[d]), dtype=bool) for d in arr})
    return {
        "rule": "max over candidates of the min over corpora of the FCR@5 gain vs graph on "
        f"the dev folds, R@5 >= graph - {margin} on each corpus",
        "datasets": list(arr),
        "candidates": names,
        "per_fold": per_fold,
        "all_folds": final,
        "worst_corpus_fcr@5_gain_all_folds": {n: round(v, 4) for n, v in worst.items()},
        "held_out": {
            d: {
                "fcr@5": float(held[d]["fcr@5"].mean()),
                "recall@5": float(held[d]["recall@5"].mean()),
                "fcr@5_vs_graph": paired_bootstrap(
                    held[d]["fcr@5"], arr[d]["graph"]["fcr@5"], seed=0
                ),
                "recall@5_vs_graph": paired_bootstrap(
                    held[d]["recall@5"], arr[d]["graph"]["recall@5"], seed=0
                ),
            }
            for d in arr
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__ or "", "first 30 queries, graph and catrag only", "catrag.json")
    ap.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated")
    ap.add_argument("--variants", help=f"comma-separated, of: {', '.join(VARIANTS)} (default: all)")
    ap.add_argument("--queries", type=int, help="the first N complete-gold queries per dataset")
    ap.add_argument(
        "--merge",
        help="an earlier result of this benchmark: its variants not run now join each "
        "dataset's rows (same queries, checked) before the union fold choice",
    )
    args = ap.parse_args(argv)
    names = (
        [v.strip() for v in args.variants.split(",") if v.strip()]
        if args.variants
        else list(QUICK_VARIANTS if args.quick else ["all"])
    )
    unknown = [v for v in names if v != "all" and v not in VARIANTS]
    if unknown:
        die(f"unknown variant(s) {', '.join(unknown)}: choose from {', '.join(VARIANTS)}")
    names = list(check_variants(names))
    if "graph" not in names:
        names.insert(0, "graph")  # the baseline every difference is taken against
    require_db()
    requested = [d.strip() for d in args.datasets.split(",") if d.strip()]
    datasets, skipped = indexed_datasets(None, requested)
    n = args.queries or (30 if args.quick else None)
    load_before = loadavg()
    rows = [run_dataset(d, names, n) for d in datasets]
    merged = merge_earlier(rows, args.merge) if args.merge else []
    for r in rows if merged else []:  # the one-corpus choice over every variant now present
        r.pop("fold_choice", None)
        r.update({"fold_choice": c} if (c := fold_choice(r)) else {})
    union = union_fold_choice(rows)
    result = {
        **new_result("catrag", args.quick, loadavg_1_5_15m_at_start=load_before),
        "config": {"datasets": datasets, "variants": names, "queries": n},
        "skipped": skipped,
        "datasets": rows,
        **({"union_fold_choice": union} if union else {}),
        **({"merged_from": {"path": args.merge, "variants": merged}} if merged else {}),
        "notes": "Complete-gold queries, through `r2a evaluate retrieval --variant` "
        "(r2adapter/evaluate/retrieval.py VARIANTS); each variant runs over every query in "
        "turn (latency: the query's embedding and its retrieval). *_vs_graph: mean per-query "
        "difference to `graph`, *_ci95 its paired bootstrap 95% interval; fcr@5_wins_losses: "
        "queries whose full chain only this variant (wins) or only graph (losses) recovers, "
        "fcr@5_mcnemar_p McNemar's exact test on them. hub_mass: PPR mass on the top 1% of "
        "nodes by weighted degree; ppr_weighted_strength: mean weighted degree under the PPR "
        "distribution (means over queries that ran PPR). fact_filter none, tier_source "
        "similarity except catrag_learned_cv5 (learned, out of fold: 5-fold cross-fitting).",
    }
    for r in rows:
        print(f"\n{r['dataset']}: {r['queries']} queries")
        if "fold_choice" in r:
            fc = r["fold_choice"]
            h = fc["held_out"]
            print(
                f"  chosen per fold: {', '.join(fc['per_fold'])}; held out FCR@5 "
                f"{h['fcr@5']:.3f} ({h['fcr@5_vs_graph']['diff']:+.3f} "
                f"{[round(x, 3) for x in h['fcr@5_vs_graph']['ci95']]}), R@5 {h['recall@5']:.3f} "
                f"({h['recall@5_vs_graph']['diff']:+.3f})"
            )
        for name, m in r["variants"].items():
            vs = (
                f"  FCR@5 {m['fcr@5_vs_graph']:+.3f} {m['fcr@5_vs_graph_ci95']}"
                f" p {m['fcr@5_mcnemar_p']:.3f}"
                if "fcr@5_vs_graph" in m
                else ""
            )
            print(
                f"  {name:<24} R@2 {m['recall@2']:.3f} R@5 {m['recall@5']:.3f} "
                f"FCR@2 {m['fcr@2']:.3f} FCR@5 {m['fcr@5']:.3f} hub {m.get('hub_mass', 0):.4f} "
                f"S {m.get('ppr_weighted_strength', 0):.1f} p50 {m['latency_ms_p50']:.1f} ms{vs}"
            )
    if union:
        print(
            f"\nunion of {', '.join(union['datasets'])}: chosen per fold "
            f"{', '.join(union['per_fold'])}; on all folds {union['all_folds']}"
        )
        for d, h in union["held_out"].items():
            f, r = h["fcr@5_vs_graph"], h["recall@5_vs_graph"]
            print(
                f"  {d:<16} held out FCR@5 {f['diff']:+.3f} {[round(x, 3) for x in f['ci95']]}"
                f", R@5 {r['diff']:+.3f} {[round(x, 3) for x in r['ci95']]}"
            )
    finish(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
