"""The query rewriter (R²Adapter §3.3): the query is decomposed into `[head, relation,
tail]` triplets, and q' = q + the triplets, one per line (eq. 6). Two backends write the
same triplets: `llm` (an LLM follows r2adapter/prompts/rewrite.md) and `structural`
(patterns and a dependency parse, no LLM: r2adapter/rewrite/structural.py). `structural`
is the default unless an LLM endpoint is configured (or an LLM is handed in);
R2A_REWRITE_BACKEND names one outright. A question `structural` cannot read falls back as
`unparsed`; it never waits on anything, so it has no timeout.

Whatever goes wrong, the caller gets a usable query: on a malformed reply, an LLM error,
or when the time budget runs out, `rewrite()` returns the query unchanged and names the
reason in `fallback`. The budget holds even if the LLM never returns: the call runs in a
daemon thread that is abandoned at the deadline (it is also given the remaining budget as
its own timeout, so a well-behaved client stops by then too).

Results are cached by query in a bounded LRU: rewrites and malformed replies (decoding is
greedy, so asking again gives the same reply), not timeouts or errors (they may pass).

An LLM that cannot be reached (connection refused after the client's retries, about 3 s of
backoff) is not asked again for `down_s` seconds (LLM_DOWN_S): rewrites fall back as `error`
at once meanwhile, with one WARNING line each time the LLM is found gone, so a dead endpoint
costs one query its retries, not every graph-bound query (bench_mixed: 3 s a /retrieve).
"""

from __future__ import annotations

