"""The load and rewriter benchmarks without a service or a database: the load loop against
a mock transport (bounded in time and count, errors counted by kind), and both scripts'
one-line exit when Postgres is down."""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from benchmarks.bench_load import cycle, run_load

pytestmark = pytest.mark.unit  # no Postgres, no server

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


def _handler() -> httpx.MockTransport:
    n = itertools.count()

    async def handle(request: httpx.Request) -> httpx.Response:
        i = next(n)
        await asyncio.sleep(0.002)
        if i % 10 == 3:
            return httpx.Response(503, json={"error": "overloaded"})
        if i % 10 == 5:
            raise httpx.ConnectError("refused", request=request)
        if i % 10 == 7:
            return httpx.Response(200, json={"unexpected": True})
        return httpx.Response(200, json={"decision": "graph"})

    return httpx.MockTransport(handle)


def test_run_load_counts_errors_and_stops_on_time() -> None:
    t0 = time.monotonic()
    res = asyncio.run(
        run_load(
            "http://127.0.0.1:1",
            "/route",
            cycle([{"query": "q1"}, {"query": "q2"}]),
            clients=4,
            duration_s=0.5,
            max_requests=10_000,
            timeout_s=2,
            check=lambda b: "decision" in b,
            transport=_handler(),
        )
    )
    assert time.monotonic() - t0 < 3
    s = res.summary()
    assert s["ok"] > 10 and s["errors"] > 3
    assert {"status_503", "ConnectError", "bad_body"} <= set(s["errors_by_kind"])
    assert s["requests"] == s["ok"] + s["errors"]
    assert 0 < s["p50_ms"] <= s["p95_ms"] <= s["p99_ms"]
    assert s["throughput_rps"] > 0 and not s.get("stopped_early")


def test_run_load_stops_at_the_request_cap() -> None:
    res = asyncio.run(
        run_load(
            "http://127.0.0.1:1",
            "/route",
            cycle([{"query": "q"}]),
            clients=3,
            duration_s=30,
            max_requests=25,
            timeout_s=2,
            check=lambda b: True,
            transport=_handler(),
        )
    )
    assert res.summary()["requests"] == 25 and res.wall_s < 5


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow  # starts each script's whole stack in a subprocess: seconds each
@pytest.mark.timeout(60)
def test_load_and_rewriter_benches_exit_1_with_one_line_when_db_down() -> None:
    url = f"postgresql://postgres@127.0.0.1:{_closed_port()}/r2adapter"
    env = {**os.environ, "R2A_DATABASE_URL": url, "TQDM_DISABLE": "1"}
    procs = {
        script: subprocess.Popen(
            [sys.executable, str(BENCH / script), "--quick", "--dataset", "musique"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for script in ("bench_load.py", "bench_rewriter.py")
    }
    for script, proc in procs.items():
        _, err = proc.communicate(timeout=50)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert proc.returncode == 1, (script, err)
        assert len(lines) == 1 and lines[0].startswith("error: database unreachable"), err


def test_profile_top_frames_and_flame_graph(tmp_path: Path) -> None:
    from benchmarks.bench_load import flame, top_frames

    raw = tmp_path / "route.collapsed.txt"
    raw.write_text("main (s.py:1);encode (e.py:9) 30\nmain (s.py:1);json (j.py:2) 10\nbad line\n")
    top = top_frames(raw)
    assert [f["frame"] for f in top] == ["encode (e.py:9)", "json (j.py:2)"]
    assert top[0]["self"] == 0.75 and top[1]["inclusive"] == 0.25
    svg = tmp_path / "route.svg"
    flame(raw, svg)
    text = svg.read_text()
    assert text.startswith("<svg") and text.count("<rect") == 3  # main, encode, json
    assert "encode (e.py:9) (75.0%)" in text


def test_route_floor_adds_model_cpu_to_the_http_floor() -> None:
    from benchmarks.bench_load import route_floor

    cores = len(os.sched_getaffinity(0))
    f = route_floor({"throughput_rps": 500.0}, 8, {"encode": 3.0, "router": 1.0})
    http = cores * 1000 / 500
    assert f["http_cpu_ms"] == round(http, 2) and f["cpu_ms_per_request"] == round(http + 4, 2)
    assert f["p50_ms"] == round(8 * 1000 / (cores * 1000 / (http + 4)), 1)
    assert route_floor({"throughput_rps": 0}, 8, {}) == {}
