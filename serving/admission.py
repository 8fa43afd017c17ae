"""Admission for the slow path: /answer waits on an LLM that serves one generation at a
time, so only a few requests may wait for it; the rest are told at once to come back
(503 with Retry-After) instead of holding a worker thread until they time out."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


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
