"""The R²Adapter BentoML service: route, rewrite, retrieve, answer over HTTP.

    bentoml serve serving.service:R2AService --port 3000     (or `r2a serve --port 3000`)

Bodies are JSON (`application/json` only) with `query` (1–2,000 characters), `mode`
(auto|dense|graph|catrag) and `top_k` (1–100); the types are in /docs.json. Every error is JSON
`{"error", "field"}` (serving/errors.py): bad input 422, a missing database, champion,
index or LLM 503 with Retry-After, overload 503/429 with Retry-After. Requests pass
serving/middleware.py first (API key, content type, body size, validation). /healthz
stays up throughout; /readyz says whether routing and retrieval can serve, /readyz/answer
whether /answer can. The router is `models:/r2a-router@champion`, re-read every
R2A_CHAMPION_POLL_S seconds (or on POST /reload) and swapped without downtime.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import math
import os
import threading
import typing as t
from collections.abc import Callable

import bentoml
from anyio import to_thread
from starlette.responses import JSONResponse

from r2adapter.adr import AdrUnavailable
from r2adapter.errors import DatabaseError, R2AError, ResourceError
from r2adapter.llm.base import LLMError
from r2adapter.route.family import Route
from r2adapter.store.db import known_down
from r2adapter.threads import limit_threads
from serving.admission import Gate, Overloaded, dependency_down, refused
from serving.connection import install_http_guards
from serving.cpus import usable_cpus
from serving.errors import error_response
from serving.launch import REQUEST_TIMEOUT_S
from serving.metric_labels import bound_metric_labels
from serving.middleware import Hardening
from serving.requests import (
    InfoOut,
    Mode,
    Query,
    RetrieveOut,
    RewriteOut,
    RouteOut,
    TopK,
)
from serving.state import ServingState, Unavailable
from serving.webhook import WebhookReceiver

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
    follows the load and a lone request never waits on a timer. Up to `parallel` batches run
    at once (one a core: each model session runs on R2A_MODEL_THREADS threads, 1 by
    default, so one batch at a time would leave the other cores idle).

    Two queues, two kinds of batch: single queries (/route, and /retrieve's routing) are
    scored in batches of their own, ahead of the lists (/route_batch), so a /route waits
    neither behind the lists of 32 queued before it nor in a batch that lists have filled
    (issue 27's throughput: under 16 mixed clients, 91% of the queries come in lists of 32).
    Lists take `parallel - 1` lanes in whole batches; the last lane, kept for single
    queries, scores lists too while none waits, `bulk_chunk` queries at a time, so a single
    query that arrives then waits for at most a chunk (issue 44, item 10: with the lists on
    one lane of two, a list of 32 took p50 8.0 s under 16 mixed clients)."""

    def __init__(
        self,
        score: Callable[[list[str]], list[t.Any]],
        max_batch: int = 32,
        parallel: int | None = None,
        bulk_chunk: int = 4,
    ) -> None:
        self.score = score
        self.max_batch = max_batch
        self.bulk_chunk = max(1, min(bulk_chunk, max_batch))
        self.parallel = parallel or usable_cpus()  # the pod's CPU limit, not the node's cores
        self._singles: list[tuple[str, asyncio.Future[t.Any]]] = []
        self._bulk: list[tuple[str, asyncio.Future[t.Any]]] = []
        self._running = 0
        self._bulk_running = 0
        self.bulk_lanes = max(1, self.parallel - 1)
        self._tasks: set[asyncio.Task[None]] = set()  # held: the loop keeps only weak refs

    def _pending(self) -> int:
        return len(self._singles) + len(self._bulk)

    def _start(self) -> None:
        self._running += 1
        task = asyncio.create_task(self._drain())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def __call__(self, query: str) -> t.Any:
        fut: asyncio.Future[t.Any] = asyncio.get_running_loop().create_future()
        self._singles.append((query, fut))
        if self._running < self.parallel:
            self._start()
        return await fut

    async def many(self, queries: list[str]) -> list[t.Any]:
        """A client's list, through the same batches as single queries (issue 27: BentoML's
        own batching of /route_batch refused 309 of 444 lists of 32 under load while /route
        served every request): queued together, so a list of up to `max_batch` is scored in
        one call when nothing waits before it."""
        loop = asyncio.get_running_loop()
        futs: list[asyncio.Future[t.Any]] = [loop.create_future() for _ in queries]
        self._bulk.extend(zip(queries, futs, strict=True))
        while self._running < self.parallel and self._running * self.max_batch < self._pending():
            self._start()
        return list(await asyncio.gather(*futs))

    def _next_batch(self) -> tuple[list[tuple[str, asyncio.Future[t.Any]]], bool]:
        """The next batch and whether it is of lists: single queries first; then lists, a
        whole batch while fewer than `bulk_lanes` lanes score lists, else (the lane kept
        for single queries) a chunk of `bulk_chunk`."""
        queue, bulk, size = self._singles, False, self.max_batch
        if not queue:
            queue, bulk = self._bulk, True
            if self._bulk_running >= self.bulk_lanes:
                size = self.bulk_chunk
        batch = queue[:size]
        del queue[:size]
        return batch, bulk

    async def _drain(self) -> None:
        try:
            while True:
                batch, bulk = self._next_batch()
                if not batch:
                    return
                self._bulk_running += bulk
                try:
                    out = await to_thread.run_sync(self.score, [q for q, _ in batch])
                except Exception as e:  # every caller of the batch gets the error
                    for _, f in batch:
                        if not f.done():
                            f.set_exception(e)
                    continue
                finally:
                    self._bulk_running -= bulk
                for (_, f), r in zip(batch, out, strict=True):
                    if not f.done():
                        f.set_result(r)
        finally:
            self._running -= 1


