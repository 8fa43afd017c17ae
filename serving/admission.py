"""Admission for the slow path: /answer waits on an LLM that serves one generation at a
time, so only a few requests may wait for it; the rest are told at once to come back
(503 with Retry-After) instead of holding a worker thread until they time out."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger("r2a.serving")


class Overloaded(Exception):
    """503 overload: the client should retry after Retry-After seconds."""


class Gate:
    def __init__(self, limit: int, what: str) -> None:
        self.limit = limit
        self.what = what
        self.inside = 0
        self._lock = threading.Lock()

    @contextmanager
    def admit(self) -> Iterator[None]:
        with self._lock:
            if self.inside >= self.limit:
                raise Overloaded(f"{self.what}: {self.inside} requests already waiting")
            self.inside += 1
        try:
            yield
        finally:
            with self._lock:
                self.inside -= 1


class _Refusals:
    """Refusals of one kind (overload: 429, 503 overload; a dependency down: 503) as at
    most one WARNING line every `every_s` seconds, saying how many there were since the
    last: under overload a line a refusal would be the log's main traffic (issue 27: 10,799
    lines in 60 s), and a database outage wrote one a request (issue 44: 536 in 40 s); each
    is counted in /metrics (`r2a_unavailable_total`) anyway."""

    def __init__(self, what: str = "overloaded", every_s: float = 10.0) -> None:
        self.what = what
        self.every_s = every_s
        self.count = 0
        self.last = -every_s
        self._lock = threading.Lock()

    def __call__(self, why: str) -> None:
        now = time.monotonic()
        with self._lock:
            self.count += 1
            if now - self.last < self.every_s:
                return
            n, self.count, self.last = self.count, 0, now
        log.warning("%s: %s; %d request(s) refused since the last such line", self.what, why, n)


refused = _Refusals()
dependency_down = _Refusals("dependency unavailable")
