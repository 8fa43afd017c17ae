"""The one per-query timer (r2adapter/evaluate/timing.py): its thread policy holds during
the calls and the warm-up, is lifted after, and the warm-up is not counted."""

from __future__ import annotations

import time

import numpy as np
import pytest

from r2adapter.evaluate.timing import time_per_query
from r2adapter.threads import model_threads

pytestmark = pytest.mark.unit


def test_one_timed_call_per_query_after_an_untimed_warm_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch
    from threadpoolctl import threadpool_info

    monkeypatch.setenv("R2A_MODEL_THREADS", "1")
    before = torch.get_num_threads()
    seen: list[tuple[int, int]] = []

    def call(i: int) -> int:
        if not seen:  # the warm-up: slow, and not counted
            time.sleep(0.05)
        blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
        seen.append((torch.get_num_threads(), max(blas, default=1)))
        return i * 10

    out, ms = time_per_query(call, 4)
    assert out == [0, 10, 20, 30] and ms.shape == (4,)
    assert len(seen) == 5  # one warm-up + one call a query
    assert all(t == (1, 1) for t in seen)  # torch and BLAS on R2A_MODEL_THREADS
    assert float(np.max(ms)) < 40  # the 50 ms warm-up is not in any query's figure
    assert torch.get_num_threads() == before  # lifted afterwards
    assert time_per_query(call, 0)[1].shape == (0,)


def test_thread_count_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("R2A_MODEL_THREADS", "3")
    assert model_threads() == 3
    monkeypatch.setenv("R2A_MODEL_THREADS", "0")
    assert model_threads() == 1
    monkeypatch.delenv("R2A_MODEL_THREADS")
    assert model_threads() == 1
