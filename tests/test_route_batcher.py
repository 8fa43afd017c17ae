"""The service's in-process /route batcher: batches follow the load, up to `parallel` batches
run at once (one a core), and a failing batch fails only its own callers."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from serving.service import RouteBatcher

pytestmark = pytest.mark.unit  # no Postgres, no server (imports the service module only)


def test_batches_follow_the_load_and_run_in_parallel() -> None:
    sizes: list[int] = []
    active, peak = 0, 0
    lock = threading.Lock()

    def score(qs: list[str]) -> list[str]:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
            sizes.append(len(qs))
        time.sleep(0.05)
        with lock:
            active -= 1
        return [q.upper() for q in qs]

    async def main() -> list[str]:
        b = RouteBatcher(score, max_batch=4, parallel=2)
        return await asyncio.gather(*(b(f"q{i}") for i in range(20)))

    out = asyncio.run(main())
    assert out == [f"Q{i}" for i in range(20)]  # each caller gets its own answer
    assert sum(sizes) == 20 and max(sizes) <= 4
    assert len(sizes) < 20  # batched, not one call a query
    assert peak == 2  # two batches at once, never more


def test_one_at_a_time_when_parallel_is_one() -> None:
    peak, active = 0, 0

    def score(qs: list[str]) -> list[int]:
        nonlocal peak, active
        active += 1
        peak = max(peak, active)
        time.sleep(0.01)
        active -= 1
        return [len(q) for q in qs]

    async def main() -> list[int]:
        b = RouteBatcher(score, parallel=1)
        return await asyncio.gather(*(b("x" * i) for i in range(1, 9)))

    assert asyncio.run(main()) == list(range(1, 9)) and peak == 1


def test_a_failing_batch_fails_its_callers_and_the_batcher_recovers() -> None:
    calls = 0

    def score(qs: list[str]) -> list[str]:
        nonlocal calls
        calls += 1
        if "bad" in qs:
            raise ValueError("boom")
        return qs

    async def main() -> tuple[BaseException | str, str]:
        b = RouteBatcher(score, parallel=1)
        first = await asyncio.gather(b("bad"), return_exceptions=True)
        return first[0], await b("good")

    err, ok = asyncio.run(main())
    assert isinstance(err, ValueError) and ok == "good" and calls == 2
