"""Versioned SQL migrations: `migrations/NNNN_name.sql`, each applied once, in order,
each in its own transaction, under an advisory lock so two processes never race."""

from __future__ import annotations

from importlib import resources

from r2adapter.store.db import close_pool, connection

_LOCK_KEY = 0x52324144  # "R2AD"


def available() -> list[tuple[int, str, str]]:
    files = resources.files("r2adapter.store") / "migrations"
    out = []
    for f in sorted(files.iterdir(), key=lambda p: p.name):
        if f.name.endswith(".sql"):
            out.append((int(f.name.split("_", 1)[0]), f.name, f.read_text()))
    return out


def migrate() -> list[str]:
    """Apply pending migrations; returns the names applied (empty when up to date)."""
    applied: list[str] = []
    with connection() as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY,"
                " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            conn.commit()
            done = {v for (v,) in conn.execute("SELECT version FROM schema_migrations")}
            conn.commit()
            for version, name, sql in available():
                if version in done:
                    continue
                with conn.transaction():
                    conn.execute(sql)
                    conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                        (version, name),
                    )
                applied.append(name)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))
            conn.commit()
    if applied:
        # pooled connections opened before the extension existed lack the vector type
        close_pool()
    return applied
