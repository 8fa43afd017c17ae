"""Issue 44, item 13: the local MLflow store (mlruns/: mlflow.db and artifacts/) moves with
its checkout. MLflow records absolute artifact URIs; a copied or moved store must read its
models from, and log new runs into, its own folder, never the original's."""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import mlflow.pyfunc
import pytest

from r2adapter.config import settings
from r2adapter.errors import R2AError
from r2adapter.registry.models import client, load_alias, register_candidate
from r2adapter.registry.tracking import mlflow_setup
from tests.conftest import TextColumns

pytestmark = pytest.mark.integration  # a real MLflow store on disk

MODEL = "r2a-relocate-toy"


def _use(monkeypatch: pytest.MonkeyPatch, checkout: Path, cache: Path) -> None:
    monkeypatch.setenv("R2A_HOME", str(checkout))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{checkout / 'mlruns' / 'mlflow.db'}")
    monkeypatch.setenv("R2A_MODEL_CACHE", str(cache))  # a fresh cache: files come from the store
    settings.cache_clear()


def _uris(db: Path) -> list[str]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "SELECT artifact_location FROM experiments WHERE name = 'r2a-router' "
            "UNION ALL SELECT artifact_uri FROM runs "
            "UNION ALL SELECT artifact_location FROM logged_models "
            "UNION ALL SELECT storage_location FROM model_versions"
        ).fetchall()
    finally:
        con.close()
    return [str(r[0]) for r in rows]


@pytest.fixture
def original(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A checkout holding a store with MODEL v1 (`champion`) whose artifact says `original`."""
    checkout = tmp_path / "original"
    _use(monkeypatch, checkout, tmp_path / "cache-original")
    exp = mlflow_setup()

    def save(folder: Path) -> None:
        folder.mkdir(parents=True)
        (folder / "name.txt").write_text("original")

    with mlflow.start_run(experiment_id=exp):
        version = register_candidate(MODEL, "toy", TextColumns(), save, "toyset", {})
    client().set_registered_model_alias(MODEL, "champion", version)
    yield checkout
    settings.cache_clear()


def test_a_copied_store_serves_and_trains_from_its_own_folder(
    original: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(original / "mlruns", copy / "mlruns")
    # the copy's model file says so: a load that reads the original's folder reads `original`
    (marker,) = (copy / "mlruns" / "artifacts").rglob("name.txt")
    marker.write_text("copy")
    _use(monkeypatch, copy, tmp_path / "cache-copy")
    assert load_alias(MODEL, "champion", "(none)") == ("copy", "1")
    uris = _uris(copy / "mlruns" / "mlflow.db")
    assert len(uris) == 4 and all(
        u.startswith((copy / "mlruns" / "artifacts").resolve().as_uri() + "/")
        or u == (copy / "mlruns" / "artifacts").resolve().as_uri()
        for u in uris
    ), uris
    with mlflow.start_run(experiment_id=mlflow_setup()) as run:  # training into the copy
        mlflow.log_text("new", "note.txt")
    assert (copy / "mlruns" / "artifacts" / run.info.run_id / "artifacts" / "note.txt").is_file()
    assert not (original / "mlruns" / "artifacts" / run.info.run_id).exists()
    # the original's records are its own still
    assert all(str(original.resolve()) in u for u in _uris(original / "mlruns" / "mlflow.db"))


def test_a_moved_store_loads_with_the_original_gone(
    original: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(original / "mlruns", copy / "mlruns")
    original.rename(tmp_path / "original-renamed")
    _use(monkeypatch, copy, tmp_path / "cache-copy")
    assert load_alias(MODEL, "champion", "(none)") == ("original", "1")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes a read-only file")
def test_a_moved_read_only_store_is_one_line(
    original: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(original / "mlruns", copy / "mlruns")
    (copy / "mlruns" / "mlflow.db").chmod(0o444)
    (copy / "mlruns").chmod(0o555)
    try:
        _use(monkeypatch, copy, tmp_path / "cache-copy")
        with pytest.raises(R2AError, match="was moved from .* cannot be rewritten") as e:
            mlflow_setup()
        assert "\n" not in str(e.value)
    finally:
        (copy / "mlruns").chmod(0o755)
