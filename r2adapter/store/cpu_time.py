"""The CPU time a piece of work costs: this process's and the database server's.

A wall clock counts the time a query waits for a core as part of its cost. With the cores
shared, every strategy's milliseconds grow, and not in proportion: a Postgres round trip
waits differently from a CPU-bound graph walk. So a router labelled under load prices the
strategies differently (docs/routing.md, "Costs under load"). CPU time counts the work
only:
- this process's, every thread (`time.process_time_ns`);
- for each database connection taken inside the measurement, the server backend's on-CPU
  time (`/proc/<pid>/schedstat`), readable where the database runs on this host, as the
  embedded one does.

Where a backend's time cannot be read (a remote database), the connection's wall time
stands in, and the meter says so (`CpuMeter.wall_db`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import TracebackType

_active: ContextVar[CpuMeter | None] = ContextVar("r2a_cpu_meter", default=None)


def backend_cpu_ns(pid: int) -> int | None:
    """Nanoseconds process `pid` has run on a CPU (None: not readable from here)."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class CpuMeter:
    """`with CpuMeter() as m: ...` then `m.ms`: the block's CPU milliseconds, this process's
    plus those of the database backends it used (`db_ms` of them)."""

    def __init__(self) -> None:
        self.process_ns = 0
        self.db_ns = 0
        self.wall_db = False  # a backend's CPU time was unreadable: its wall time stood in
        self._t0 = 0
        self._token: object | None = None

    @property
    def ms(self) -> float:
        return (self.process_ns + self.db_ns) / 1e6

    @property
    def db_ms(self) -> float:
        return self.db_ns / 1e6

    def __enter__(self) -> CpuMeter:
        self._token = _active.set(self)
        self._t0 = time.process_time_ns()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.process_ns += time.process_time_ns() - self._t0
        _active.reset(self._token)  # type: ignore[arg-type]


@contextmanager
def metered_backend(pid: int | None) -> Iterator[None]:
    """Around one database connection's use: adds the backend's CPU time (or, unreadable,
    the block's wall time) to the active meter; nothing when no meter is active."""
    meter = _active.get()
    if meter is None or pid is None:
        yield
        return
    before, t = backend_cpu_ns(pid), time.perf_counter_ns()
    try:
        yield
    finally:
        after = backend_cpu_ns(pid)
        if before is None or after is None:
            meter.wall_db = True
            meter.db_ns += time.perf_counter_ns() - t
        else:
            meter.db_ns += after - before