def route_out(r: Route) -> dict[str, t.Any]:
    """A family's Route as /route's answer: `decision` is the side (dense or graph) a
    two-way client reads, p_dense / p_graph the most confident score of each side; a family
    that chose the strategy and its passages (the k-way router) adds them, and every head's
    score."""
    out: dict[str, t.Any] = {
        "decision": r.side,
        "p_dense": r.p_dense,
        "p_graph": r.p_graph,
        "rewrite": r.rewrite,  # eq. 7, or a `+rw` strategy (graph+rw@5) rewrites first
        "tau": r.threshold,
        # eq. 7's ε; none where the chosen strategy says whether to rewrite
        "epsilon": 0.0 if math.isnan(r.epsilon) else r.epsilon,
        "router_version": r.version,
    }
    if r.k is not None:
        out.update(
            router=r.router,
            strategy=r.strategy,
            retriever=r.mode,
            k=r.k,
            fallback=r.fallback,
            scores=r.scores,
        )
    return out


def service_logging() -> None:
    """The service's own lines (`r2a.*`: champion swaps, the database back, webhook moves)
    in its log at INFO (R2A_LOG_LEVEL), through BentoML's handler: the `r2a` loggers took
    the root logger's WARNING, so a champion swap left no line (issue 44, item 9). The
    pool's reconnect warnings (multi-line, one per try) stay out: the breaker says it."""
    logging.getLogger("r2a").setLevel(os.environ.get("R2A_LOG_LEVEL", "INFO").upper())
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)


def error_for(e: BaseException) -> JSONResponse:
    """An endpoint's exception as the one error shape (input errors never get here: the
    middleware answers them before the endpoint runs)."""
    if isinstance(e, Overloaded):
        refused(str(e))  # a WARNING line now and then, not one a refusal
        return error_response(503, str(e), reason="overload")
    if isinstance(e, LLMError):
        text = str(e)
        if "timed out" in text or "busy" in text:
            return error_response(503, text, reason="upstream_timeout")
        dependency_down(f"LLM: {text}")  # may name the LLM's host: not for clients
        return error_response(503, "the answering LLM is unavailable", reason="dependency")
    if isinstance(e, DatabaseError):
        dependency_down(str(e))  # names the database's address: the log, not the client
        return error_response(503, "the database is unavailable: retry later", reason="dependency")
    if isinstance(e, Unavailable | AdrUnavailable):  # the message names what builds it
        return error_response(503, str(e), reason="dependency")
    if isinstance(e, ResourceError):  # the graph does not fit this server: not the client's
        return error_response(503, str(e), reason="resources")
    if isinstance(e, R2AError):
        msg = str(e)
        if "is not indexed" in msg or "unreachable" in msg:
            return error_response(503, msg, reason="dependency")
        return error_response(422, msg)
    log.exception("unexpected error")  # a bug: the traceback belongs in the log
    return error_response(500, f"internal error: {type(e).__name__}")


