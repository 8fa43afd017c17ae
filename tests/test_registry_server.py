"""r2adapter/registry/server.py's settings that need no server: the database a server keeps
its registry in (R2A_MLFLOW_DB), and that the backend URL names it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from r2adapter.config import settings
from r2adapter.errors import R2AError
from r2adapter.registry import server

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _fresh_settings() -> Iterator[None]:
    """settings() caches R2A_DATABASE_URL; leave the next test the cache it would have had."""
    yield
    settings.cache_clear()


def test_the_database_is_mlflow_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("R2A_MLFLOW_DB", raising=False)
    monkeypatch.setenv("R2A_DATABASE_URL", "postgresql://u:p@127.0.0.1:5544/r2a?sslmode=disable")
    settings.cache_clear()  # settings() is read once per process; this test changes its input
    assert server.db_name() == "mlflow"
    assert server.backend_uri() == "postgresql+psycopg://u:p@127.0.0.1:5544/mlflow?sslmode=disable"
    monkeypatch.setenv("R2A_MLFLOW_DB", "mlflow_staging")
    assert server.backend_uri().endswith("/mlflow_staging?sslmode=disable")


@pytest.mark.parametrize("bad", ["", "Mlflow", "ml-flow", 'x"; drop', "a" * 64, "1abc"])
def test_a_database_name_that_is_not_an_identifier_is_one_line(
    monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    monkeypatch.setenv("R2A_MLFLOW_DB", bad)
    with pytest.raises(R2AError) as e:
        server.db_name()
    assert "R2A_MLFLOW_DB" in str(e.value) and "\n" not in str(e.value)
