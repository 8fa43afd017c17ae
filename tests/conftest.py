"""A real Postgres (the embedded server) started by the test run, on its own data folder
and port, so tests never touch the developer's `.pgdata`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from r2adapter import demo
from r2adapter.errors import R2AError
from r2adapter.processes import free_port

ROOT = Path(__file__).resolve().parents[1]
R2A = [sys.executable, "-m", "r2adapter.cli"]


_free_port = free_port  # the helper `r2a demo` uses; tests pick ports the same way


class TextColumns:
    """A router family's columns in the one MLflow model (r2adapter/route/family.py
    `ModelColumns`) whose router is the text of its artifact's `name.txt`: a model that
    logs in a second, for tests of where the registry keeps it."""

    output: dict[str, str] = {"router": "string"}

    def load(self, folder: Path) -> str:
        return (folder / "name.txt").read_text()

    def frame(self, router: str, queries: list[str]) -> dict[str, object]:
        return {"router": [router] * len(queries)}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that reaches the embedded Postgres (directly or through another fixture) is
    integration, whatever its module says: `make test-fast` (`-m "unit and not integration
    and not slow"`) never starts a database."""
    for item in items:
        if "pg_env" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.integration)


# every variable that points the project at an LLM: a test that wants none, or its own,
# clears them all first
LLM_ENV = (
    "R2A_LLM_BACKEND",
    "R2A_LLM_BASE_URL",
    "R2A_LLM_MODEL",
    "R2A_LLM_API_KEY",
    "R2A_LLM_TIMEOUT",
    "R2A_LLM_MAX_ATTEMPTS",
    "R2A_LLM_MODEL_PATH",
    "R2A_LLM_RUNTIME",
    "R2A_LLM_THREADS",
    "R2A_REWRITE_BACKEND",
)


@contextmanager
def environ(env: dict[str, str], unset: tuple[str, ...] = ()) -> Iterator[dict[str, str]]:
    """os.environ with `env` set and `unset` removed for the block (the settings read
    again on the way in and out), then as it was: the one save/restore every test that
    sets the process's environment uses."""
    from r2adapter.config import settings

    saved = {k: os.environ.get(k) for k in [*env, *unset]}
    os.environ.update(env)
    for k in unset:
        os.environ.pop(k, None)
    settings.cache_clear()
    try:
        yield {**os.environ}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        settings.cache_clear()


@pytest.fixture(scope="session")
def pg_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    from r2adapter.store import embedded
    from r2adapter.store.db import close_pool

    env = {
        "R2A_PGDATA": str(tmp_path_factory.mktemp("pg") / "data"),
        "R2A_PG_PORT": str(_free_port()),
        # outputs (labels, reports) go to a temporary home; data stays the checkout's
        "R2A_HOME": str(tmp_path_factory.mktemp("home")),
        "R2A_DATA_DIR": str(ROOT / "data"),
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path_factory.mktemp('mlruns')}/mlflow.db",
        # a test's copy of a corpus gets the index it builds (tests/test_traffic.py asks for
        # the shared index explicitly)
        "R2A_SHARE_INDEX": "0",
    }
    with environ(env, unset=("R2A_DATABASE_URL",)):
        embedded.up()
        try:
            yield {**os.environ, **env}  # as it is now the server is up
        finally:
            close_pool()
            embedded.down()


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


@contextmanager
def serving(env: dict[str, str], log: Path, timeout: float = 180) -> Iterator[str]:
    """`r2a serve` (a real `bentoml serve`) on a free port, in its own process group, its
    output in `log`: yields its URL once /readyz answers 200, stops it on exit (the helper
    `r2a demo` and the load benchmark use, r2adapter/demo.py)."""
    try:
        with demo.serving(env, log, timeout) as url:
            yield url
    except R2AError as e:
        raise AssertionError(f"{e}: {log.read_text()[-3000:]}") from None


def sample_copy(folder: Path) -> Path:
    """data/sample as a dataset named after `folder` (files renamed to match), so that a
    test's index of it leaves the suite's own `sample` index alone."""
    src = ROOT / "data" / "sample"
    folder.mkdir(parents=True)
    for f in src.glob("sample*.json"):
        shutil.copy(f, folder / f.name.replace("sample", folder.name, 1))
    return folder


N_QUERIES = 60


def make_mini_musique(folder: Path, n: int = N_QUERIES) -> str:
    """The first `n` (60) MuSiQue questions with their supporting and two distractor
    paragraphs, and the shipped GPT-3.5 OpenIE (a superset): small enough to index in
    seconds."""
    src = _data_dir() / "musique"
    queries = json.loads((src / "musique.json").read_text())[:n]
    corpus, seen = [], set()
    for q in queries:
        keep = [p for p in q["paragraphs"] if p["is_supporting"]]
        keep += [p for p in q["paragraphs"] if not p["is_supporting"]][:2]
        for p in keep:
            key = (p["title"], p["paragraph_text"])
            if key not in seen:
                seen.add(key)
                corpus.append({"title": p["title"], "text": p["paragraph_text"]})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{folder.name}.json").write_text(json.dumps(queries))
    (folder / f"{folder.name}_corpus.json").write_text(json.dumps(corpus))
    (folder / f"{folder.name}_openie_gpt-3.5-turbo.json").symlink_to(
        src / "musique_openie_gpt-3.5-turbo.json"
    )
    return str(folder)


def _data_dir() -> Path:
    from r2adapter.config import settings

    return settings().data_dir


@pytest.fixture(scope="session")
def sample_dataset(pg_env: dict[str, str]) -> str:
    """The shipped sample, indexed once per test run (precomputed OpenIE): its name."""
    from r2adapter.index.build import build_index
    from r2adapter.steps import index_extensions

    build_index("sample", "precomputed", log=lambda _: None, extensions=index_extensions())
    return "sample"


@pytest.fixture(scope="session")
def mini_indexed(pg_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> str:
    """The MuSiQue subset, indexed once per test run (precomputed OpenIE)."""
    path = make_mini_musique(tmp_path_factory.mktemp("ds") / "musmini")
    r = run_cli(["index", "--dataset", path, "--openie", "precomputed"], pg_env, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    return path


@pytest.fixture(scope="session")
def champion_store(
    mini_indexed: str, pg_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """One MLflow store with a two-way champion trained on the indexed MuSiQue subset,
    trained once for every served-service module (test_service*.py), each of which serves
    a copy of it (`served_store`): what one module registers or promotes, the others never
    see."""
    home = tmp_path_factory.mktemp("champion")
    train_champion(mini_indexed, {**pg_env, "MLFLOW_TRACKING_URI": f"sqlite:///{home}/mlflow.db"})
    return home


def served_store(champion_store: Path, dest: Path) -> str:
    """A copy of the champion's store in `dest` (its artifact locations follow the copy:
    r2adapter/registry/tracking.py `relocate`); its tracking URI."""
    shutil.copytree(champion_store, dest, dirs_exist_ok=True)
    return f"sqlite:///{dest}/mlflow.db"


def train_champion(dataset: str, env: dict[str, str]) -> None:
    """Label `dataset`, train a one-epoch router on it and promote it: a champion to serve."""
    for args in (
        ["label", "--dataset", dataset],
        ["train", "--dataset", Path(dataset).name, "--epochs", "1"],
        ["promote"],
    ):
        r = run_cli(args, env, timeout=900)
        assert r.returncode == 0, (args, r.stderr[-2000:])
