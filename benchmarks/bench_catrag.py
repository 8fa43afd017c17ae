"""CatRAG against the HippoRAG 2 baseline (issue 14): every indexed dataset's complete-gold
queries × {graph as today, graph with HippoRAG 2's edge weights, graph with the averaged
seed weighting, catrag, catrag whose entity match falls back to embeddings, catrag with
each component ablated, catrag with learned tiers out of fold}: Recall@2/5, FCR@2/5,
answer-in-context@5, hub mass, PPR-weighted strength, latency p50/p95 and catrag's anchor
and edit time, with the paired difference to `graph` on Recall@5, FCR@5 and
answer-in-context@5 (bootstrap 95% interval; McNemar's exact test on FCR@5).

    .venv/bin/python benchmarks/bench_catrag.py [--datasets 2wikimultihopqa] [--quick]

Every variant retrieves each query in turn (interleaved, so machine load falls on all
alike) from the same query embedding: latency is retrieval alone, without encoding the
query. The default run is `fact_filter: none` throughout (`catrag_llm` and
`graph_fact_filter_llm`, through the configured LLM or the local model, run only when
named in --variants); the tier source is `similarity` except in `catrag_learned_cv5`,
the learned source measured out of fold (5-fold cross-fitting by `fold_of`: each query
is retrieved with the scorer fitted on every stored query with gold outside its fold;
the fold models' coefficients are saved beside the row).
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

if not __package__:  # `python benchmarks/bench_catrag.py`: put the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_rewriter import bootstrap_ci  # noqa: E402
from benchmarks.common import (  # noqa: E402
    arg_parser,
    die,
    finish,
    indexed_datasets,
    loadavg,
    new_result,
    pct,
    require_db,
)
from r2adapter.retrieve.catrag_tiers import TierSource  # noqa: E402

DATASETS = ("2wikimultihopqa", "musique", "hotpotqa")
# name → (strategy, graph parameter overrides, catrag ablations)
VARIANTS: dict[str, tuple[str, dict[str, Any], tuple[str, ...]]] = {
    "graph": ("graph", {}, ()),
    "graph_hipporag2_weights": ("graph", {"fact_edge_scale": 2.0, "synonym_edge_scale": 2.0}, ()),
    "graph_averaged_seeds": ("graph", {"seed_weighting": "averaged"}, ()),
    "catrag": ("catrag", {}, ()),
    "catrag_embedding_match": ("catrag", {"entity_match": "embedding"}, ()),
    "catrag_no_anchoring": ("catrag", {}, ("anchoring",)),
    "catrag_no_edges": ("catrag", {}, ("edges",)),
    "catrag_no_keyfact": ("catrag", {}, ("keyfact",)),
    "catrag_anchoring_only": ("catrag", {}, ("edges", "keyfact")),
    "catrag_learned_cv5": ("catrag", {"tier_source": "learned"}, ()),
    # through the configured LLM (R2A_LLM_*, else the local model): not in the default run;
    # a budget of 60 s a query, which the local CPU model can meet (its cost is the figure)
    "catrag_llm": ("catrag", {"tier_source": "llm", "llm_timeout_s": 60.0}, ()),
    "graph_fact_filter_llm": ("graph", {"fact_filter": "llm", "llm_timeout_s": 60.0}, ()),
    # the ceiling of Stage II: tiers read off the gold (a neighbour on a gold passage
    # direct, any other irrelevant); not a method, so only when named in --variants
    "catrag_oracle_tiers": ("catrag", {}, ()),
}
QUICK_VARIANTS = ("graph", "catrag")
LLM_VARIANTS = ("catrag_llm", "graph_fact_filter_llm")
NAMED_ONLY = (*LLM_VARIANTS, "catrag_oracle_tiers")  # not in the default run
# learned tier sources measured out of fold: query q is retrieved with the model fitted on
# the queries outside q's fold (catrag_train.cross_fitted)
CROSS_FITTED = ("catrag_learned_cv5",)


class OracleTiers(TierSource):
    """Stage II with the answer key: `gold` (the query's gold-passage entities, set before
    each query) direct, every other kept neighbour irrelevant: what perfect tiers with the
    paper's multipliers could do."""

    name = "oracle"
    gold = np.zeros(0, dtype=np.int64)

    def tiers(self, q: Any, t: Any) -> np.ndarray:
        return np.where(np.isin(t.nbrs, self.gold), 3, 0)


class FoldRouted:
    """One retriever per fold; a query is retrieved by its fold's (`fold_of` its id)."""

    def __init__(self, by_fold: dict[int, Any]) -> None:
        self.by_fold = by_fold

    def retrieve_for(self, query_id: str, question: str, k: int, qvec: Any) -> Any:
        from r2adapter.evaluate.folds import fold_of

        return self.by_fold[fold_of(query_id)].retrieve(question, k, qvec=qvec)

    @property
    def fallbacks(self) -> int:
        return sum(r.fallbacks for r in self.by_fold.values())


