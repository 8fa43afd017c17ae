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
    """A query (/route) that arrives behind three queued lists of 4 (/route_batch) is scored
    next, in a batch of its own (not one that lists fill), and the lists after it."""
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
    assert batches[1] == ["single"]
    assert batches[2:] == [[f"l{j}-{i}" for i in range(4)] for j in (1, 2)]


def test_lists_take_the_free_lane_in_chunks_and_singles_wait_for_a_chunk_at_most() -> None:
    """With two lanes, lists are scored on both while no single query waits (issue 44, item
    10: on one lane, lists waited behind each other), whole batches on one and chunks of
    `bulk_chunk` on the other; a single query that arrives meanwhile is scored after at most
    a chunk, not a whole list (each listed query costs 25 ms: a batch of 4 takes 0.1 s)."""
    lanes: dict[str, int] = {"bulk": 0, "peak_bulk": 0}
    lock = threading.Lock()
    sizes: list[int] = []
    waited: list[float] = []

    def score(qs: list[str]) -> list[str]:
        is_list = qs[0].startswith("l")
        with lock:
            lanes["bulk"] += is_list
            lanes["peak_bulk"] = max(lanes["peak_bulk"], lanes["bulk"])
            if is_list:
                sizes.append(len(qs))
        time.sleep(0.025 * len(qs) if is_list else 0.001)
        with lock:
            lanes["bulk"] -= is_list
        return qs

    async def main(parallel: int) -> float:
        b = RouteBatcher(score, max_batch=4, parallel=parallel, bulk_chunk=1)
        t0 = time.perf_counter()
        lists = [asyncio.create_task(b.many([f"l{j}-{i}" for i in range(4)])) for j in range(4)]
        await asyncio.sleep(0.02)
        for _ in range(3):
            t1 = time.perf_counter()
            assert await b("single") == "single"
            waited.append(time.perf_counter() - t1)
            await asyncio.sleep(0.03)
        out = await asyncio.gather(*lists)
        assert out == [[f"l{j}-{i}" for i in range(4)] for j in range(4)]
        return time.perf_counter() - t0

    one_lane = asyncio.run(main(1))
    waited.clear()
    sizes.clear()
    two_lanes = asyncio.run(main(2))
    assert lanes["peak_bulk"] == 2  # both lanes scored lists
    # whole batches on one lane (a list's rest after a chunk is smaller), chunks on the other
    assert max(sizes) == 4 and 1 in sizes, sizes
    assert max(waited) < 0.08, waited  # at most a chunk (25 ms) and its own, never a list
    assert two_lanes < 0.8 * one_lane, (one_lane, two_lanes)  # 16 queries: 0.4 s on one lane
