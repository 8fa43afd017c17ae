"""`bentoml serve` with a Prometheus multiprocess folder of this instance's own.

BentoML points every server on a host at one folder, `<BENTOML_HOME>/prometheus_multiproc_dir`,
and empties it when a server starts: a second `r2a serve` emptied the first one's /metrics
(issue 27, item 7). BentoML hands its workers the folder through PROMETHEUS_MULTIPROC_DIR in
their environment, before any metric series exists in them, so the folder is chosen here, in
the arbiter, before BentoML runs: `<BENTOML_HOME>/r2a-metrics/<pid>`. The pid is the server's
(`r2a serve` execs this module, and this module runs BentoML's CLI in the same process); the
folders of servers that are gone are removed when the next one starts, and this one's when it
exits. A server is gone when its arbiter and every process holding the folder in its
environment are: a worker orphaned by a kill -9 of its arbiter serves on, and its /metrics
with it (issue 44, item 11). A container runs one server, so the image keeps BentoML's own
`bentoml serve`.

A stopping server drains: the requests in flight finish for at most DRAIN_S (uvicorn's
`--timeout-graceful-shutdown`; BentoML sets none, so a hung request held the stop for ever)
while new connections are refused (serving/connection.py). The Kubernetes Deployment
matches it: a preStop of PRESTOP_S, the same drain, and a grace period covering both.

A port already taken (by another server, or by such an orphan) is one line and exit 1,
before anything is removed or loaded, not circus' traceback after the service was imported.

    python -m serving.launch serve serving.service:R2AService --port 3000
"""

from __future__ import annotations

import atexit
import errno
import os
import shutil
import socket
import sys
from pathlib import Path

FOLDER = "r2a-metrics"
REQUEST_TIMEOUT_S = 60  # the service's traffic timeout: the longest a request may run
# SIGTERM → the listening socket shut (serving/connection.py), then the requests in flight
# finish for at most this long: every one that may still finish does
DRAIN_S = REQUEST_TIMEOUT_S
PRESTOP_S = 5  # k8s: the endpoint leaves the Service's rotation before SIGTERM arrives
# k8s/base/serving.yaml terminationGracePeriodSeconds ≥ PRESTOP_S + DRAIN_S + this (exit)
EXIT_SLACK_S = 10
ENV = b"PROMETHEUS_MULTIPROC_DIR="


def folders_in_use() -> set[str]:
    """The Prometheus multiprocess folders named in the environment of live processes
    (those this user may read: a server's workers are its own)."""
    used: set[str] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:  # gone meanwhile, or another user's
            continue
        for var in environ.split(b"\0"):
            if var.startswith(ENV):
                used.add(os.path.normpath(var[len(ENV) :].decode(errors="replace")))
    return used


def instance_metrics_dir(home: Path, pid: int) -> Path:
    """This server's folder under `home`, made empty; the folders of dead servers removed."""
    base = home / FOLDER
    base.mkdir(parents=True, exist_ok=True)
    used: set[str] | None = None
    for old in base.iterdir():
        if not old.name.isdigit() or int(old.name) == pid or Path(f"/proc/{old.name}").exists():
            continue
        used = folders_in_use() if used is None else used
        if os.path.normpath(old) not in used:
            shutil.rmtree(old, ignore_errors=True)
    own = base / str(pid)
    shutil.rmtree(own, ignore_errors=True)
    own.mkdir()
    return own


def _option(argv: list[str], name: str, default: str) -> str:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def port_taken(host: str, port: int) -> bool:
    """Whether binding `host:port` fails as the server's would (circus sets SO_REUSEADDR,
    so a socket in TIME_WAIT is no obstacle; a listener is)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def _taken(host: str, port: str) -> None:
    print(
        f"r2a serve: port {port} on {host} is taken (another server, or a worker left by "
        "one killed): pass --port, or stop what holds it (`ss -ltnp`)",
        file=sys.stderr,
    )
    sys.exit(1)


def main(argv: list[str]) -> None:
    host, port = _option(argv, "--host", "0.0.0.0"), _option(argv, "--port", "3000")
    if port.isdigit() and port_taken(host, int(port)):
        _taken(host, port)
    from bentoml._internal.configuration.containers import BentoMLContainer

    own = instance_metrics_dir(Path(BentoMLContainer.bentoml_home.get()), os.getpid())
    BentoMLContainer.prometheus_multiproc_dir.set(str(own))
    atexit.register(shutil.rmtree, own, ignore_errors=True)
    from bentoml_cli.cli import cli

    drain = (
        []
        if "--timeout-graceful-shutdown" in argv
        else ["--timeout-graceful-shutdown", str(DRAIN_S)]
    )
    sys.argv = ["bentoml", *argv, *drain]
    try:
        cli()
    except OSError as e:  # taken between the check and circus' bind
        if e.errno != errno.EADDRINUSE:
            raise
        _taken(host, port)


if __name__ == "__main__":
    main(sys.argv[1:])
