"""A database to build indexes into, and `r2a` run as a subprocess against it: for the
quality sweep (r2adapter/evaluate/quality_rows.py) and the benchmarks that build indexes
(benchmarks/perf/bench_index.py, bench_scale.py). The caller hands in the `r2a` command line
(`r2a`: the door's own, e.g. `python -m` the command's module), which no floor below the
doors names.

Why a scratch Postgres per (dataset, OpenIE backend): one database holds any number of
index versions of a dataset (`index_versions.openie` records the backend), but retrieval
and evaluation always read the dataset's *latest* version (`graph_store.latest_version`,
by id, whatever its backend), and the dataset name is the key of `datasets`/`passages`.
So two backends' indexes of one dataset cannot be served side by side from one database;
built one after the other, the second replaces the first. A scratch database per pair
also makes every build start cold, so the timings do not depend on the order of the runs.

`db: scratch` (`--db scratch`, the default): a fresh embedded Postgres (R2A_PGDATA under a temporary
folder, a free port other than the developer's 54329, R2A_HOME and MLflow in the same
folder), started with `r2a db up`, stopped with `r2a db down` and deleted afterwards
(unless `--keep`).
`db: env` (`--db env`): the database the environment points at (R2A_PGDATA/R2A_PG_PORT or
R2A_DATABASE_URL, e.g. the test suite's); runs for one dataset then go one after another
(build, then evaluate, then the next backend). The project's own default database
(`.pgdata` on 54329) is refused: a build there would change the index the service reads.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]
LIVE_PORT = 54329  # the developer's database: never written by a benchmark


class BenchError(Exception):
    """A step of a benchmark run failed; the message is one line."""


@dataclass(frozen=True)
class Database:
    env: dict[str, str]  # the environment for `r2a` subprocesses
    url: str
    where: str  # for the report: "scratch <pgdata> port N" or "env <url>"
    scratch: bool


@dataclass(frozen=True)
class R2ARun:
    stdout: str
    stderr_tail: str
    wall_s: float


def add_db_args(ap: argparse.ArgumentParser) -> None:
    """The options every scratch-database benchmark takes."""
    ap.add_argument("--db", choices=["scratch", "env"], default="scratch")
    ap.add_argument("--scratch-dir", type=Path, help="where scratch databases go (default /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch databases (stopped)")
    ap.add_argument("--timeout", type=float, default=7200, help="seconds per r2a command")


def free_port() -> int:
    from r2adapter.processes import free_port as pick

    while (port := pick()) == LIVE_PORT:
        pass
    return port


def data_dir() -> Path:
    """The datasets folder the caller's environment names (R2A_DATA_DIR, else data/)."""
    from r2adapter.config import settings

    return settings().data_dir


def run_r2a(r2a: Sequence[str], args: list[str], env: dict[str, str], timeout: float) -> R2ARun:
    """`r2a ARGS` in a subprocess (`r2a`: the command line that runs `r2a`); stderr (progress
    bars, notes) is passed through to ours and its tail kept; BenchError with the last line on
    a non-zero exit."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*r2a, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    tail = bytearray()

    def pump(src: IO[bytes]) -> None:
        out = sys.stderr.buffer
        while chunk := src.read1(8192):  # type: ignore[attr-defined]
            out.write(chunk)
            out.flush()
            tail.extend(chunk)
            del tail[:-20000]

    assert proc.stderr is not None and proc.stdout is not None
    t = threading.Thread(target=pump, args=(proc.stderr,), daemon=True)
    t.start()
    try:
        stdout = proc.stdout.read()
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise BenchError(f"`r2a {' '.join(args)}` ran past {timeout:.0f} s") from None
    finally:
        t.join(timeout=5)
    wall = time.perf_counter() - t0
    err = tail.decode(errors="replace")
    if proc.returncode != 0:
        raise BenchError(f"`r2a {' '.join(args)}` exited {proc.returncode}: {last_line(err)}")
    return R2ARun(stdout.decode(errors="replace"), err, wall)


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.startswith(("error:", "internal error:")):
            return ln
    return lines[-1] if lines else "(no output)"


def json_line(stdout: str) -> dict[str, Any]:
    """The last line of stdout that is a JSON object."""
    for ln in reversed(stdout.splitlines()):
        if ln.lstrip().startswith("{"):
            obj = json.loads(ln)
            if isinstance(obj, dict):
                return obj
    raise BenchError(f"no JSON object on stdout: {stdout[-300:]!r}")


def _env_database() -> Database:
    from r2adapter.config import settings
    from r2adapter.store.db import database_url

    s = settings()
    if s.embedded and (s.pg_port == LIVE_PORT or s.pgdata.resolve() == ROOT / ".pgdata"):
        raise BenchError(
            f"--db env points at the project's own database ({s.pgdata}, port {s.pg_port}); "
            "builds there change the index the service reads: use --db scratch, or set "
            "R2A_PGDATA and R2A_PG_PORT (or R2A_DATABASE_URL) to a test database"
        )
    env = dict(os.environ)
    env.setdefault("R2A_DATA_DIR", str(s.data_dir))
    return Database(env, database_url(), f"env {redacted(database_url())}", scratch=False)


def redacted(url: str) -> str:
    """postgresql://user:secret@host/db -> postgresql://user:***@host/db"""
    return re.sub(r"^(\w+://[^:/@]+):[^@/]*@", r"\1:***@", url)


