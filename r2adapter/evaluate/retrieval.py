"""`r2a evaluate retrieval`: every retrieval strategy (dense, graph, catrag; or a subset)
on a dataset's complete-gold queries; with `rewrite`, the graph strategies run on q′ for
every query the rewriter parses (issue 15). Graph strategies also report where their PPR
mass sits (hub mass, PPR-weighted strength: CatRAG §6).

`variants` evaluates named variants of a retriever instead of the strategies (`VARIANTS`:
a strategy with `GraphParams` overrides, catrag ablations and how its tier source is made:
`r2a evaluate retrieval --variant NAME`); `per_query` adds each run's per-query figures, in
query order, for paired statistics over the same queries (benchmarks/bench_catrag.py)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from tqdm import tqdm

from r2adapter.config import GraphParams, graph_params
from r2adapter.data.metrics import answer_in_context, full_chain, percentile, recall_at_k
from r2adapter.data.schema import Query
from r2adapter.errors import R2AError
from r2adapter.index.encoder import get_encoder
from r2adapter.retrieve.base import Retriever
from r2adapter.retrieve.strategies import GRAPH_STRATEGIES, check_strategies, make_retriever
from r2adapter.store.graph_store import require_version
from r2adapter.store.queries import stored_queries

DEPTH = 5


@dataclass(frozen=True)
class Variant:
    """A retriever variant: `strategy` with `params` (GraphParams field → value, over
    params.yaml's `graph:`) and catrag's `ablate`d components; `tiers` says how catrag's
    tier source is made beyond `params`: "" (as `params` say), `cross_fitted` (the learned
    source out of fold: each query scored by the tier model fitted on the stored queries
    outside its fold, `catrag_train.cross_fitted`) or `oracle` (tiers read off the answer
    key, `OracleTiers`: a ceiling, not a method). `default`: in `variants=("all",)`."""

    strategy: str
    params: dict[str, Any] = field(default_factory=dict)
    ablate: tuple[str, ...] = ()
    tiers: str = ""
    default: bool = True


# the named variants (benchmarks/bench_catrag.py's table; docs/retrieval.md, "CatRAG")
VARIANTS: dict[str, Variant] = {
    "graph": Variant("graph"),
    "graph_hipporag2_weights": Variant(
        "graph", {"fact_edge_scale": 2.0, "synonym_edge_scale": 2.0}
    ),
    "graph_averaged_seeds": Variant("graph", {"seed_weighting": "averaged"}),
    "catrag": Variant("catrag"),  # the configured default (graph.catrag_ablate, anchor_phrases)
    # the paper's form: its three parts, anchored on the query's named entities
    "catrag_paper": Variant("catrag", {"anchor_phrases": "entities"}),
    # the three parts anchored on entities and noun chunks (the first build's form)
    "catrag_all_parts": Variant("catrag"),
    "catrag_embedding_match": Variant("catrag", {"entity_match": "embedding"}),
    "catrag_no_anchoring": Variant("catrag", ablate=("anchoring",)),
    "catrag_no_edges": Variant("catrag", ablate=("edges",)),
    "catrag_no_keyfact": Variant("catrag", ablate=("keyfact",)),
    "catrag_anchoring_only": Variant("catrag", ablate=("edges", "keyfact")),
    # anchoring's weak reset weight ε beside the paper's .2 (the union fold choice's grid)
    "catrag_anchoring_only_eps01": Variant(
        "catrag", {"anchor_epsilon": 0.1}, ablate=("edges", "keyfact")
    ),
    "catrag_anchoring_only_eps05": Variant(
        "catrag", {"anchor_epsilon": 0.5}, ablate=("edges", "keyfact")
    ),
    "catrag_no_keyfact_eps01": Variant("catrag", {"anchor_epsilon": 0.1}, ablate=("keyfact",)),
    # the paper anchors "recognized entities": spaCy's named entities, no noun chunks
    "catrag_anchoring_only_entities": Variant(
        "catrag", {"anchor_phrases": "entities"}, ablate=("edges", "keyfact")
    ),
    "catrag_no_keyfact_entities": Variant(
        "catrag", {"anchor_phrases": "entities"}, ablate=("keyfact",)
    ),
    "catrag_no_edges_entities": Variant(
        "catrag", {"anchor_phrases": "entities"}, ablate=("edges",)
    ),
    "catrag_learned_cv5": Variant("catrag", {"tier_source": "learned"}, tiers="cross_fitted"),
    # CatRAG's released code: synonym edge scores × 3 (its appendix), on the catrag walk only
    "catrag_synonym_x3": Variant("catrag", {"catrag_synonym_scale": 3.0}),
    "catrag_no_keyfact_synonym_x3": Variant(
        "catrag", {"catrag_synonym_scale": 3.0}, ablate=("keyfact",)
    ),
    # through the configured LLM (R2A_LLM_*, else the local model), a budget of 60 s a
    # query (which the local CPU model can meet: its cost is the figure); only when named
    "catrag_llm": Variant("catrag", {"tier_source": "llm", "llm_timeout_s": 60.0}, default=False),
    "graph_fact_filter_llm": Variant(
        "graph", {"fact_filter": "llm", "llm_timeout_s": 60.0}, default=False
    ),
    # Stage II's ceiling: tiers read off the gold; not a method, so only when named
    "catrag_oracle_tiers": Variant("catrag", tiers="oracle", default=False),
    # the same answer-key policy without key-fact, and with hub-free gold (the gold
    # passages' entities less the top 1% of phrase nodes by strength: years, nationalities)
    "catrag_oracle_tiers_no_keyfact": Variant(
        "catrag", ablate=("keyfact",), tiers="oracle", default=False
    ),
    "catrag_oracle_tiers_hubfree": Variant("catrag", tiers="oracle_hubfree", default=False),
    "catrag_oracle_tiers_hubfree_no_keyfact": Variant(
        "catrag", ablate=("keyfact",), tiers="oracle_hubfree", default=False
    ),
}
TIER_KINDS = ("", "cross_fitted", "oracle", "oracle_hubfree")
# the per-query figures `per_query` returns (answer-in-context over the queries with answers)
PER_QUERY = ("recall@2", "recall@5", "fcr@2", "fcr@5", "answer_in_context@5")


def check_variants(names: Sequence[str]) -> tuple[str, ...]:
    """Known variant names, in the order given, once each; "all": the default ones."""
    out: list[str] = []
    for name in names:
        if name == "all":
            out += [v for v, spec in VARIANTS.items() if spec.default]
        elif name in VARIANTS:
            out.append(name)
        else:
            raise R2AError(
                f"unknown retrieval variant {name!r}: choose from all, {', '.join(VARIANTS)}"
            )
    return tuple(dict.fromkeys(out))


def catrag_form(ablate: Sequence[str], anchor_phrases: str) -> str:
    """CatRAG's form in words: the paper's (three parts, named-entity anchors) or the
    subset that runs, named plainly."""
    on = [part for part in ("anchoring", "edges", "keyfact") if part not in ablate]
    anchors = "named entities" if anchor_phrases == "entities" else "entities and noun chunks"
    if not on:
        return "no part on: graph retrieval"
    if len(on) == 3 and anchor_phrases == "entities":
        return "the paper's form: anchoring (named entities), tiered edges, key-fact"
    parts = ", ".join(f"anchoring ({anchors})" if p == "anchoring" else p for p in on)
    return f"a subset of the paper's parts: {parts}" if len(on) < 3 else f"all parts: {parts}"


def variant_params(name: str, base: GraphParams | None = None) -> GraphParams:
    """The variant's GraphParams: `base` (params.yaml's) with its overrides, checked."""
    spec = VARIANTS[name]
    overrides = dict(spec.params)
    if spec.strategy == "catrag" and name != "catrag":
        # a named form is what its name says over CatRAG's three parts, whatever parts the
        # configured default (`catrag`, graph.catrag_ablate) turns off; without `_entities`
        # (or `catrag_paper`) its anchors are entities and noun chunks, as every result file
        # before the named-entity anchors measured
        overrides.setdefault("catrag_ablate", ())
        overrides.setdefault("anchor_phrases", "entities_and_chunks")
    try:
        p = replace(base or graph_params(), **overrides)
    except TypeError as e:
        raise R2AError(f"variant {name!r}: {e}") from None
    p.check()
    return p


def oracle_tiers(params: GraphParams) -> Any:
    """Stage II with the answer key (the variant `catrag_oracle_tiers`): `gold` (the
    query's gold-passage entities, set before each query) direct, every other kept
    neighbour irrelevant: what perfect tiers with the paper's multipliers could do."""
    from r2adapter.retrieve.catrag_tiers import TierSource

    class OracleTiers(TierSource):
        name = "oracle"
        gold = np.zeros(0, dtype=np.int64)

        def tiers(self, q: Any, t: Any) -> np.ndarray:
            return np.where(np.isin(t.nbrs, self.gold), 3, 0)

    return OracleTiers(params)


@dataclass
class _Run:
    """One evaluated retriever: `retriever` (or `pick` choosing one per query: a fold's,
    the oracle's with the query's gold set), and what its row reports besides."""

    retriever: Any
    pick: Callable[[Query], Retriever] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    parts: list[Any] = field(default_factory=list)  # every retriever `pick` may return

    @property
    def fallbacks(self) -> int:
        return sum(int(getattr(r, "fallbacks", 0)) for r in self.parts or [self.retriever])

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for r in self.parts or [self.retriever]:
            for k, v in (r.stats() if hasattr(r, "stats") else {}).items():
                out[k] = out.get(k, 0) + v if isinstance(v, int | float) else v
        return out


@dataclass(frozen=True)
class RankedRun:
    """Ranked ids per query for one retriever, with per-query latency in ms and the text
    of the top 5 (titles and passages: answer-in-context reads it)."""

    ranked: dict[str, list[str]]
    latency_ms: dict[str, float]
    context: dict[str, str] = field(default_factory=dict)


def run_retriever(
    retriever: Retriever,
    queries: list[Query],
    depth: int,
    desc: str = "",
    rewrite: Any = None,
    own_embedding: bool = False,
    pick: Callable[[Query], Retriever] | None = None,
) -> RankedRun:
    """`rewrite`: a callable query → RewriteResult; its q′ is retrieved instead, and its
    time counts in the latency (a caller waits for it). `own_embedding`: q′ is retrieved
    on q's embedding, as the adapter serves a structural rewrite (its triplets seed the
    walk; r2adapter/adapter.py), and as the k-way labels time graph+rw. `pick`: the
    retriever of each query (a fold's, out of fold), else `retriever`."""
    enc = get_encoder()
    ranked, latency, context = {}, {}, {}
    for q in tqdm(queries, desc=desc or f"retrieve {retriever.mode}", unit="query"):
        r = pick(q) if pick is not None else retriever  # not in the query's time
        t = time.perf_counter()  # includes encoding the query: what a caller waits for
        text = rewrite(q.question).rewritten if rewrite is not None else q.question
        vec = enc.encode_query(q.question if own_embedding else text)
        hits = r.retrieve(text, depth, qvec=vec)
        latency[q.id] = (time.perf_counter() - t) * 1000
        ranked[q.id] = [h.passage_id for h in hits]
        context[q.id] = "\n".join(f"{h.title}\n{h.text}" for h in hits[:5])
    return RankedRun(ranked, latency, context)


def summarize(run: RankedRun, queries: list[Query]) -> dict[str, float]:
    lat = list(run.latency_ms.values())
    n = max(len(queries), 1)
    return {
        "recall@2": sum(recall_at_k(run.ranked[q.id], q.gold_passage_ids, 2) for q in queries) / n,
        "recall@5": sum(recall_at_k(run.ranked[q.id], q.gold_passage_ids, 5) for q in queries) / n,
        "fcr@2": sum(full_chain(run.ranked[q.id], q.gold_passage_ids, 2) for q in queries) / n,
        "fcr@5": sum(full_chain(run.ranked[q.id], q.gold_passage_ids, 5) for q in queries) / n,
        "latency_ms_p50": percentile(lat, 50),
        "latency_ms_p95": percentile(lat, 95),
        **answer_summary(run, queries),
    }


def answer_summary(run: RankedRun, queries: list[Query]) -> dict[str, float]:
    """`answer_in_context@5` (a gold answer or alias in the top 5's text and the full
    chain retrieved: the CPU stand-in for CatRAG's JSR) for a dataset whose queries carry
    answers; nothing for one that does not."""
    with_answers = [q for q in queries if q.answers]
    if not with_answers or not run.context:
        return {}
    hits = [
        answer_in_context(
            run.context.get(q.id, ""), q.answers, run.ranked[q.id], q.gold_passage_ids, 5
        )
        for q in with_answers
    ]
    return {"answer_in_context@5": sum(hits) / len(hits)}


REWRITE_CHOICES = ("none", "structural", "llm")


class Structure:
    """Collects, per query a graph strategy runs PPR for, where the mass sits
    (`ppr_structure`) and the strategy's own figures (catrag: edit and PPR ms)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, float]] = []

    def __call__(self, ppr: Any, op: Any, info: dict[str, float]) -> None:
        from r2adapter.retrieve.graph import ppr_structure

        self.rows.append({**ppr_structure(ppr, op), **info})

    def summary(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if not self.rows:
            return out
        for key in (
            "hub_mass",
            "ppr_weighted_strength",
            "hub_mass_entities",
            "ppr_weighted_strength_entities",
            "entity_mass",
            "anchors",
            "edited_columns",
        ):
            vals = [r[key] for r in self.rows if key in r]
            if vals:
                out[key] = sum(vals) / len(vals)
        for key in ("anchor_ms", "edit_ms", "ppr_ms"):
            vals = [r[key] for r in self.rows if key in r]
            if vals:
                out[f"{key}_p50"] = percentile(vals, 50)
                out[f"{key}_p95"] = percentile(vals, 95)
        return out


def per_query_figures(run: RankedRun, queries: list[Query]) -> dict[str, list[float]]:
    """`PER_QUERY`'s figures of every query, in `queries`' order (answer-in-context over
    the queries that carry answers, in the same order): the paired statistics' input."""
    out: dict[str, list[float]] = {
        "recall@2": [recall_at_k(run.ranked[q.id], q.gold_passage_ids, 2) for q in queries],
        "recall@5": [recall_at_k(run.ranked[q.id], q.gold_passage_ids, 5) for q in queries],
        "fcr@2": [float(full_chain(run.ranked[q.id], q.gold_passage_ids, 2)) for q in queries],
        "fcr@5": [float(full_chain(run.ranked[q.id], q.gold_passage_ids, 5)) for q in queries],
    }
    with_answers = [q for q in queries if q.answers]
    if with_answers and run.context:
        out["answer_in_context@5"] = [
            float(
                answer_in_context(
                    run.context.get(q.id, ""), q.answers, run.ranked[q.id], q.gold_passage_ids, 5
                )
            )
            for q in with_answers
        ]
    return out


def _variant_run(name: str, dataset: str, options: dict[str, Any], progress: bool) -> _Run:
    """The retriever(s) of variant `name`: one, or one per fold (`cross_fitted`), or one
    whose oracle tiers read each query's gold (`oracle`)."""
    spec = VARIANTS[name]
    params = options["params"]
    if spec.tiers == "cross_fitted":
        from r2adapter.data.splits import fold_of
        from r2adapter.retrieve.catrag import similarity_retriever
        from r2adapter.retrieve.catrag_tiers import LearnedTiers
        from r2adapter.retrieve.catrag_train import cross_fitted

        models = cross_fitted(similarity_retriever(dataset, params), progress=progress)
        by_fold = {
            k: make_retriever(spec.strategy, dataset, tiers=LearnedTiers(params, m), **options)
            for k, m in models.items()
        }
        first = next(iter(by_fold.values()))
        extra = {"out_of_fold": True, "fold_models": {k: m.to_json() for k, m in models.items()}}
        return _Run(first, lambda q: by_fold[fold_of(q.id)], extra, list(by_fold.values()))
    if spec.tiers in ("oracle", "oracle_hubfree"):
        from r2adapter.retrieve.catrag_train import gold_entities

        oracle = oracle_tiers(params)
        r = make_retriever(spec.strategy, dataset, tiers=oracle, **options)

        def with_gold(q: Query) -> Retriever:
            g = r.cache.get(dataset)  # type: ignore[attr-defined]
            gold = gold_entities(g, q.gold_passage_ids)
            if spec.tiers == "oracle_hubfree":  # no hub among the direct neighbours
                gold = gold[~g.operator().entity_hubs[gold]]
            oracle.gold = gold
            return r

        return _Run(r, with_gold)
    return _Run(make_retriever(spec.strategy, dataset, **options))


def evaluate_retrieval(
    dataset: str,
    rewrite: str = "none",
    seed_triplets: bool = True,
    modes: Sequence[str] | None = None,
    ablate: Sequence[str] = (),
    ppr: str | None = None,
    variants: Sequence[str] = (),
    per_query: bool = False,
    limit: int | None = None,
) -> dict[str, object]:
    """`rewrite`: none, or the rewriter backend whose q′ the graph strategies run on (dense
    keeps the query: Algorithm 1 rewrites for the graph); `seed_triplets`: q′'s triplets
    also seed PPR (GraphRetriever's option); `modes`: a subset of the strategies (all when
    None); `ablate`: catrag components turned off (catrag.ABLATIONS); `ppr`: local or
    exact forces the graph strategies' PPR solver (None: graph.ppr_solver).

    `variants`: named retriever variants (`VARIANTS`; "all": the default ones) evaluated
    instead of `modes`, each reported under its name with its strategy, overrides and
    ablations (not with `modes` or `ablate`: a variant names its own). `per_query`: the
    report adds `query_ids` and `per_query` (run → `PER_QUERY` figure → values in that
    order). `limit`: the first N complete-gold queries only."""
    if ppr not in (None, "local", "exact"):
        raise R2AError(f"ppr must be local or exact, not {ppr!r}")
    params = replace(graph_params(), ppr_solver=ppr) if ppr else None
    from r2adapter.retrieve.catrag import check_ablations

    if rewrite not in REWRITE_CHOICES:
        raise ValueError(f"rewrite must be one of {REWRITE_CHOICES}, not {rewrite!r}")
    chosen_variants = check_variants(variants)
    if chosen_variants and (modes or ablate):
        raise R2AError("--variant names its strategy and ablations: leave out --mode and --ablate")
    chosen = check_strategies(modes)
    ablations = check_ablations(ablate)
    if ablations and "catrag" not in chosen:
        raise R2AError("--ablate turns catrag components off: include catrag in --mode")
    # (report name, strategy, variant or None) in the report's order
    runs: list[tuple[str, str, str | None]] = (
        [(v, VARIANTS[v].strategy, v) for v in chosen_variants]
        if chosen_variants
        else [(m, m, None) for m in chosen]
    )
    variant_params_ = {v: variant_params(v, params) for v in chosen_variants}
    version = require_version(dataset)
    queries = stored_queries(dataset)
    if limit:
        queries = queries[:limit]
    rewriter = None
    if rewrite != "none":
        from r2adapter.rewrite import Rewriter

        rewriter = Rewriter(backend=rewrite)
        rewriter.warmup()  # a model or parser load is not a rewrite's time
    results: list[Any] = []
    first_graph = next((name for name, m, _ in runs if m in GRAPH_STRATEGIES), None)

    def rewrite_one(question: str, record: bool) -> Any:
        res = rewriter.rewrite(question)  # type: ignore[union-attr]
        if record:  # the rewrite block counts each question once
            results.append(res)
        return res

    out: dict[str, dict[str, Any]] = {}
    figures_by_run: dict[str, dict[str, list[float]]] = {}
    for name, mode, variant in runs:
        graph_like = mode in GRAPH_STRATEGIES
        options: dict[str, Any] = {"seed_triplets": seed_triplets} if graph_like else {}
        run_params = variant_params_[variant] if variant is not None else params
        if graph_like and run_params is not None:
            options["params"] = run_params
        if mode == "catrag":
            options["ablate"] = VARIANTS[variant].ablate if variant is not None else ablations
        ev = (
            _variant_run(variant, dataset, options, progress=True)
            if variant is not None
            else _Run(make_retriever(mode, dataset, **options))
        )
        structure = Structure()
        for r in ev.parts or [ev.retriever]:
            if graph_like:
                r.observe = structure
            if hasattr(r, "warmup"):
                r.warmup()  # spaCy and per-index maps load once, not in a query's time
        rw = None
        if rewriter is not None and graph_like:
            record = name == first_graph

            def rw(question: str, record: bool = record) -> Any:
                return rewrite_one(question, record)

        own = rw is not None and rewrite == "structural"  # as served (adapter.py)
        run = run_retriever(
            ev.retriever,
            queries,
            DEPTH,
            desc=f"retrieve {name}",
            rewrite=rw,
            own_embedding=own,
            pick=ev.pick,
        )
        m: dict[str, Any] = {}
        if variant is not None:
            spec = VARIANTS[variant]
            m.update({"strategy": mode, "params": dict(spec.params), "ablate": list(spec.ablate)})
        m.update(summarize(run, queries))
        if graph_like:
            m["fallbacks"] = ev.fallbacks
            m.update(structure.summary())
            # the LLM steps' counts (fact filter, tier judge): calls, fallbacks by reason
            m.update(ev.stats())
        if mode == "catrag":  # graph.catrag_ablate and --ablate
            m["ablate"] = list(ev.retriever.ablate)
            m["form"] = catrag_form(ev.retriever.ablate, ev.retriever.params.anchor_phrases)
        m.update(ev.extra)
        out[name] = m
        if per_query:
            figures_by_run[name] = per_query_figures(run, queries)
    p = params or graph_params()
    report: dict[str, object] = {
        "dataset": dataset,
        "n_queries": len(queries),
        "ppr": {"solver": p.ppr_solver, "r_max": p.ppr_r_max},
        "openie": version.openie,
        "index_version": version.id,
        "modes": out,
        "rewrite": {
            **rewrite_summary(rewrite, results, seed_triplets and rewrite != "none"),
            **_decomposition(dataset, queries, results, rewrite),
        },
    }
    if chosen_variants:
        report["variants"] = list(chosen_variants)
    if per_query:
        report["query_ids"] = [q.id for q in queries]
        report["answer_query_ids"] = [q.id for q in queries if q.answers]
        report["per_query"] = figures_by_run
    return report


def _decomposition(
    dataset: str, queries: list[Query], results: list[Any], rewrite: str
) -> dict[str, Any]:
    """Issue 24's scores of the decompositions against the dataset's gold chains, beside
    the echo baselines on the same questions (issue 40; none when nothing was rewritten); a
    corpus on which nothing parsed says so."""
    if rewrite == "none" or not results:
        return {}
    from r2adapter.evaluate.decomposition import decomposition_scores

    out = decomposition_scores(dataset, [q.id for q in queries], results)
    if not any(r.rewritten_ok for r in results):
        out["note"] = "the rewriter parsed no question: every graph query ran on q"
    return out


def rewrite_summary(backend: str, results: list[Any], seed_triplets: bool) -> dict[str, Any]:
    """The "rewrite" block: backend, share parsed, fallbacks by reason, ms p50/p95."""
    ms = [r.ms for r in results]
    return {
        "backend": backend,
        "applies_to": "graph",
        "seed_triplets": seed_triplets,
        "parsed": sum(r.rewritten_ok for r in results) / len(results) if results else 0.0,
        "fallbacks": dict(Counter(r.fallback for r in results if r.fallback)),
        "ms_p50": percentile(ms, 50),
        "ms_p95": percentile(ms, 95),
    }
