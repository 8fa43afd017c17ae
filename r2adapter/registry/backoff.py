"""How long a registered version that failed to load waits before the next try: doubling
from `LOAD_BACKOFF_S` to `LOAD_BACKOFF_MAX_S` while the same version keeps failing, reset
when the alias moves to another version. A champion alias on a broken version was retried
on every poll (every 10 s), each try a full download (issue 44, item 1)."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

LOAD_BACKOFF_S = 60.0  # the first wait after a failed load (R2A_LOAD_BACKOFF_S)
LOAD_BACKOFF_MAX_S = 3600.0  # the longest (R2A_LOAD_BACKOFF_MAX_S)


@dataclass(frozen=True)
class Failure:
    version: str
    attempts: int
    retry_at: float  # time.monotonic()
    error: str


class LoadBackoff:
    """One failed version per key (a router family); thread-safe."""

    def __init__(self, first_s: float | None = None, max_s: float | None = None) -> None:
        env = os.environ.get
        self.first_s = (
            first_s if first_s is not None else float(env("R2A_LOAD_BACKOFF_S", LOAD_BACKOFF_S))
        )
        self.max_s = (
            max_s if max_s is not None else float(env("R2A_LOAD_BACKOFF_MAX_S", LOAD_BACKOFF_MAX_S))
        )
        self._failed: dict[str, Failure] = {}
        self._lock = threading.Lock()

    def wait_s(self, key: str, version: str) -> float:
        """Seconds before `version` may be tried again (0: now)."""
        with self._lock:
            f = self._failed.get(key)
        if f is None or f.version != version:
            return 0.0
        return max(0.0, f.retry_at - time.monotonic())

    def failed(self, key: str, version: str, error: str) -> float:
        """Record a failed load of `version`; the seconds until the next try."""
        with self._lock:
            f = self._failed.get(key)
            attempts = f.attempts + 1 if f is not None and f.version == version else 1
            wait = min(self.max_s, self.first_s * 2 ** (attempts - 1))
            self._failed[key] = Failure(version, attempts, time.monotonic() + wait, error)
        return wait

    def pop(self, key: str, default: None = None) -> Failure | None:
        with self._lock:
            return self._failed.pop(key, default)

    def report(self) -> dict[str, dict[str, object]]:
        """Each backed-off version: {key: {version, attempts, retry_in_s}} (/info)."""
        now = time.monotonic()
        with self._lock:
            return {
                k: {
                    "version": f.version,
                    "attempts": f.attempts,
                    "retry_in_s": round(max(0.0, f.retry_at - now), 1),
                }
                for k, f in self._failed.items()
            }