@contextmanager
def database(
    r2a: Sequence[str],
    mode: str,
    root: Path | None,
    name: str,
    keep: bool = False,
    project_params: bool = False,
) -> Iterator[Database]:
    """The database one run builds into: a scratch embedded Postgres (started here, stopped
    and deleted on exit unless `keep`) or, with mode "env", the environment's.
    `project_params`: the project's params.yaml copied into the scratch R2A_HOME, so that
    `r2a` there runs with the parameters `make run` has (R2A_HOME is where params.yaml is
    read: without it every section takes its defaults, ADR's hypergraph off)."""
    if mode == "env":
        db = _env_database()
        check_reachable(db.url)
        yield db
        return
    base = Path(tempfile.mkdtemp(prefix=f"r2a-bench-{name}-", dir=root))
    port = free_port()
    env = {
        **os.environ,
        "R2A_PGDATA": str(base / "pgdata"),
        "R2A_PG_PORT": str(port),
        "R2A_HOME": str(base / "home"),
        "R2A_DATA_DIR": str(data_dir()),
        "MLFLOW_TRACKING_URI": f"sqlite:///{base / 'mlflow.db'}",
    }
    env.pop("R2A_DATABASE_URL", None)
    if project_params and (ROOT / "params.yaml").is_file():
        (base / "home").mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / "params.yaml", base / "home" / "params.yaml")
    where = f"scratch {base / 'pgdata'} port {port}"
    started = False
    try:
        run_r2a(r2a, ["db", "up"], env, timeout=180)
        started = True
        # the URL carries the generated password (SCRAM), so ask `r2a db url` for it
        url = run_r2a(r2a, ["db", "url"], env, timeout=60).stdout.strip()
        yield Database(env, url, where, scratch=True)
    finally:
        if started or (base / "pgdata" / "postmaster.pid").exists():
            try:
                run_r2a(r2a, ["db", "down"], env, timeout=120)
            except BenchError as e:
                print(f"warning: scratch database not stopped: {e}", file=sys.stderr)
        if keep:
            print(f"kept scratch database {base} (port {port}, stopped)", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)


def check_reachable(url: str) -> None:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=5):
            pass
    except psycopg.OperationalError:
        raise BenchError(
            f"database unreachable at {redacted(url)}: run `r2a db up` or set R2A_DATABASE_URL"
        ) from None


def previous_result(path: Path) -> dict[str, Any]:
    """An earlier result file (for --merge), or {} when there is none or it is unreadable."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return old if isinstance(old, dict) else {}


def earlier_runs(old: dict[str, Any]) -> list[dict[str, Any]]:
    """The header (time, machine) of each run whose entries a merged file still holds."""
    if not old:
        return []
    return [
        *old.get("earlier_runs", []),
        {"timestamp": old.get("timestamp"), "machine": old.get("machine")},
    ]
