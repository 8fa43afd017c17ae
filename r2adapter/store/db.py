"""One connection pool for the process, pointed at R2A_DATABASE_URL or the embedded server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg_pool import ConnectionPool

from r2adapter.config import settings
from r2adapter.errors import DatabaseError

_pool: ConnectionPool | None = None
_pool_url: str | None = None
_lock = threading.Lock()


def database_url() -> str:
    s = settings()
    if s.database_url:
        return s.database_url
    from r2adapter.store.embedded import url

    return url()


def _redacted(url: str) -> str:
    # postgresql://user:secret@host/db → postgresql://user:***@host/db
    head, sep, tail = url.rpartition("@")
    if not sep or ":" not in head.split("//", 1)[-1]:
        return url
    scheme, _, cred = head.partition("//")
    return f"{scheme}//{cred.split(':', 1)[0]}:***@{tail}"


def _configure(conn: psycopg.Connection) -> None:
    from pgvector.psycopg import register_vector

    try:
        register_vector(conn)
    except psycopg.ProgrammingError:
        pass  # the extension is created by the first migration; re-registered after it
    conn.commit()


def pool(min_size: int = 1, max_size: int = 8) -> ConnectionPool:
    global _pool, _pool_url
    url = database_url()
    with _lock:
        if _pool is None or _pool_url != url:
            if _pool is not None:
                _pool.close()
            # check on checkout: after a database restart, stale connections are replaced
            # instead of failing the next request
            _pool = ConnectionPool(
                url,
                min_size=min_size,
                max_size=max_size,
                open=False,
                configure=_configure,
                timeout=5,
                name="r2a",
                check=ConnectionPool.check_connection,
            )
            _pool_url = url
            try:
                _pool.open(wait=True, timeout=5)
            except Exception:
                _pool.close()
                _pool = None
                raise DatabaseError(
                    f"database unreachable at {_redacted(url)}: run `r2a db up` or set "
                    "R2A_DATABASE_URL"
                ) from None
        return _pool


def close_pool() -> None:
    global _pool
    with _lock:
        if _pool is not None:
            _pool.close()
            _pool = None


def ping(timeout_s: int = 2) -> bool:
    """Whether the database answers within `timeout_s`, on a connection of its own: a
    readiness probe must not wait out the pool's 5 s when the server is down."""
    try:
        with psycopg.connect(database_url(), connect_timeout=timeout_s) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


@contextmanager
def connection() -> Iterator[psycopg.Connection]:
    """A pooled connection; the block is one transaction (commit on success, else rollback)."""
    try:
        with pool().connection() as conn:
            yield conn
    except psycopg.OperationalError as e:
        raise DatabaseError(
            f"database error at {_redacted(database_url())}: {str(e).strip().splitlines()[0]}"
        ) from None