import atexit
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from r2adapter.llm.base import LLM, LLMError, LLMUnreachable
from r2adapter.llm.prompts import load_prompts
from r2adapter.rewrite.parse import (
    MAX_TRIPLETS,
    MalformedRewrite,
    Triplet,
    parse_triplets,
    rewritten_query,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

FALLBACK_REASONS = ("malformed", "timeout", "error", "empty", "unparsed")
BACKENDS = ("structural", "llm")
PROMPT = "rewrite"  # r2adapter/prompts/rewrite.md
MAX_TOKENS = 128  # ~20 tokens a triplet; a reply that runs on is a loop
LLM_DOWN_S = 10.0  # an unreachable LLM is not asked again for this long


@dataclass(frozen=True)
class RewriteResult:
    query: str  # as given
    rewritten: str  # q' when rewritten_ok, else the query unchanged
    triplets: list[Triplet] = field(default_factory=list)
    rewritten_ok: bool = False
    fallback: str | None = None  # None when rewritten, else one of FALLBACK_REASONS
    ms: float = 0.0  # wall time of this call (a cache hit's is the lookup)
    cached: bool = False


def default_backend(llm: LLM | None = None) -> str:
    """R2A_REWRITE_BACKEND when set; else `llm` when an LLM is handed in or an endpoint is
    configured (R2A_LLM_BACKEND / R2A_LLM_BASE_URL), except the implicit local model, whose
    rewrites are slower than the 5 s budget and mostly malformed (issue 15); else
    `structural`."""
    import os

    from r2adapter.llm.base import LLMSettings

    named = os.environ.get("R2A_REWRITE_BACKEND", "").strip().lower()
    if named:
        if named not in BACKENDS:
            raise LLMError(
                f"R2A_REWRITE_BACKEND={named!r} is not a rewriter backend: choose "
                + " or ".join(BACKENDS)
            )
        return named
    cfg = LLMSettings.from_env()
    if cfg.backend or cfg.base_url:
        return "llm"
    from r2adapter.llm.local import LocalLLM

    if llm is not None and not isinstance(llm, LocalLLM):
        return "llm"
    return "structural"


def trigger_epsilon(backend: str, epsilon: float) -> float:
    """Eq. 7's ε for a rewriter backend: the router's own (the paper's 0.6) for `llm`, whose
    rewrite costs about a second; `router.structural_epsilon` for `structural`, whose
    rewrite costs 0.3 ms (1.0 by default: every graph-bound query, chosen by
    benchmarks/results/rewriter_epsilon_structural.json)."""
    if backend != "structural":
        return epsilon
    from r2adapter.config import router_params

    return router_params().structural_epsilon


class Rewriter:
    def __init__(
        self,
        llm: LLM | None = None,
        budget_s: float = 5.0,
        cache_size: int = 4096,
        *,
        max_tokens: int = MAX_TOKENS,
        max_triplets: int = MAX_TRIPLETS,
        backend: str | None = None,
        min_confidence: float | None = None,
        down_s: float = LLM_DOWN_S,
    ):
        """`backend`: "structural" or "llm"; None: `default_backend(llm)`.
        `llm=None` with the llm backend: the configured LLM, else the local model
        (`get_llm(default_local=True)`). `budget_s`: the most an LLM `rewrite()` call takes
        (plus thread hand-off), cache hits aside. `min_confidence` (structural; None:
        params.yaml rewrite.min_confidence): keep only triplets read at least this surely
        (structural.py CONF_*); a question left with none falls back as `unparsed`.
        """
        if budget_s <= 0:
            raise ValueError(f"budget_s must be positive, not {budget_s}")
        self.backend = backend or default_backend(llm)
        if self.backend not in BACKENDS:
            raise LLMError(f"unknown rewriter backend '{self.backend}': choose {BACKENDS}")
        if self.backend == "structural":
            llm = None  # never called: the structural backend needs no model
        elif llm is None:
            from r2adapter.llm import get_llm

            llm = get_llm(default_local=True)
            if llm is None:  # a backend named in R2A_LLM_BACKEND that is not configured
                raise LLMError("the rewriter needs an LLM and none is configured")
        self.llm: LLM | None = llm
        self.budget_s = budget_s
        if min_confidence is None:
            from r2adapter.config import rewrite_params

            min_confidence = rewrite_params().min_confidence
        self.min_confidence = float(min_confidence)
        self.cache_size = max(0, cache_size)
        self.max_tokens = max_tokens
        self.max_triplets = max_triplets
        self.prompts = load_prompts(PROMPT)
        # normalised query -> (triplets, fallback): a rewrite, or a "malformed" fallback
        self._cache: OrderedDict[str, tuple[list[Triplet], str | None]] = OrderedDict()
        self._lock = threading.Lock()  # guards the cache and the counters
        self._counts = {"calls": 0, "rewritten": 0, "cache_hits": 0, "llm_calls": 0}
        self._fallbacks = dict.fromkeys(FALLBACK_REASONS, 0)
        self.down_s = down_s
        self._down_until = 0.0  # time.monotonic() before which the LLM is not asked

    def warmup(self) -> None:
        """Load a local model (or the pattern table and spaCy parser) now, so the first
        rewrite's budget is not spent loading it."""
        if self.backend == "structural":
            from r2adapter.rewrite.structural import load_table, parser

            load_table()
            parser()
            return
        load = getattr(self.llm, "load", None)
        if callable(load):
            load()

    def rewrite(self, query: str) -> RewriteResult:
        t0 = time.perf_counter()
        key = " ".join(query.split())
        with self._lock:
            self._counts["calls"] += 1
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                self._counts["cache_hits"] += 1
                self._tally(hit[1])
        if hit is not None:
            triplets, fallback = hit
            if fallback is not None:
                return RewriteResult(query, query, [], False, fallback, _ms(t0), True)
            q2 = rewritten_query(query, triplets)
            return RewriteResult(query, q2, list(triplets), True, None, _ms(t0), True)
        if not key:
            return self._done(query, t0, "empty")
        if self.backend == "structural":
            return self._structural(query, key, t0)
        assert self.llm is not None
        llm = self.llm
        with self._lock:
            if time.monotonic() < self._down_until:  # found unreachable a moment ago
                self._tally("error")
                return RewriteResult(query, query, [], False, "error", _ms(t0))
            self._counts["llm_calls"] += 1
        messages = self.prompts.messages("rewrite", query=key)
        deadline = time.monotonic() + self.budget_s
        try:
            reply = _call_with_deadline(
                lambda: llm.complete(
                    messages,
                    max_tokens=self.max_tokens,
                    temperature=0.0,
                    timeout=max(deadline - time.monotonic(), 0.001),
                ),
                deadline,
            )
        except TimeoutError:
            return self._done(query, t0, "timeout")
        except LLMError as e:
            reason = "timeout" if time.monotonic() >= deadline or _is_timeout(e) else "error"
            log.debug("rewrite of %r failed: %s", key, e)
            if isinstance(e, LLMUnreachable):
                self._llm_gone(e)
            return self._done(query, t0, reason)
        except Exception as e:  # a client bug must not take the query down with it
            log.warning("rewrite of %r failed: %s: %s", key, type(e).__name__, e)
            return self._done(query, t0, "error")
        try:
            triplets = parse_triplets(reply, self.max_triplets, query=key)
        except MalformedRewrite as e:
            log.debug("rewrite of %r: malformed reply (%s): %r", key, e, reply[:300])
            self._remember(key, ([], "malformed"))
            return self._done(query, t0, "malformed")
        self._remember(key, (triplets, None))
        return self._done(query, t0, None, triplets)

    def _structural(self, query: str, key: str, t0: float) -> RewriteResult:
        from r2adapter.rewrite.structural import Unparsed, decompose_scored

        try:
            scored = decompose_scored(key)
            found = [t for t, _ in scored]
            # the LLM path's own check: the same rules, so both emit the same format
            triplets = parse_triplets(json.dumps([list(t) for t in found]), self.max_triplets, key)
        except (Unparsed, MalformedRewrite) as e:
            log.debug("rewrite of %r: unparsed (%s)", key, e)
            self._remember(key, ([], "unparsed"))
            return self._done(query, t0, "unparsed")
        if self.min_confidence > 0:  # rewrite.min_confidence: only what is likely right
            conf: dict[Triplet, float] = {}
            for t, c in scored:
                norm = (" ".join(t[0].split()), " ".join(t[1].split()), " ".join(t[2].split()))
                conf[norm] = max(c, conf.get(norm, 0.0))
            triplets = [t for t in triplets if conf.get(t, 1.0) >= self.min_confidence]
            if not triplets:
                self._remember(key, ([], "unparsed"))
                return self._done(query, t0, "unparsed")
        self._remember(key, (triplets, None))
        return self._done(query, t0, None, triplets)

    def stats(self) -> dict[str, Any]:
        """Counts since construction: calls, rewritten, cache_hits, llm_calls, fallbacks by
        reason (cache hits included), fallback_rate, and the cache's size."""
        with self._lock:
            calls = self._counts["calls"]
            fallbacks = dict(self._fallbacks)
            return {
                **self._counts,
                "fallbacks": fallbacks,
                "fallback_rate": sum(fallbacks.values()) / calls if calls else 0.0,
                "cache_size": len(self._cache),
            }

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    def _llm_gone(self, e: LLMError) -> None:
        """Stop asking an unreachable LLM for `down_s` seconds; one line each time."""
        with self._lock:
            opened = time.monotonic() >= self._down_until
            self._down_until = time.monotonic() + self.down_s
        if opened:
            log.warning("rewrites fall back for %.0f s: %s", self.down_s, e)

    def _done(
        self, query: str, t0: float, fallback: str | None, triplets: list[Triplet] | None = None
    ) -> RewriteResult:
        with self._lock:
            self._tally(fallback)
        if fallback is not None:
            return RewriteResult(query, query, [], False, fallback, _ms(t0))
        trips = list(triplets or [])  # a copy: the cache keeps its own
        return RewriteResult(query, rewritten_query(query, trips), trips, True, None, _ms(t0))

    def _tally(self, fallback: str | None) -> None:  # caller holds the lock
        if fallback is None:
            self._counts["rewritten"] += 1
        else:
            self._fallbacks[fallback] += 1

    def _remember(self, key: str, value: tuple[list[Triplet], str | None]) -> None:
        if self.cache_size == 0:
            return
        with self._lock:
            self._cache[key] = value
            self._cache.move_to_end(key)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)


