"""The R²Adapter BentoML service: route, rewrite, retrieve, answer over HTTP.

    bentoml serve serving.service:R2AService --port 3000     (or `r2a serve --port 3000`)

Bodies are JSON with `query`, `mode` (auto|dense|graph) and `top_k` (1–100). Bad input is
a 422 with `{"error", "field"}`; a missing database, champion or index is a 503 with
`{"error"}`; /healthz stays up throughout. The router is `models:/r2a-router@champion`,
re-read every R2A_CHAMPION_POLL_S seconds (or on POST /reload) and swapped without downtime.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import typing as t
from collections.abc import Callable

import bentoml
from anyio import to_thread

from r2adapter.errors import DatabaseError, R2AError
from serving.requests import BadRequest, parse_request
from serving.state import ServingState, Unavailable

log = logging.getLogger("r2a.serving")
BATCHING = os.environ.get("R2A_ROUTER_BATCHING", "1") != "0"

ROUTES = bentoml.metrics.Counter(
    name="r2a_route_total", documentation="routing decisions", labelnames=["decision"]
)
RETRIEVALS = bentoml.metrics.Counter(
    name="r2a_retrieve_total",
    documentation="retrievals by mode and decision",
    labelnames=["mode", "decision"],
)
FALLBACKS = bentoml.metrics.Counter(
    name="r2a_rewrite_fallback_total",
    documentation="rewrites that fell back to the query",
    labelnames=["reason"],
)
REWRITES = bentoml.metrics.Counter(
    name="r2a_rewrite_total", documentation="rewrite attempts", labelnames=["outcome"]
)
GRAPH_USAGE = bentoml.metrics.Gauge(
    name="r2a_graph_usage_ratio", documentation="share of auto-routed queries sent to graph"
)


class RouteBatcher:
    """Adaptive batching for /route, in process: queries that arrive while a batch is being
    scored are scored together in the next one (at most `max_batch`), so the batch size
    follows the load and a lone request never waits on a timer."""

    def __init__(self, score: Callable[[list[str]], list[t.Any]], max_batch: int = 32) -> None:
        self.score = score
        self.max_batch = max_batch
        self._pending: list[tuple[str, asyncio.Future[t.Any]]] = []
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, query: str) -> t.Any:
        fut: asyncio.Future[t.Any] = asyncio.get_running_loop().create_future()
        self._pending.append((query, fut))
        if self._task is None:
            self._task = asyncio.create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch = self._pending[: self.max_batch]
                del self._pending[: self.max_batch]
                try:
                    out = await to_thread.run_sync(self.score, [q for q, _ in batch])
                except Exception as e:  # every caller of the batch gets the error
                    for _, f in batch:
                        if not f.done():
                            f.set_exception(e)
                    continue
                for (_, f), r in zip(batch, out, strict=True):
                    if not f.done():
                        f.set_result(r)
        finally:
            self._task = None


def _fail(ctx: bentoml.Context, status: int, body: dict[str, t.Any]) -> dict[str, t.Any]:
    ctx.response.status_code = status
    return body


@bentoml.service(
    traffic={"timeout": 60, "concurrency": 64},
    workers=1,
    threads=16,  # sync endpoints (retrieve, rewrite, answer) run on this many threads
    metrics={"enabled": True, "namespace": "r2a"},
)
class R2AService:
    def __init__(self) -> None:
        self.state = ServingState()
        self._auto = 0
        self._auto_graph = 0
        self._batcher = RouteBatcher(self._route_many)
        # load the local LLM in the background: the first rewrite should not pay for it
        threading.Thread(target=self._warm_rewriter, daemon=True).start()

    def _warm_rewriter(self) -> None:
        try:
            llm = self.state.llm()
            if llm is not None and hasattr(llm, "load"):
                llm.load()
        except Exception as e:  # rewriting then falls back; the service still serves
            log.warning("could not preload the LLM: %s", e)

    def __is_ready__(self) -> bool:
        return self.state.ready()

    # -- routing, with adaptive batching ---------------------------------------------------

    @bentoml.api(batchable=True, max_batch_size=32, max_latency_ms=1000)
    def route_batch(self, queries: list[str]) -> list[dict[str, t.Any]]:
        """Routing for clients that send lists (BentoML adaptive batching across clients)."""
        return self._route_many(queries)

    def _route_many(self, queries: list[str]) -> list[dict[str, t.Any]]:
        champion = self.state.router()
        router = champion.router
        if getattr(router, "uses_embedding", False):
            p_d, p_g = router.score(list(queries), self.state.encoder.encode(list(queries)))
        else:
            p_d, p_g = router.score(list(queries))
        eps = getattr(router, "epsilon", 0.6)
        out = []
        for d, g in zip(p_d, p_g, strict=True):
            graph = float(g) - float(d) > router.tau
            out.append(
                {
                    "decision": "graph" if graph else "dense",
                    "p_dense": float(d),
                    "p_graph": float(g),
                    "rewrite": bool(graph and g < eps),
                    "tau": router.tau,
                    "epsilon": eps,
                    "router_version": champion.version,
                }
            )
        return out

    def _count(self, decision: str) -> None:
        ROUTES.labels(decision=decision).inc()
        self._auto += 1
        self._auto_graph += decision == "graph"
        GRAPH_USAGE.set(self._auto_graph / self._auto)

    @bentoml.api(route="/route")
    async def route(
        self, ctx: bentoml.Context, query: t.Any = None, mode: t.Any = None, top_k: t.Any = None
    ) -> dict[str, t.Any]:
        try:
            req = parse_request(query, mode, top_k)
            if BATCHING:
                res = await self._batcher(req.query)
            else:
                res = (await to_thread.run_sync(self._route_many, [req.query]))[0]
        except BadRequest as e:
            return _fail(ctx, 422, e.body())
        except Unavailable as e:
            return _fail(ctx, 503, {"error": str(e)})
        except Exception as e:  # the batched call wraps errors from the batch endpoint
            return self._error(ctx, e)
        self._count(res["decision"])
        return {"query": req.query, **res}

    # -- rewrite, retrieve, answer ----------------------------------------------------------

    @bentoml.api(route="/rewrite")
    def rewrite(self, ctx: bentoml.Context, query: t.Any = None) -> dict[str, t.Any]:
        try:
            req = parse_request(query)
            r = self.state.rewriter().rewrite(req.query)
        except BadRequest as e:
            return _fail(ctx, 422, e.body())
        except Exception as e:
            return self._error(ctx, e)
        self._count_rewrite(r.fallback)
        return {
            "query": req.query,
            "rewritten": r.rewritten,
            "triplets": [list(x) for x in r.triplets],
            "ok": r.rewritten_ok,
            "fallback": r.fallback,
            "ms": r.ms,
        }

    def _count_rewrite(self, fallback: str | None) -> None:
        REWRITES.labels(outcome="fallback" if fallback else "ok").inc()
        if fallback:
            FALLBACKS.labels(reason=fallback).inc()

    def _run(
        self, ctx: bentoml.Context, query: t.Any, mode: t.Any, top_k: t.Any, answer: bool
    ) -> dict[str, t.Any]:
        try:
            req = parse_request(query, mode, top_k)
            if answer and self.state.llm() is None:
                raise Unavailable("no LLM configured for answers")
            res = self.state.adapter().run(req.query, req.mode, req.top_k, answer=answer)
        except BadRequest as e:
            return _fail(ctx, 422, e.body())
        except Exception as e:
            return self._error(ctx, e)
        if req.mode == "auto":
            self._count(res.decision)
            if res.decision == "graph" and res.p_graph is not None and res.rewritten_query:
                if res.rewritten or res.rewrite_fallback:
                    self._count_rewrite(res.rewrite_fallback)
        RETRIEVALS.labels(mode=req.mode, decision=res.decision).inc()
        return {**res.to_dict(), **self.state.info()}

    @bentoml.api(route="/retrieve")
    def retrieve(
        self, ctx: bentoml.Context, query: t.Any = None, mode: t.Any = None, top_k: t.Any = None
    ) -> dict[str, t.Any]:
        return self._run(ctx, query, mode, top_k, answer=False)

    @bentoml.api(route="/answer")
    def answer(
        self, ctx: bentoml.Context, query: t.Any = None, mode: t.Any = None, top_k: t.Any = None
    ) -> dict[str, t.Any]:
        return self._run(ctx, query, mode, top_k, answer=True)

    @bentoml.api(route="/reload")
    def reload(self) -> dict[str, t.Any]:
        """Re-read the champion alias now (the service also polls it)."""
        return self.state.reload()

    @bentoml.api(route="/info")
    def info(self) -> dict[str, t.Any]:
        return {**self.state.info(), "ready": self.state.ready()}

    def _error(self, ctx: bentoml.Context, e: Exception) -> dict[str, t.Any]:
        if isinstance(e, Unavailable | DatabaseError):
            return _fail(ctx, 503, {"error": str(e)})
        if isinstance(e, R2AError):
            msg = str(e)
            if "is not indexed" in msg or "unreachable" in msg:
                return _fail(ctx, 503, {"error": msg})
            return _fail(ctx, 422, {"error": msg})
        text = str(e)
        if "database" in text.lower() or "Unavailable" in type(e).__name__:
            return _fail(ctx, 503, {"error": text.splitlines()[0][:300]})
        log.exception("unexpected error")
        return _fail(ctx, 500, {"error": f"internal error: {type(e).__name__}"})
