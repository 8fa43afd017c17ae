"""A real Postgres (the embedded server) started by the test run, on its own data folder
and port, so tests never touch the developer's `.pgdata`."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
R2A = [sys.executable, "-m", "r2adapter.cli"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def pg_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    from r2adapter.config import settings
    from r2adapter.store import embedded
    from r2adapter.store.db import close_pool

    env = {
        "R2A_PGDATA": str(tmp_path_factory.mktemp("pg") / "data"),
        "R2A_PG_PORT": str(_free_port()),
        "R2A_HOME": str(ROOT),
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path_factory.mktemp('mlruns')}/mlflow.db",
    }
    saved = {k: os.environ.get(k) for k in [*env, "R2A_DATABASE_URL"]}
    os.environ.update(env)
    os.environ.pop("R2A_DATABASE_URL", None)
    settings.cache_clear()
    embedded.up()
    yield {**os.environ, **env}
    close_pool()
    embedded.down()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    settings.cache_clear()


def run_cli(
    args: list[str], env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*R2A, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