def mcnemar(wins: int, losses: int) -> float:
    """Exact two-sided McNemar p-value from the discordant pairs."""
    from scipy.stats import binomtest

    n = wins + losses
    return 1.0 if n == 0 else float(binomtest(wins, n, 0.5).pvalue)


def paired(
    row: dict[str, Any], ours: dict[str, list[float]], base: dict[str, list[float]], vs: str
) -> None:
    """Paired differences to the variant `vs` on Recall@5, FCR@5 and answer-in-context@5
    (bootstrap 95% interval), and McNemar's exact test on FCR@5, into `row`."""
    for m in ("recall@5", "fcr@5", "answer_in_context@5"):
        if m not in ours or m not in base:
            continue
        diff = [a - b for a, b in zip(ours[m], base[m], strict=True)]
        row[f"{m}_vs_{vs}"] = round(float(np.mean(diff)), 4) if diff else 0.0
        row[f"{m}_vs_{vs}_ci95"] = bootstrap_ci(diff)
    pairs = list(zip(ours["fcr@5"], base["fcr@5"], strict=True))
    wins, losses = sum(a > b for a, b in pairs), sum(a < b for a, b in pairs)
    tail = "" if vs == "graph" else f"_vs_{vs}"  # against graph: the names of earlier runs
    row[f"fcr@5_wins_losses{tail}"] = [int(wins), int(losses)]
    row[f"fcr@5_mcnemar_p{tail}"] = round(mcnemar(int(wins), int(losses)), 4)


