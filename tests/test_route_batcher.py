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


def test_a_single_query_goes_ahead_of_queued_lists() -> None:
    """Lists (/route_batch) fill what room the single queries (/route) leave: a query that
    arrives behind three queued lists of 4 is scored in the next batch, not the fourth."""
    batches: list[list[str]] = []
    first_started = threading.Event()

    def score(qs: list[str]) -> list[str]:
        batches.append(list(qs))
        first_started.set()
        time.sleep(0.05)
        return qs

    async def main() -> tuple[list[list[str]], str]:
        b = RouteBatcher(score, max_batch=4, parallel=1)
        lists = [asyncio.create_task(b.many([f"l{j}-{i}" for i in range(4)])) for j in range(3)]
        while not first_started.is_set():  # the first list is being scored
            await asyncio.sleep(0.005)
        single = await b("single")
        return list(await asyncio.gather(*lists)), single

    out, single = asyncio.run(main())
    assert single == "single" and out == [[f"l{j}-{i}" for i in range(4)] for j in range(3)]
    assert batches[0] == [f"l0-{i}" for i in range(4)]
    assert batches[1][0] == "single" and len(batches[1]) == 4  # first, then room filled
    assert sum(map(len, batches)) == 13 and all(len(x) <= 4 for x in batches)
