"""The load harness without a service or a database, run as a module (no test imports a
benchmark): benchmarks/lib/loadgen.py against a small local HTTP server (bounded in time and
count, errors counted by kind), its flame graph and /route floor. bench_load's one-line exit
when Postgres is down is in test_benchmarks_smoke.py."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.unit  # no Postgres, no service: a local stub server

ROOT = Path(__file__).resolve().parents[1]


class _Stub(BaseHTTPRequestHandler):
    """Answers POSTs in a cycle of ten: a 503, a dropped connection, a 200 without the
    expected field, and otherwise 200 {"decision": "graph"}; 2 ms each."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the service
    disable_nagle_algorithm = True  # headers and body leave at once, no 40 ms stall
    counter = itertools.count()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        i = next(self.counter)
        time.sleep(0.002)
        if i % 10 == 5:  # no response at all: the client sees the connection drop
            self.close_connection = True
            return
        status, body = 200, {"decision": "graph"}
        if i % 10 == 3:
            status, body = 503, {"error": "overloaded"}
        elif i % 10 == 7:
            body = {"unexpected": True}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:  # quiet
        pass


@pytest.fixture
def stub_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _loadgen(*args: str, timeout: float = 60) -> Any:
    """`benchmarks/lib/loadgen.py` run as a module: the JSON it prints last."""
    r = subprocess.run(
        [sys.executable, "-m", "benchmarks.lib.loadgen", *args],
        cwd=ROOT,
        env={**os.environ, "TQDM_DISABLE": "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(60)
def test_load_counts_errors_and_stops_on_time(stub_url: str) -> None:
    s = _loadgen(
        "load", stub_url, "/route", "--body", '{"query": "q1"}', "--body", '{"query": "q2"}',
        "--check", "decision", "--clients", "4", "--duration", "0.5", "--timeout", "2",
    )  # fmt: skip
    assert s["wall_s"] < 3 and s["clients"] == 4
    assert s["ok"] > 10 and s["errors"] > 3
    kinds = set(s["errors_by_kind"])
    assert {"status_503", "bad_body"} <= kinds
    assert kinds - {"status_503", "bad_body"}, kinds  # the dropped connection, by its exception
    assert s["requests"] == s["ok"] + s["errors"]
    assert 0 < s["p50_ms"] <= s["p95_ms"] <= s["p99_ms"]
    assert s["throughput_rps"] > 0 and not s.get("stopped_early")
    assert len(s["loadavg_before"]) == len(s["loadavg_after"]) == 3


@pytest.mark.timeout(60)
def test_load_stops_at_the_request_cap(stub_url: str) -> None:
    s = _loadgen(
        "load", stub_url, "/route", "--body", '{"query": "q"}', "--clients", "3",
        "--duration", "30", "--max-requests", "25", "--timeout", "2",
    )  # fmt: skip
    assert s["requests"] == 25 and s["wall_s"] < 5
    assert "bad_body" not in s["errors_by_kind"]  # no --check: any 200 body is an answer


def test_profile_top_frames_and_flame_graph(tmp_path: Path) -> None:
    raw = tmp_path / "route.collapsed.txt"
    raw.write_text("main (s.py:1);encode (e.py:9) 30\nmain (s.py:1);json (j.py:2) 10\nbad line\n")
    svg = tmp_path / "route.svg"
    top = _loadgen("flame", str(raw), str(svg))
    assert [f["frame"] for f in top] == ["encode (e.py:9)", "json (j.py:2)"]
    assert top[0]["self"] == 0.75 and top[1]["inclusive"] == 0.25
    text = svg.read_text()
    assert text.startswith("<svg") and text.count("<rect") == 3  # main, encode, json
    assert "encode (e.py:9) (75.0%)" in text


def test_route_floor_adds_model_cpu_to_the_http_floor() -> None:
    cores = len(os.sched_getaffinity(0))
    args = ["floor", "--healthz-rps", "500", "--clients", "8"]
    f = _loadgen(*args, "--model-ms", "encode=3", "--model-ms", "router=1")
    http = cores * 1000 / 500
    assert f["cores"] == cores and f["model_cpu_ms"] == {"encode": 3.0, "router": 1.0}
    assert f["http_cpu_ms"] == round(http, 2) and f["cpu_ms_per_request"] == round(http + 4, 2)
    assert f["p50_ms"] == round(8 * 1000 / (cores * 1000 / (http + 4)), 1)
    assert _loadgen("floor", "--healthz-rps", "0", "--clients", "8") == {}
