"""Issue 44, item 1: a registered model loaded from an MLflow server (`r2a mlflow up`, the
probe's setup) goes into the project's model cache once per version, never into the temp
folder (MLflow's own `models:/…@alias` download left a full copy there on every load), and
the cache keeps at most R2A_MODEL_CACHE_VERSIONS versions of a model."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import mlflow.pyfunc
import pytest

from r2adapter.config import settings
from r2adapter.registry import cache
from r2adapter.registry.models import client, load_alias, register_candidate
from r2adapter.registry.tracking import mlflow_setup
from tests.conftest import TextColumns
from tests.containers.mlflow_env import MlflowServer, mlflow_server  # noqa: F401 (fixture)

pytestmark = pytest.mark.integration

MODEL = "r2a-cache-toy"


def _bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


@pytest.fixture
def registry(
    mlflow_server: MlflowServer,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Path]:
    """Three versions of MODEL on the server; the model cache in tmp_path/cache."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.url)
    monkeypatch.setenv("R2A_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("R2A_MODEL_CACHE_VERSIONS", "2")
    settings.cache_clear()
    exp = mlflow_setup()
    for i in (1, 2, 3):

        def save(folder: Path, i: int = i) -> None:
            folder.mkdir(parents=True)
            (folder / "name.txt").write_text(f"toy v{i}")
            (folder / "padding.bin").write_bytes(b"\0" * 2_000_000)

        with mlflow.start_run(experiment_id=exp):
            register_candidate(MODEL, "toy", TextColumns(), save, "toyset", {})
    yield tmp_path / "cache"
    settings.cache_clear()


def test_loads_leave_nothing_in_the_temp_folder_and_one_copy_a_version(
    registry: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # where mkdtemp() writes
    c = client()
    c.set_registered_model_alias(MODEL, "champion", "1")
    for _ in range(5):  # a service polling an unchanged champion, restarts, promote runs
        router, version = load_alias(MODEL, "champion", "(none)")
        assert (router, version) == ("toy v1", "1")
    assert _bytes(tmp) == 0, sorted(p.name for p in tmp.iterdir())
    versions = sorted(p.name for p in cache.model_folder(MODEL).iterdir())
    # the model's files but its `code/` (the project's source, which this process has)
    assert not (cache.model_folder(MODEL) / "v1" / cache.CODE).exists()
    assert (cache.model_folder(MODEL) / "v1" / "python_model.pkl").is_file()
    assert versions == ["v1"] and 2_000_000 < cache.cached_bytes(MODEL) < 2_200_000
    assert sys.path.count(str(cache.model_folder(MODEL) / "v1" / cache.CODE)) == 0
    for v in ("2", "3"):
        c.set_registered_model_alias(MODEL, "champion", v)
        assert load_alias(MODEL, "champion", "(none)") == (f"toy v{v}", v)
    # the bound: the two most recently used versions stay
    assert sorted(p.name for p in cache.model_folder(MODEL).iterdir()) == ["v2", "v3"]
    assert load_alias(MODEL, "champion", "(none)", version="2") == ("toy v2", "2")
    assert _bytes(tmp) == 0