_INFLIGHT: set[threading.Thread] = set()  # LLM calls running, abandoned ones included
_INFLIGHT_LOCK = threading.Lock()
EXIT_WAIT_S = 10.0  # at exit, how long to wait for them in all


def _call_with_deadline(fn: Callable[[], T], deadline: float) -> T:
    """`fn()` in a daemon thread; TimeoutError at `deadline` (time.monotonic()) if it has not
    returned, leaving the thread to finish or hang on its own without blocking exit."""
    fut: Future[T] = Future()

    def run() -> None:
        try:
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn())
                except BaseException as e:  # handed to the caller through the future
                    fut.set_exception(e)
        finally:
            with _INFLIGHT_LOCK:
                _INFLIGHT.discard(threading.current_thread())

    thread = threading.Thread(target=run, name="r2a-rewrite-llm", daemon=True)
    with _INFLIGHT_LOCK:
        _INFLIGHT.add(thread)
    thread.start()
    return fut.result(timeout=max(deadline - time.monotonic(), 0.0))


@atexit.register
def _wait_for_inflight() -> None:
    """Give abandoned LLM calls up to EXIT_WAIT_S to end before the interpreter goes down:
    a daemon thread still inside torch while it is torn down aborts the process ("terminate
    called without an active exception"). Each call was given the budget as its timeout,
    so a well-behaved client ends within a token or so of its deadline."""
    end = time.monotonic() + EXIT_WAIT_S
    with _INFLIGHT_LOCK:
        threads = list(_INFLIGHT)
    for t in threads:
        t.join(max(end - time.monotonic(), 0.0))


def _is_timeout(e: LLMError) -> bool:
    from r2adapter.llm.local import LLMTimeoutError

    return isinstance(e, LLMTimeoutError) or "timed out" in str(e)


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0