F = t.TypeVar("F", bound=Callable[..., t.Any])


def answers_errors(f: F) -> F:
    """Exceptions become JSON error responses; the signature (and so the OpenAPI document)
    stays the endpoint's own."""
    if inspect.iscoroutinefunction(f):

        @functools.wraps(f)
        async def run_async(*args: t.Any, **kwargs: t.Any) -> t.Any:
            try:
                return await f(*args, **kwargs)
            except Exception as e:
                return error_for(e)

        return t.cast(F, run_async)

    @functools.wraps(f)
    def run(*args: t.Any, **kwargs: t.Any) -> t.Any:
        try:
            return f(*args, **kwargs)
        except Exception as e:
            return error_for(e)

    return t.cast(F, run)


@bentoml.service(
    traffic={
        "timeout": REQUEST_TIMEOUT_S
    },  # the in-flight limit is the middleware's (429 + Retry-After)
    workers=1,
    threads=16,  # sync endpoints (retrieve, rewrite, answer) run on this many threads
    metrics={"enabled": True, "namespace": "r2a"},
)
class R2AService:
    def __init__(self) -> None:
        service_logging()
        self.model_threads = limit_threads()  # before the models load
        self.state = ServingState()
        self._auto = 0
        self._auto_graph = 0
        self._batcher = RouteBatcher(self._route_many)
        # /answer: one generation at a time, so only a few may wait (R2A_ANSWER_QUEUE)
        self._answers = Gate(int(os.environ.get("R2A_ANSWER_QUEUE", "4")), "answer queue full")
        # load the local LLM in the background: the first rewrite should not pay for it
        threading.Thread(target=self.state.warm_llm, daemon=True).start()

    def __is_ready__(self) -> bool:
        return self.state.ready()

    # -- routing, with adaptive batching ---------------------------------------------------

    @bentoml.api(route="/route_batch")
    @answers_errors
    async def route_batch(self, queries: list[Query]) -> list[RouteOut]:
        """Routing for clients that send lists (1–64 queries): the same in-process batches
        as /route, so a list is served under the load /route is."""
        if BATCHING:
            res = await self._batcher.many(list(queries))
        else:
            res = await to_thread.run_sync(self._route_many, list(queries))
        for r in res:
            self._count(r["decision"])
        return [
            RouteOut.model_validate({"query": q, **r}) for q, r in zip(queries, res, strict=True)
        ]

    def _route_many(self, queries: list[str]) -> list[dict[str, t.Any]]:
        # no circuit-breaker check here: a two-way router decides in memory and keeps
        # answering with the database down; a router that does reach it (the k-way index
        # check) fails into @answers_errors' 503 with Retry-After
        routing = self.state.routing()  # the k-way champion when loaded, else the two-way
        return [route_out(r) for r in routing.route(queries, encode=self.state.encoder.encode)]

    def _count(self, decision: str) -> None:
        ROUTES.labels(decision=decision).inc()
        self._auto += 1
        self._auto_graph += decision == "graph"
        GRAPH_USAGE.set(self._auto_graph / self._auto)

    @bentoml.api(route="/route")
    @answers_errors
    async def route(self, query: Query, mode: Mode = "auto", top_k: TopK = 5) -> RouteOut:
        """The routing decision for one query (`mode` and `top_k` are accepted and ignored)."""
        if BATCHING:
            res = await self._batcher(query)
        else:
            res = (await to_thread.run_sync(self._route_many, [query]))[0]
        self._count(res["decision"])
        return RouteOut.model_validate({"query": query, **res})

    # -- rewrite, retrieve, answer ----------------------------------------------------------

    @bentoml.api(route="/rewrite")
    @answers_errors
    def rewrite(self, query: Query) -> RewriteOut:
        r = self.state.rewriter().rewrite(query)
        self._count_rewrite(r.fallback)
        return RewriteOut(
            query=query,
            rewritten=r.rewritten,
            triplets=[list(x) for x in r.triplets],
            ok=r.rewritten_ok,
            fallback=r.fallback,
            ms=r.ms,
        )

    def _count_rewrite(self, fallback: str | None) -> None:
        REWRITES.labels(outcome="fallback" if fallback else "ok").inc()
        if fallback:
            FALLBACKS.labels(reason=fallback).inc()

    def _run(self, query: str, mode: str, top_k: int, answer: bool) -> RetrieveOut:
        # the body was validated and normalised at the door (serving/middleware.py, with
        # serving/requests.py `validate_body`): nothing below checks the query again
        if known_down():  # fail in microseconds, before the query is encoded
            raise DatabaseError("the database is down (circuit breaker open)")
        res = self.state.adapter().run(query, mode, top_k, answer=answer)
        if mode == "auto":
            self._count(res.decision)
            if res.decision == "graph" and res.p_graph is not None and res.rewritten_query:
                if res.rewritten or res.rewrite_fallback:
                    self._count_rewrite(res.rewrite_fallback)
        RETRIEVALS.labels(mode=mode, decision=res.decision).inc()
        return RetrieveOut.model_validate({**res.to_dict(), **self.state.info()})

    @bentoml.api(route="/retrieve")
    @answers_errors
    def retrieve(self, query: Query, mode: Mode = "auto", top_k: TopK = 5) -> RetrieveOut:
        """Route (in auto mode), rewrite when the rule says so, retrieve `top_k` passages."""
        return self._run(query, mode, top_k, answer=False)

    @bentoml.api(route="/answer")
    @answers_errors
    def answer(self, query: Query, mode: Mode = "auto", top_k: TopK = 5) -> RetrieveOut:
        """/retrieve plus a short answer from the LLM. 503 with Retry-After while the LLM is
        loading, when R2A_ANSWER_QUEUE requests already wait for it, or when it times out."""
        ready, why = self.state.answer_ready()
        if not ready:
            raise Unavailable(why)
        with self._answers.admit():
            return self._run(query, mode, top_k, answer=True)

    @bentoml.api(route="/reload")
    @answers_errors
    def reload(self) -> InfoOut:
        """Re-read the champion alias now (the service also polls it). Needs the API key
        when R2A_API_KEY is set. 503 with Retry-After while the registry does not answer
        (or is slower than R2A_RELOAD_WAIT_S); the champion in memory serves meanwhile."""
        self.state.reload_now()
        return self._info()

    @bentoml.api(route="/info")
    @answers_errors
    def info(self) -> InfoOut:
        return self._info()

    def _info(self) -> InfoOut:
        ready, _ = self.state.answer_ready()
        return InfoOut.model_validate(
            {**self.state.info(), "ready": self.state.ready(), "answer_ready": ready}
        )


# the decorator made R2AService a bentoml Service; its stub still says the class
# the registry's signed webhook first (serving/webhook.py): it authenticates by HMAC, not key
t.cast(t.Any, R2AService).add_asgi_middleware(WebhookReceiver)
t.cast(t.Any, R2AService).add_asgi_middleware(Hardening)
bound_metric_labels()  # BentoML's request metrics by route, not raw path (issue 27, item 5)
install_http_guards()  # the HTTP/1.1 edges and the drain (issue 27 item 1, issue 44 items 11-12)
# each `r2a serve` keeps its metrics in a folder of its own: serving/launch.py (issue 27 item 7)
