"""Child server processes, on the ground floor: a free loopback port, readiness polling and
a stop that takes the whole process group. The demo, the local LLM server, the tests and the
benchmarks start their servers with these."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

import httpx

from r2adapter.errors import R2AError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(
    url: str,
    proc: subprocess.Popen[bytes],
    timeout: float,
    path: str = "/readyz",
    what: str = "the service",
) -> None:
    """Poll `path` until 200; R2AError when the server exits or the time runs out."""
    deadline = time.time() + timeout
    with httpx.Client(timeout=2, trust_env=False) as c:
        while time.time() < deadline:
            if proc.poll() is not None:
                raise R2AError(f"{what} exited with code {proc.returncode}; see its log")
            try:
                if c.get(f"{url}{path}").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
    raise R2AError(f"{what} was not ready in {timeout:.0f} s")


def stop(proc: subprocess.Popen[bytes], grace: float = 30) -> None:
    """SIGTERM to the server's process group; SIGKILL when it has not exited in `grace` s."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    except ProcessLookupError:
        pass
