"""The one per-query timer of the routing reports (`r2a evaluate routing`, with or without
`--protocol`; the two-way routers, the baselines, the k-way router and ADR's head).

Thread policy, the service's (serving/service.py `limit_model_threads`): a router is timed
one query at a time on R2A_MODEL_THREADS threads (default 1) — torch's intra-op pool and
every thread pool threadpoolctl sees (BLAS and OpenMP) — because the service routes
requests side by side, one model call a thread, so that is the latency a request sees.
The limit holds for the warm-up call too (lazy loads, an ONNX session created then takes
torch's thread count, as in the service) and is lifted afterwards (torch's count restored).
Each call is timed alone with `time.perf_counter`, in milliseconds; the warm-up (the first
query, once) is not counted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import numpy as np

T = TypeVar("T")


def model_threads() -> int:
    """R2A_MODEL_THREADS (default 1, at least 1): threads per model call."""
    return max(1, int(os.environ.get("R2A_MODEL_THREADS", "1")))


@contextmanager
def model_thread_limit(n: int | None = None) -> Iterator[int]:
    """torch's intra-op pool and threadpoolctl's pools held to `n` (R2A_MODEL_THREADS)."""
    import torch
    from threadpoolctl import threadpool_limits

    n = model_threads() if n is None else n
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(n):
            yield n
    finally:
        torch.set_num_threads(before)


def time_per_query(call: Callable[[int], T], n: int) -> tuple[list[T], np.ndarray]:
    """`call(i)` routes query i alone; each of the `n` calls timed under the thread policy,
    after one untimed warm-up `call(0)`. Returns the calls' results and their ms."""
    out: list[T] = []
    ms = np.zeros(n)
    if n == 0:
        return out, ms
    with model_thread_limit():
        call(0)  # warm-up (lazy loads)
        for i in range(n):
            t = time.perf_counter()
            r = call(i)
            ms[i] = (time.perf_counter() - t) * 1000
            out.append(r)
    return out, ms
