"""The one thread limiter: how many threads a model call may use (R2A_MODEL_THREADS, default
1) and the two ways of holding the numeric libraries to it — for the whole process
(`limit_threads`: the service, before its models load) or for a block (`thread_limit`: the
per-query timer, r2adapter/evaluate/timing.py; the strategy labels' timed retrieval,
r2adapter/kway/labels.py), restored after.

Why one thread: requests run side by side on the service's threads, so a pool per call
only makes them fight over the cores (on 2 cores under 8 clients one thread each doubled
/route's throughput); and a pool of two threads on two shared cores spins while it waits
for its partner, CPU time that grows or shrinks with what else the machine runs (on one
thread a step's median CPU ms moved by at most 7 %, the same way for every step, quiet
against both cores busy; on the default pools the graph walk's grew 28 % and the
embedding's shrank 16 %: 2Wiki, 860 queries)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


def model_threads() -> int:
    """R2A_MODEL_THREADS (default 1, at least 1): threads per model call."""
    return max(1, int(os.environ.get("R2A_MODEL_THREADS", "1")))


def limit_threads(n: int | None = None) -> int:
    """Hold this process's torch intra-op pool (which ONNX sessions created after this take
    as theirs) and BLAS to `n` threads (default `model_threads()`), for good; returns `n`."""
    import torch
    from threadpoolctl import threadpool_limits

    n = model_threads() if n is None else n
    torch.set_num_threads(n)
    threadpool_limits(n, user_api="blas")
    return n


@contextmanager
def thread_limit(n: int | None = None) -> Iterator[int]:
    """The block runs torch's intra-op pool and every threadpoolctl pool (BLAS, OpenMP) on
    `n` threads (default `model_threads()`); an ONNX encoder created inside the block takes
    torch's count. Restored after."""
    import torch  # here, not inside the block: an encoder loaded there takes its count
    from threadpoolctl import threadpool_limits

    n = model_threads() if n is None else n
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(n):
            yield n
    finally:
        torch.set_num_threads(before)
