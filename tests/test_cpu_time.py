"""CPU time as a strategy's cost (`kway.cost: cpu`, r2adapter/store/cpu_time.py): the meter
counts work, not waiting; a database backend's CPU time joins it where it can be read, and
its wall time stands in where it cannot; labelling pins the numeric pools to one thread."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from r2adapter.store.cpu_time import CpuMeter, backend_cpu_ns, metered_backend
from r2adapter.threads import thread_limit

SPIN_THEN_SLEEP = """
import time
end = time.process_time() + 0.3
print("ready", flush=True)
input()
while time.process_time() < end:
    pass
print("done", flush=True)
time.sleep(30)
"""


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


@pytest.mark.unit
def test_the_meter_counts_work_and_not_waiting() -> None:
    with CpuMeter() as busy:
        _spin(0.08)
    with CpuMeter() as idle:
        time.sleep(0.15)
    assert busy.ms >= 75.0 and busy.db_ms == 0.0
    assert idle.ms < 30.0  # 150 ms of wall clock, next to no CPU


@pytest.mark.unit
def test_another_process_cpu_joins_the_meter_and_an_unreadable_one_counts_its_wall() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", SPIN_THEN_SLEEP],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "ready"
        if backend_cpu_ns(child.pid) is None:
            pytest.skip("/proc/<pid>/schedstat is not readable on this kernel")
        with CpuMeter() as m, metered_backend(child.pid):
            child.stdin.write("\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "done"  # we wait; the child works
        assert m.db_ms >= 250.0 and not m.wall_db
        assert m.process_ns / 1e6 < m.db_ms  # our own share was the waiting
    finally:
        child.kill()
        child.wait()
    with CpuMeter() as gone, metered_backend(2**22 + 7):  # above pid_max: no such process
        time.sleep(0.05)
    assert gone.wall_db and gone.db_ms >= 45.0
    with metered_backend(child.pid):  # no meter active: nothing to count, no error
        pass


@pytest.mark.integration  # the embedded Postgres
def test_a_database_query_counts_the_backend_cpu(pg_env: dict[str, str]) -> None:
    from r2adapter.store.db import connection

    with CpuMeter() as m:
        with connection() as conn:
            conn.execute("SELECT count(*) FROM generate_series(1, 2000000)").fetchone()
    assert not m.wall_db
    assert m.db_ms > 20.0  # the server counted two million rows, not this process
    assert m.db_ms > m.process_ns / 1e6


@pytest.mark.unit
def test_one_thread_pins_the_pools_and_restores_them() -> None:
    import torch
    from threadpoolctl import threadpool_info

    before = torch.get_num_threads()
    with thread_limit(1):
        assert torch.get_num_threads() == 1
        assert all(pool["num_threads"] == 1 for pool in threadpool_info())
    assert torch.get_num_threads() == before