def run_dataset(dataset: str, names: list[str], n: int | None) -> dict[str, Any]:
    from r2adapter.config import graph_params
    from r2adapter.data.metrics import answer_in_context, full_chain, recall_at_k
    from r2adapter.evaluate.retrieval import Structure, stored_queries
    from r2adapter.index.encoder import get_encoder
    from r2adapter.retrieve.strategies import make_retriever

    queries = stored_queries(dataset)[:n] if n else stored_queries(dataset)
    enc = get_encoder()
    base = graph_params()
    retrievers: dict[str, Any] = {}
    structures: dict[str, Structure] = {}
    fold_models: dict[str, Any] = {}
    oracle: OracleTiers | None = None
    for name in names:
        mode, overrides, ablate = VARIANTS[name]
        params = replace(base, **overrides)
        options: dict[str, Any] = {"params": params}
        if mode == "catrag":
            options["ablate"] = ablate
        structures[name] = Structure()
        if name == "catrag_oracle_tiers":
            oracle = OracleTiers(params)
            r = make_retriever(mode, dataset, enc, tiers=oracle, **options)
            r.observe = structures[name]  # type: ignore[attr-defined]
            r.warmup()  # type: ignore[attr-defined]
            retrievers[name] = r
            continue
        if name in CROSS_FITTED:
            from r2adapter.retrieve.catrag import similarity_retriever
            from r2adapter.retrieve.catrag_tiers import LearnedTiers
            from r2adapter.retrieve.catrag_train import cross_fitted

            models = cross_fitted(similarity_retriever(dataset, params), progress=True)
            fold_models[name] = {k: model.to_json() for k, model in models.items()}
            by_fold = {}
            for k, model in models.items():
                tiers = LearnedTiers(params, model)
                r = make_retriever(mode, dataset, enc, tiers=tiers, **options)
                r.observe = structures[name]  # type: ignore[attr-defined]
                r.warmup()  # type: ignore[attr-defined]
                by_fold[k] = r
            retrievers[name] = FoldRouted(by_fold)
            continue
        r = make_retriever(mode, dataset, enc, **options)
        r.observe = structures[name]  # type: ignore[attr-defined]
        r.warmup()  # type: ignore[attr-defined]
        retrievers[name] = r
    ranked: dict[str, dict[str, list[str]]] = {name: {} for name in names}
    context: dict[str, dict[str, str]] = {name: {} for name in names}
    latency: dict[str, list[float]] = {name: [] for name in names}
    for q in tqdm(queries, desc=f"{dataset}: {len(names)} variants", unit="query"):
        vec = enc.encode_query(q.question)
        if oracle is not None:  # the answer key of this query
            from r2adapter.retrieve.catrag_train import gold_entities

            oracle.gold = gold_entities(
                retrievers["catrag_oracle_tiers"].cache.get(dataset), q.gold_passage_ids
            )
        for name in names:
            t = time.perf_counter()
            r = retrievers[name]
            hits = (
                r.retrieve_for(q.id, q.question, 5, vec)
                if isinstance(r, FoldRouted)
                else r.retrieve(q.question, 5, qvec=vec)
            )
            latency[name].append((time.perf_counter() - t) * 1000)
            ranked[name][q.id] = [h.passage_id for h in hits]
            context[name][q.id] = "\n".join(f"{h.title}\n{h.text}" for h in hits)
    gold = {q.id: q.gold_passage_ids for q in queries}
    answers = {q.id: q.answers for q in queries}
    metrics = {
        "recall@2": lambda r, g: recall_at_k(r, g, 2),
        "recall@5": lambda r, g: recall_at_k(r, g, 5),
        "fcr@2": lambda r, g: full_chain(r, g, 2),
        "fcr@5": lambda r, g: full_chain(r, g, 5),
    }
    per_query = {
        name: {m: [fn(ranked[name][i], gold[i]) for i in gold] for m, fn in metrics.items()}
        for name in names
    }
    if any(answers.values()):  # answer-in-context: the CPU stand-in for CatRAG's JSR
        for name in names:
            per_query[name]["answer_in_context@5"] = [
                answer_in_context(context[name][i], answers[i], ranked[name][i], gold[i], 5)
                for i in gold
                if answers[i]
            ]
    rows: dict[str, Any] = {}
    for name in names:
        mode, overrides, ablate = VARIANTS[name]
        row: dict[str, Any] = {"strategy": mode, "params": overrides, "ablate": list(ablate)}
        row.update({m: float(np.mean(v)) if v else 0.0 for m, v in per_query[name].items()})
        row["latency_ms_p50"] = pct(latency[name], 50)
        row["latency_ms_p95"] = pct(latency[name], 95)
        row["fallbacks"] = retrievers[name].fallbacks
        if hasattr(retrievers[name], "stats"):  # an LLM step's calls and fallbacks
            row.update(retrievers[name].stats())
        row.update(structures[name].summary())
        if name in fold_models:
            row["out_of_fold"] = True
            row["fold_models"] = fold_models[name]
        # against graph; a catrag variant whose tiers differ also against catrag (similarity)
        bases = ["graph"] if name != "graph" and "graph" in per_query else []
        if mode == "catrag" and "tier_source" in overrides and "catrag" in per_query:
            bases.append("catrag")
        for base_name in bases:
            paired(row, per_query[name], per_query[base_name], base_name)
        rows[name] = row
        rows[name] = row
    return {"dataset": dataset, "queries": len(queries), "variants": rows}


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__, "first 30 queries, graph and catrag only", "catrag.json")
    ap.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated")
    ap.add_argument("--variants", help=f"comma-separated, of: {', '.join(VARIANTS)} (default: all)")
    ap.add_argument("--queries", type=int, help="the first N complete-gold queries per dataset")
    args = ap.parse_args(argv)
    names = (
        [v.strip() for v in args.variants.split(",") if v.strip()]
        if args.variants
        else list(QUICK_VARIANTS if args.quick else [v for v in VARIANTS if v not in NAMED_ONLY])
    )
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        die(f"unknown variant(s) {', '.join(unknown)}: choose from {', '.join(VARIANTS)}")
    if "graph" not in names:
        names.insert(0, "graph")  # the baseline every difference is taken against
    require_db()
    requested = [d.strip() for d in args.datasets.split(",") if d.strip()]
    datasets, skipped = indexed_datasets(None, requested)
    n = args.queries or (30 if args.quick else None)
    load_before = loadavg()
    rows = [run_dataset(d, names, n) for d in datasets]
    result = {
        **new_result("catrag", args.quick, loadavg_1_5_15m_at_start=load_before),
        "config": {"datasets": datasets, "variants": names, "queries": n},
        "skipped": skipped,
        "datasets": rows,
        "notes": "Complete-gold queries; each variant retrieves every query in turn from the "
        "same query embedding (latency: retrieval alone). *_vs_graph: mean per-query "
        "difference to `graph`, *_ci95 its paired bootstrap 95% interval; fcr@5_wins_losses: "
        "queries whose full chain only this variant (wins) or only graph (losses) recovers, "
        "fcr@5_mcnemar_p McNemar's exact test on them. hub_mass: PPR mass on the top 1% of "
        "nodes by weighted degree; ppr_weighted_strength: mean weighted degree under the PPR "
        "distribution (means over queries that ran PPR). fact_filter none, tier_source "
        "similarity except catrag_learned_cv5 (learned, out of fold: 5-fold cross-fitting).",
    }
    for r in rows:
        print(f"\n{r['dataset']}: {r['queries']} queries")
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
    finish(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
