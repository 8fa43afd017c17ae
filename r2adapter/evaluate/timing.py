"""The one per-query timer of the routing reports (`r2a evaluate routing`, with or without
`--protocol`; the two-way routers, the baselines, the k-way router and ADR's head).

Thread policy, the service's (r2adapter/threads.py, which the service holds too): a router is timed
one query at a time on R2A_MODEL_THREADS threads (default 1) — torch's intra-op pool and
every thread pool threadpoolctl sees (BLAS and OpenMP) — because the service routes
requests side by side, one model call a thread, so that is the latency a request sees.
The limit holds for the warm-up call too (lazy loads, an ONNX session created then takes
torch's thread count, as in the service) and is lifted afterwards (torch's count restored).
Each call is timed alone with `time.perf_counter`, in milliseconds; the warm-up (the first
query, once) is not counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from r2adapter.threads import thread_limit

T = TypeVar("T")


def time_per_query(call: Callable[[int], T], n: int) -> tuple[list[T], np.ndarray]:
    """`call(i)` routes query i alone; each of the `n` calls timed under the thread policy,
    after one untimed warm-up `call(0)`. Returns the calls' results and their ms."""
    out: list[T] = []
    ms = np.zeros(n)
    if n == 0:
        return out, ms
    with thread_limit():
        call(0)  # warm-up (lazy loads)
        for i in range(n):
            t = time.perf_counter()
            r = call(i)
            ms[i] = (time.perf_counter() - t) * 1000
            out.append(r)
    return out, ms
