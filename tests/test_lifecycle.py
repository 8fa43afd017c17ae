"""Issue 44, items 11 and 12: the server's process lifecycle and its HTTP/1.1 edges, against
a real `bentoml serve` (run by serving/launch.py, as `r2a serve` runs it) of a small service
with the production connection (tests/services/slow.py): a taken port is one line and
removes no live server's metrics; a stopping server refuses new connections at once while
the requests in flight finish; a malformed head is a 400 in the JSON shape; a request with
both Content-Length and Transfer-Encoding gets its connection closed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import typing as t
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from serving.launch import FOLDER, instance_metrics_dir
from tests.conftest import ROOT, _free_port

LAUNCH = [sys.executable, "-m", "serving.launch", "serve"]


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "BENTOML_HOME": str(home), "BENTOML_DO_NOT_TRACK": "true"}


@pytest.fixture
def orphan(tmp_path: Path) -> Iterator[dict[str, t.Any]]:
    """What a kill -9 of a server's arbiter leaves: a process holding the port, whose
    metrics folder is named after the dead arbiter and is in its environment."""
    folder = tmp_path / "bento" / FOLDER / "999999999"
    folder.mkdir(parents=True)
    (folder / "counter_1.db").write_bytes(b"x")
    port = _free_port()
    code = (
        "import socket, time\n"
        "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"s.bind(('127.0.0.1', {port})); s.listen(); print('up', flush=True); time.sleep(300)\n"
    )
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder)}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"up"
    yield {"port": port, "folder": folder, "home": tmp_path / "bento"}
    proc.kill()
    proc.wait()


@pytest.mark.unit
def test_a_taken_port_is_one_line_and_the_orphans_metrics_stay(
    orphan: dict[str, t.Any],
) -> None:
    argv = ["serving.service:R2AService", "--port", str(orphan["port"]), "--host", "127.0.0.1"]
    t0 = time.monotonic()
    r = subprocess.run(
        [*LAUNCH, *argv],
        env=_env(orphan["home"]),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 1 and time.monotonic() - t0 < 30, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"port {orphan['port']}" in lines[0], r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    assert (orphan["folder"] / "counter_1.db").exists()


@pytest.mark.unit
def test_a_folder_in_a_live_process_environment_stays(orphan: dict[str, t.Any]) -> None:
    """A dead arbiter's folder stays while a process (its orphaned worker) names it."""
    own = instance_metrics_dir(orphan["home"], os.getpid())
    assert own.is_dir() and (orphan["folder"] / "counter_1.db").exists()


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, t.Any]]:
    home = tmp_path_factory.mktemp("bento")
    port = _free_port()
    log = (home / "serve.log").open("w")
    argv = ["tests.services.slow:Slow", "--port", str(port), "--host", "127.0.0.1"]
    proc = subprocess.Popen(
        [*LAUNCH, *argv], env=_env(home), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, (home / "serve.log").read_text()[-3000:]
        time.sleep(0.5)
    else:
        raise AssertionError((home / "serve.log").read_text()[-3000:])
    yield {"url": url, "port": port, "proc": proc, "log": home / "serve.log"}
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    log.close()


def _raw(port: int, request: bytes, wait_s: float = 5.0) -> tuple[bytes, bool]:
    """Send `request` on a new connection; what came back and whether the server closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as s:
        s.sendall(request)
        data, closed = b"", False
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            except ConnectionResetError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            data += chunk
            if b"\r\n\r\n" in data:
                head, _, body = data.partition(b"\r\n\r\n")
                length = [
                    ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")
                ]
                if length and len(body) >= int(length[0].split(b":")[1]):
                    s.settimeout(1.5)  # complete: does the server close now?
        return data, closed


def _body(data: bytes) -> dict[str, t.Any]:
    return t.cast(dict[str, t.Any], json.loads(data.partition(b"\r\n\r\n")[2]))


@pytest.mark.integration
def test_a_malformed_head_is_a_400_in_the_json_shape(slow: dict[str, t.Any]) -> None:
    data, closed = _raw(slow["port"], b"POST /slow HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 400"), data[:200]
    assert b"content-type: application/json" in data.lower()
    body = _body(data)
    assert set(body) == {"error", "field"} and body["error"].startswith("malformed request head")
    assert closed


@pytest.mark.integration
def test_content_length_with_chunked_closes_the_connection(slow: dict[str, t.Any]) -> None:
    """RFC 9112 §6.3: framed by Transfer-Encoding, and the connection closed after."""
    body = b'{"seconds": 0}'
    chunked = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    request = (
        b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked
    )
    data, closed = _raw(slow["port"], request)
    assert data.startswith(b"HTTP/1.1 200"), data[:300]
    assert b"connection: close" in data.lower() and closed
    # a request with one of them keeps its connection
    plain = (
        b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    data, closed = _raw(slow["port"], plain, wait_s=3)
    assert data.startswith(b"HTTP/1.1 200") and not closed


@pytest.mark.integration
def test_a_stopping_server_refuses_new_connections_and_finishes_those_in_flight(
    slow: dict[str, t.Any],
) -> None:
    """Last in this module: it stops the server."""
    out: dict[str, t.Any] = {}

    def in_flight() -> None:
        try:
            r = httpx.post(f"{slow['url']}/slow", json={"seconds": 8}, timeout=30)
            out["status"] = r.status_code
        except httpx.HTTPError as e:
            out["error"] = repr(e)

    th = threading.Thread(target=in_flight)
    th.start()
    time.sleep(1.5)  # the request is in
    slow["proc"].send_signal(signal.SIGTERM)
    time.sleep(1.0)  # the signal reached the workers
    t0 = time.monotonic()
    # refused at once (before: accepted by the kernel, then reset when the drain ended)
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{slow['url']}/slow", json={"seconds": 0}, timeout=10)
    assert time.monotonic() - t0 < 1, "a new connection was accepted and then hung"
    th.join(30)
    assert out.get("status") == 200, (out, slow["log"].read_text()[-2000:])
    assert slow["proc"].wait(30) is not None
