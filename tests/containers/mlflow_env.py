"""The MLflow server of the container tier, shared by its modules (test_mlflow_server,
test_webhook, test_pipeline_docker): `r2a mlflow up` on the test run's own Postgres
(tests/conftest.py `pg_env`), a temporary state folder and a free port, started once per
test run and stopped when its last user is done; and a champion trained through it.

Fixtures imported into several modules are separate definitions, so the server is held
here, reference-counted, rather than in a conftest that belongs to the Docker fixtures.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _free_port, make_mini_musique, run_cli


@dataclass
class MlflowServer:
    url: str
    state: Path
    env: dict[str, str]  # pg_env plus what selects this server
    start_s: float  # first start: /health after this many seconds (schema migration)
    rss_mb: float | None
    timings: dict[str, float] = field(default_factory=dict)
    cache: dict[str, Any] = field(default_factory=dict)  # what modules share (the champion)


_held: dict[str, Any] = {"server": None, "users": 0}
WEBHOOK_ENV = ("MLFLOW_WEBHOOK_ALLOWED_SCHEMES", "MLFLOW_WEBHOOK_ALLOW_PRIVATE_IPS")


def manifest_webhook_env() -> dict[str, str]:
    """MLflow's webhook settings as k8s/base/mlflow.yaml gives them (the dev overlay,
    rendered), so that the container tier's webhook runs under the cluster's rules."""
    from tests.containers.conftest import one, pod_spec, render

    (container,) = pod_spec(one(render("dev"), "Deployment", "r2a-mlflow"))["containers"]
    values = {e["name"]: e.get("value") for e in container.get("env", [])}
    missing = [k for k in WEBHOOK_ENV if not values.get(k)]
    assert not missing, f"k8s/base/mlflow.yaml sets no {', '.join(missing)}"
    return {k: str(values[k]) for k in WEBHOOK_ENV}


@pytest.fixture(scope="session")
def mlflow_server(
    pg_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MlflowServer]:
    from r2adapter.config import settings
    from r2adapter.registry import server

    if _held["server"] is None:
        state = tmp_path_factory.mktemp("mlflow-server")
        env = {"R2A_MLFLOW_DIR": str(state), "R2A_MLFLOW_PORT": str(_free_port())}
        # the webhook settings the cluster's MLflow runs with: the rendered Deployment's
        env |= manifest_webhook_env()
        os.environ.update(env)
        settings.cache_clear()
        st, seconds = server.up()
        print(f"\nmlflow server: /health after {seconds:.1f} s, {st.rss_mb:.0f} MB")
        _held["server"] = MlflowServer(
            st.url,
            state,
            {**pg_env, **env, "MLFLOW_TRACKING_URI": st.url},
            seconds,
            st.rss_mb,
        )
    _held["users"] += 1
    try:
        yield _held["server"]
    finally:
        _held["users"] -= 1
        if _held["users"] == 0:
            server.down()
            _held["server"] = None


@contextmanager
def own_mlflow_server(pg_env: dict[str, str], state: Path) -> Iterator[MlflowServer]:
    """A second `r2a mlflow up` with a database of its own (R2A_MLFLOW_DB): a registry that
    no other module has written to, for a module that counts versions from 1. The session's
    server keeps running; this one's settings are in os.environ while the block runs."""
    from r2adapter.config import settings
    from r2adapter.registry import server

    env = {
        "R2A_MLFLOW_DIR": str(state),
        "R2A_MLFLOW_PORT": str(_free_port()),
        "R2A_MLFLOW_DB": f"mlflow_own_{os.getpid()}",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    settings.cache_clear()
    try:
        st, seconds = server.up()
        yield MlflowServer(
            st.url, state, {**pg_env, **env, "MLFLOW_TRACKING_URI": st.url}, seconds, st.rss_mb
        )
    finally:
        server.down()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        settings.cache_clear()


def served_champion(srv: MlflowServer, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The MuSiQue subset indexed (precomputed OpenIE), labelled, an r2a_embed router
    trained and promoted through the server: the dataset's folder (once per test run)."""
    if "champion_dataset" in srv.cache:
        return str(srv.cache["champion_dataset"])
    path = make_mini_musique(tmp_path_factory.mktemp("ds") / "mlfmini")
    name = Path(path).name
    for args in (
        ["index", "--dataset", path, "--openie", "precomputed"],
        ["label", "--dataset", path],
        ["train", "--dataset", name, "--backbone", "embedding", "--epochs", "5"],
        ["promote", "--router", "r2a_embed", "--dataset", name],
    ):
        t0 = time.perf_counter()
        r = run_cli(args, srv.env, timeout=1500)
        assert r.returncode == 0, (args, r.stdout[-1500:], r.stderr[-2000:])
        srv.timings[f"{args[0]}_s"] = round(time.perf_counter() - t0, 1)
    srv.cache["champion_dataset"] = path
    return path
