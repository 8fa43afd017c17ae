"""R²Adapter Algorithm 1: route → dense, or graph with rewriting when p_graph < ε →
optional answer. One object; every stage timed.

The service's (serving/state.py): its queries were checked at the HTTP door, the request
model (serving/requests.py `validate_body`, run by serving/middleware.py), and are not
checked again here or in the retrievers."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from r2adapter.adr.strategies import register as register_adr_strategies
from r2adapter.errors import R2AError
from r2adapter.index.encoder import Encoder
from r2adapter.llm.reader import answer_prompt, format_passages, passage_text
from r2adapter.retrieve.base import Hit, Retriever
from r2adapter.retrieve.strategies import STRATEGIES
from r2adapter.route.family import Champion, Route

register_adr_strategies()  # ADR's retrieval strategies are modes too
MODES = ("auto", *STRATEGIES)  # auto: the router decides between dense and graph


class RewriterLike(Protocol):
    def rewrite(self, query: str) -> Any: ...


@dataclass
class AdapterResult:
    query: str
    mode: str
    decision: str  # "dense" or "graph"
    p_dense: float | None
    p_graph: float | None
    rewritten: bool
    rewritten_query: str
    passages: list[Hit]
    timings_ms: dict[str, float] = field(default_factory=dict)
    answer: str | None = None
    rewrite_fallback: str | None = None
    strategy: str | None = None  # the k-way router's choice, when it routed
    k: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "k": self.k,
            "query": self.query,
            "mode": self.mode,
            "decision": self.decision,
            "p_dense": self.p_dense,
            "p_graph": self.p_graph,
            "rewritten": self.rewritten,
            "rewritten_query": self.rewritten_query,
            "rewrite_fallback": self.rewrite_fallback,
            "passages": [
                {"id": h.passage_id, "score": h.score, "title": h.title, "text": h.text}
                for h in self.passages
            ],
            "timings_ms": self.timings_ms,
            "answer": self.answer,
        }


class R2Adapter:
    def __init__(
        self,
        routing: Champion,
        dense: Retriever,
        graph: Retriever,
        encoder: Encoder,
        rewriter: RewriterLike | None = None,
        answerer: Callable[[str, list[Hit]], str] | None = None,
        others: dict[str, Retriever] | None = None,
    ) -> None:
        """`routing`: the champion that routes `auto` (a two-way router: τ and ε are its
        own, eqs. 4 and 7; or the k-way router over every strategy), through its family's
        `route` (r2adapter/route/family.py); `others`: retrievers of further strategies
        (STRATEGIES, e.g. catrag) a caller or a k-way strategy may name."""
        self.routing, self.dense, self.graph, self.encoder = routing, dense, graph, encoder
        self.rewriter, self.answerer = rewriter, answerer
        self.retrievers: dict[str, Retriever] = {"dense": dense, "graph": graph, **(others or {})}
        for name, s in STRATEGIES.items():  # a composite (fusion) from the retrievers held
            if s.compose is not None and name not in self.retrievers:
                if all(b in self.retrievers for b in s.bases):
                    self.retrievers[name] = s.compose(*(self.retrievers[b] for b in s.bases))

    def route(self, query: str) -> Route:
        """The champion's decision for one query; a router that reads the retrieval
        embedding gets it from the retrieval encoder, and retrieval reuses it."""
        return self.route_many([query])[0]

    def route_many(self, queries: list[str]) -> list[Route]:
        """One decision for a batch (the service's /route batches come through here)."""
        return self.routing.route(queries, encode=self.encoder.encode)

    def run(
        self,
        query: str,
        mode: str = "auto",
        k: int = 5,
        answer: bool = False,
        route: Route | None = None,
    ) -> AdapterResult:
        t: dict[str, float] = {}
        t0 = time.perf_counter()
        if mode == "auto":
            route = route or self.route(query)
        elif route is None:
            route = Route(mode, mode, None, False, side=mode)  # asked for: nothing routed
        t["route"] = (time.perf_counter() - t0) * 1000
        decision = route.mode if mode == "auto" else mode
        if mode == "auto" and route.k is not None:
            k = route.k  # the k-way router chose how many passages, too

        q_prime, rewritten, fallback = query, False, None
        t0 = time.perf_counter()
        # eq. 7: rewrite only what the router sent to graph with low confidence
        if mode == "auto" and route.rewrite and self.rewriter is not None:
            res = self.rewriter.rewrite(query)
            q_prime, rewritten, fallback = res.rewritten, bool(res.rewritten_ok), res.fallback
        t["rewrite"] = (time.perf_counter() - t0) * 1000

        t0 = time.perf_counter()
        # q′ is embedded for retrieval (Algorithm 1), except a structural rewrite's: its gain
        # is the triplets seeding the walk, and on 2Wiki's 860 questions q's embedding gives
        # the same graph R@5 (.874 vs .875, paired difference −.001 ± .004) 10 ms sooner
        structural = getattr(self.rewriter, "backend", "") == "structural"
        keep = q_prime == query or (rewritten and structural)
        qvec = route.qvec if (route.qvec is not None and keep) else None
        if qvec is None:
            qvec = self.encoder.encode_query(q_prime)
        retriever = self.retrievers.get(decision)
        if retriever is None:
            raise R2AError(f"mode {decision!r} has no retriever here: choose {', '.join(MODES)}")
        hits = retriever.retrieve(q_prime, k, qvec=qvec)
        t["retrieve"] = (time.perf_counter() - t0) * 1000

        text = None
        t0 = time.perf_counter()
        if answer and self.answerer is not None:
            text = self.answerer(query, hits)
        t["answer"] = (time.perf_counter() - t0) * 1000
        p_d = None if np.isnan(route.p_dense) else route.p_dense
        p_g = None if np.isnan(route.p_graph) else route.p_graph
        out = AdapterResult(
            query, mode, decision, p_d, p_g, rewritten, q_prime, hits, t, text, fallback
        )
        if mode == "auto" and route.k is not None:  # a family that chose the passages too
            out.strategy, out.k = route.strategy, route.k
        return out


def llm_answerer(
    llm: Any, max_tokens: int = 32, timeout: float = 30.0
) -> Callable[[str, list[Hit]], str]:
    def answer(question: str, hits: list[Hit]) -> str:
        msg = answer_prompt(
            question, format_passages([passage_text(h.title, h.text) for h in hits])
        )
        return str(
            llm.complete([{"role": "user", "content": msg}], max_tokens=max_tokens, timeout=timeout)
        ).strip()

    return answer
