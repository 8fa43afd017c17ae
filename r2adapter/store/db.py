"""One connection pool for the process, pointed at R2A_DATABASE_URL or the embedded server.

A circuit breaker stands in front of it: once a connection fails, every caller fails at
once (no 5 s wait on the pool each) until a background check sees the database answer
again, then the pool is rebuilt so that the next request gets a fresh connection.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from r2adapter.config import settings
from r2adapter.errors import DatabaseError
from r2adapter.store.cpu_time import metered_backend

_pool: ConnectionPool | None = None
_pool_url: str | None = None
_lock = threading.Lock()
log = logging.getLogger("r2a.store")
CHECK_EVERY_S = 0.2  # how often the background check looks for the database while it is down


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
            if not ping(timeout_s=1):  # a server that is gone or stopping refuses at once:
                # fail now, not after the new pool's 5 s wait for its first connection (a
                # request that reopened the pool the breaker had just closed waited 5 s)
                raise DatabaseError(
                    f"database unreachable at {_redacted(url)}: run `r2a db up` or set "
                    "R2A_DATABASE_URL"
                )
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
                check=_checked,
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


class _ServerGone(BaseException):
    """Raised by the checkout check when the server is gone: psycopg_pool retries a check
    that raises an Exception (discard, wait for another connection: a waiter that entered
    that loop after the breaker closed the pool waited out the pool's 5 s), but lets a
    BaseException through at once. `connection()` turns it into a DatabaseError."""


def _checked(conn: psycopg.Connection) -> None:
    """The pool's check on checkout; a dead connection on a server that is gone opens the
    breaker now and fails this checkout at once, so neither it nor the requests queued
    behind it wait out the pool's timeout while it reconnects (issue 44, item 6)."""
    try:
        ConnectionPool.check_connection(conn)
    except psycopg.OperationalError as e:
        if _breaker.is_open() or not ping(timeout_s=1):
            reason = str(e).strip().splitlines()[0] if str(e).strip() else "lost"
            _breaker.trip(reason)
            raise _ServerGone(reason) from None
        raise


def close_pool(timeout_s: float = 5.0) -> None:
    """Close the pool; callers waiting on it for a connection fail at once (PoolClosed).
    `timeout_s`: how long to wait for its reconnecting threads (0: not at all)."""
    global _pool
    with _lock:
        p, _pool = _pool, None
    if p is not None:
        p.close(timeout=timeout_s)


def ping(timeout_s: int = 2) -> bool:
    """Whether the database answers within `timeout_s`, on a connection of its own: a
    readiness probe must not wait out the pool's 5 s when the server is down."""
    try:
        with psycopg.connect(database_url(), connect_timeout=timeout_s) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


class _Breaker:
    """Open after a failed connection; closed again by a thread that pings until the
    database answers. Open means: fail in microseconds instead of waiting on the pool."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.open_since: float | None = None
        self.reason = ""
        self.url = ""  # the database it is open for: another URL (settings changed) passes

    def is_open(self) -> bool:
        return self.open_since is not None and self.url == database_url()

    def trip(self, reason: str) -> None:
        with self._lock:
            if self.open_since is not None and self.url == database_url():
                return  # open already (open for another URL: the settings changed, trip anew)
            self.open_since = time.monotonic()
            self.reason = reason
            self.url = database_url()
        # DEBUG: a CLI prints its own one-line error; a higher level would add a second line
        log.debug("database down (%s): failing fast until it answers again", reason)
        threading.Thread(target=self._watch, name="db-breaker", daemon=True).start()

    def _watch(self) -> None:
        # the requests already waiting on the pool for a connection fail now, not after the
        # pool's 5 s checkout timeout (issue 44, item 6: in-flight requests stalled 5.1 s)
        close_pool(timeout_s=0)
        while self.url == database_url() and not ping(timeout_s=1):
            time.sleep(CHECK_EVERY_S)
        close_pool()  # its connections died with the server; the next caller opens anew
        with self._lock:
            down = time.monotonic() - (self.open_since or time.monotonic())
            self.open_since = None
        log.info("database back after %.1f s", down)


_breaker = _Breaker()


def known_down() -> bool:
    """Whether a connection has failed and the database has not been seen back since: a
    caller can give up before doing any work (encoding a query) that needs it."""
    return _breaker.is_open()


def available() -> bool:
    """Whether the database is answering: false at once while the breaker is open."""
    return not _breaker.is_open() and ping()


@contextmanager
def connection() -> Iterator[psycopg.Connection]:
    """A pooled connection; the block is one transaction (commit on success, else rollback).
    While the database is known to be down this raises DatabaseError at once."""
    if _breaker.is_open():
        raise DatabaseError(
            f"database unreachable at {_redacted(database_url())} ({_breaker.reason}): "
            "run `r2a db up` or set R2A_DATABASE_URL"
        )
    try:
        with pool().connection() as conn, metered_backend(conn.info.backend_pid):
            yield conn  # a CpuMeter active around the block counts the backend's CPU time
    except psycopg.OperationalError as e:
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if not _alive(conn_error=e):
            _breaker.trip(detail)
        raise DatabaseError(f"database error at {_redacted(database_url())}: {detail}") from None
    except (PoolClosed, PoolTimeout) as e:  # the breaker closed the pool under us, or no
        # connection came within the pool's timeout: the server is gone or saturated
        if isinstance(e, PoolTimeout) and not ping(timeout_s=1):
            _breaker.trip("no connection within the pool's timeout")
        raise DatabaseError(
            f"database unreachable at {_redacted(database_url())} ({type(e).__name__}): "
            "run `r2a db up` or set R2A_DATABASE_URL"
        ) from None
    except _ServerGone as e:  # the checkout found the server gone (the breaker is open)
        raise DatabaseError(
            f"database unreachable at {_redacted(database_url())} ({e}): "
            "run `r2a db up` or set R2A_DATABASE_URL"
        ) from None
    except DatabaseError:  # pool() could not open: the server is not there
        _breaker.trip("no connection could be opened")
        raise


def _alive(conn_error: psycopg.OperationalError) -> bool:
    """An OperationalError is also a cancelled or failed statement on a live server; only a
    lost server opens the breaker."""
    if isinstance(conn_error, psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable):
        return True
    return ping(timeout_s=1)
