"""`r2a evaluate retrieval`: every retrieval strategy (dense, graph, catrag; or a subset)
on a dataset's complete-gold queries; with `rewrite`, the graph strategies run on q′ for
every query the rewriter parses (issue 15). Graph strategies also report where their PPR
mass sits (hub mass, PPR-weighted strength: CatRAG §6)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tqdm import tqdm

from r2adapter.config import graph_params
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
) -> RankedRun:
    """`rewrite`: a callable query → RewriteResult; its q′ is retrieved instead, and its
    time counts in the latency (a caller waits for it). `own_embedding`: q′ is retrieved
    on q's embedding, as the adapter serves a structural rewrite (its triplets seed the
    walk; r2adapter/adapter.py), and as the k-way labels time graph+rw."""
    enc = get_encoder()
    ranked, latency, context = {}, {}, {}
    for q in tqdm(queries, desc=desc or f"retrieve {retriever.mode}", unit="query"):
        t = time.perf_counter()  # includes encoding the query: what a caller waits for
        text = rewrite(q.question).rewritten if rewrite is not None else q.question
        vec = enc.encode_query(q.question if own_embedding else text)
        hits = retriever.retrieve(text, depth, qvec=vec)
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


def evaluate_retrieval(
    dataset: str,
    rewrite: str = "none",
    seed_triplets: bool = True,
    modes: Sequence[str] | None = None,
    ablate: Sequence[str] = (),
    ppr: str | None = None,
) -> dict[str, object]:
    """`rewrite`: none, or the rewriter backend whose q′ the graph strategies run on (dense
    keeps the query: Algorithm 1 rewrites for the graph); `seed_triplets`: q′'s triplets
    also seed PPR (GraphRetriever's option); `modes`: a subset of the strategies (all when
    None); `ablate`: catrag components turned off (catrag.ABLATIONS); `ppr`: local or
    exact forces the graph strategies' PPR solver (None: graph.ppr_solver)."""
    if ppr not in (None, "local", "exact"):
        raise R2AError(f"ppr must be local or exact, not {ppr!r}")
    params = replace(graph_params(), ppr_solver=ppr) if ppr else None
    from r2adapter.retrieve.catrag import check_ablations

    if rewrite not in REWRITE_CHOICES:
        raise ValueError(f"rewrite must be one of {REWRITE_CHOICES}, not {rewrite!r}")
    chosen = check_strategies(modes)
    ablations = check_ablations(ablate)
    if ablations and "catrag" not in chosen:
        raise R2AError("--ablate turns catrag components off: include catrag in --mode")
    version = require_version(dataset)
    queries = stored_queries(dataset)
    rewriter = None
    if rewrite != "none":
        from r2adapter.rewrite import Rewriter

        rewriter = Rewriter(backend=rewrite)
        rewriter.warmup()  # a model or parser load is not a rewrite's time
    results: list[Any] = []
    first_graph = next((m for m in chosen if m in GRAPH_STRATEGIES), None)

    def rewrite_one(question: str, record: bool) -> Any:
        res = rewriter.rewrite(question)  # type: ignore[union-attr]
        if record:  # the rewrite block counts each question once
            results.append(res)
        return res

    out: dict[str, dict[str, Any]] = {}
    for mode in chosen:
        graph_like = mode in GRAPH_STRATEGIES
        options: dict[str, Any] = {"seed_triplets": seed_triplets} if graph_like else {}
        if graph_like and params is not None:
            options["params"] = params
        if mode == "catrag":
            options["ablate"] = ablations
        retriever = make_retriever(mode, dataset, **options)
        structure = Structure()
        if graph_like:
            retriever.observe = structure  # type: ignore[attr-defined]
        if hasattr(retriever, "warmup"):
            retriever.warmup()  # spaCy and per-index maps load once, not in a query's time
        rw = None
        if rewriter is not None and graph_like:
            record = mode == first_graph

            def rw(question: str, record: bool = record) -> Any:
                return rewrite_one(question, record)

        own = rw is not None and rewrite == "structural"  # as served (adapter.py)
        run = run_retriever(retriever, queries, DEPTH, rewrite=rw, own_embedding=own)
        m: dict[str, Any] = summarize(run, queries)
        if graph_like:
            m["fallbacks"] = retriever.fallbacks  # type: ignore[attr-defined]
            m.update(structure.summary())
            # the LLM steps' counts (fact filter, tier judge): calls, fallbacks by reason
            m.update(retriever.stats())  # type: ignore[attr-defined]
        if mode == "catrag":  # graph.catrag_ablate and --ablate
            m["ablate"] = list(retriever.ablate)  # type: ignore[attr-defined]
        out[mode] = m
    p = params or graph_params()
    return {
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


def _decomposition(
    dataset: str, queries: list[Query], results: list[Any], rewrite: str
) -> dict[str, Any]:
    """Issue 24's scores of the decompositions against the dataset's gold chains (none
    when nothing was rewritten); a corpus on which nothing parsed says so."""
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
