"""The MLflow server of the container tier, shared by its modules (test_mlflow_server,
test_webhook, test_serving_manifest; tests/test_model_cache.py of the integration tier
uses it too): `r2a mlflow up` on the test run's own Postgres
(tests/conftest.py `pg_env`), a temporary state folder and a free port, started once per
test run and stopped when its last user is done; and a champion trained through it.
test_pipeline_docker has a server of its own (`own_mlflow_server`).

Every such server keeps its artifacts in S3, as the prod overlay's MLflow does
(k8s/components/s3-artifacts): a bucket of one moto server (tests/s3server.py) for the
whole tier, `R2A_MLFLOW_ARTIFACTS=s3://r2a-mlflow/<the server's database>` with the endpoint
and keys in the server's environment; clients and the serving containers get no S3 keys
(the server proxies the artifacts). `stored_in_s3` checks that a model version's files are
in the bucket and that the server's local artifacts folder holds nothing.

Fixtures imported into several modules are separate definitions, so the servers are held
here, reference-counted, rather than in a conftest that belongs to the Docker fixtures.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pytest

from tests.conftest import _free_port, make_mini_musique, run_cli
from tests.s3server import S3Server, start_s3

BUCKET = "r2a-mlflow"


@dataclass
class MlflowServer:
    url: str
    state: Path
    env: dict[str, str]  # pg_env plus what selects this server
    start_s: float  # first start: /health after this many seconds (schema migration)
    rss_mb: float | None
    s3: S3Server  # where its artifacts are: BUCKET, under `prefix`
    prefix: str
    timings: dict[str, float] = field(default_factory=dict)
    cache: dict[str, Any] = field(default_factory=dict)  # what modules share (the champion)


_held: dict[str, Any] = {"it": None, "users": 0}  # the session's server, with its ExitStack
_s3: dict[str, Any] = {"it": None, "users": 0}  # the tier's moto server
T = TypeVar("T")


@contextmanager
def _shared(held: dict[str, Any], start: Callable[[], T], stop: Callable[[T], None]) -> Iterator[T]:
    """One thing for all its users: `start()`ed by the first, `stop`ped after the last."""
    if held["it"] is None:
        held["it"] = start()
    held["users"] += 1
    try:
        yield held["it"]
    finally:
        held["users"] -= 1
        if held["users"] == 0:
            it, held["it"] = held["it"], None
            stop(it)


def _start_s3(folder: Path) -> S3Server:
    s3 = start_s3(folder / "moto.log")
    try:
        s3.client().create_bucket(Bucket=BUCKET)
    except BaseException:
        s3.stop()
        raise
    return s3


def held_s3(folder: Path) -> AbstractContextManager[S3Server]:
    """The tier's one moto server with BUCKET in it (its log in `folder` of its first user)."""
    return _shared(_s3, partial(_start_s3, folder), S3Server.stop)


@contextmanager
def environ(env: dict[str, str]) -> Iterator[None]:
    """`env` in os.environ (where `r2a mlflow up`, called in this process, reads its
    settings) while the block runs; what was there before comes back after it."""
    from r2adapter.config import settings

    try:
        with pytest.MonkeyPatch.context() as mp:
            for k, v in env.items():
                mp.setenv(k, v)
            settings.cache_clear()
            yield
    finally:
        settings.cache_clear()


def s3_artifacts_env(s3: S3Server, prefix: str) -> dict[str, str]:
    """`r2a mlflow up`'s settings for artifacts in BUCKET under `prefix`: the destination,
    the endpoint and the keys (which reach the server through its environment)."""
    return {"R2A_MLFLOW_ARTIFACTS": f"s3://{BUCKET}/{prefix}", **s3.env()}


def stored_in_s3(srv: MlflowServer, model: str, version: str) -> list[str]:
    """The bucket's keys under a model version's artifacts (its `mlflow-artifacts:` URI,
    which the server maps onto its destination), asserted to hold the version's MLmodel;
    and the server's local artifacts folder asserted empty: the files went to S3 alone."""
    from mlflow import MlflowClient

    c = MlflowClient(tracking_uri=srv.url, registry_uri=srv.url)
    uri = c.get_model_version_download_uri(model, version)
    assert uri.startswith("mlflow-artifacts:"), f"{model} v{version}: not proxied: {uri}"
    prefix = f"{srv.prefix}/{urlsplit(uri).path.strip('/')}/"
    keys = srv.s3.keys(BUCKET, prefix)
    assert f"{prefix}MLmodel" in keys, f"{model} v{version}: no MLmodel in s3://{BUCKET}/{prefix}"
    local = [p for p in (srv.state / "artifacts").rglob("*") if p.is_file()]
    assert not local, f"artifacts in the server's local folder: {local[:5]}"
    return keys


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


def _start_session_server(
    pg_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> tuple[MlflowServer, ExitStack]:
    """The session's server, and what stops it (the server, its settings in os.environ,
    its hold on the moto server), in that order."""
    from r2adapter.registry import server

    state = tmp_path_factory.mktemp("mlflow-server")
    with ExitStack() as stack:
        s3 = stack.enter_context(held_s3(tmp_path_factory.mktemp("moto")))
        env = {"R2A_MLFLOW_DIR": str(state), "R2A_MLFLOW_PORT": str(_free_port())}
        env |= s3_artifacts_env(s3, server.DB_NAME)
        # the webhook settings the cluster's MLflow runs with: the rendered Deployment's
        env |= manifest_webhook_env()
        stack.enter_context(environ(env))
        st, seconds = server.up()
        stack.callback(server.down)
        print(
            f"\nmlflow server: /health after {seconds:.1f} s, {st.rss_mb:.0f} MB,"
            f" artifacts in s3://{BUCKET}/{server.DB_NAME} ({s3.url})"
        )
        env = {**pg_env, **env, "MLFLOW_TRACKING_URI": st.url}
        srv = MlflowServer(st.url, state, env, seconds, st.rss_mb, s3, server.DB_NAME)
        return srv, stack.pop_all()


@pytest.fixture(scope="session")
def mlflow_server(
    pg_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MlflowServer]:
    start = partial(_start_session_server, pg_env, tmp_path_factory)
    with _shared(_held, start, lambda held: held[1].close()) as (srv, _):
        yield srv


@contextmanager
def own_mlflow_server(pg_env: dict[str, str], state: Path) -> Iterator[MlflowServer]:
    """A second `r2a mlflow up` with a database of its own (R2A_MLFLOW_DB): a registry that
    no other module has written to, for a module that counts versions from 1; its artifacts
    in the tier's bucket under that database's name. The session's server keeps running;
    this one's settings are in os.environ while the block runs."""
    from r2adapter.registry import server

    db = f"mlflow_own_{os.getpid()}"
    with held_s3(state) as s3:
        env = {
            "R2A_MLFLOW_DIR": str(state),
            "R2A_MLFLOW_PORT": str(_free_port()),
            "R2A_MLFLOW_DB": db,
            **s3_artifacts_env(s3, db),
        }
        with environ(env):
            try:
                st, seconds = server.up()
                yield MlflowServer(
                    st.url,
                    state,
                    {**pg_env, **env, "MLFLOW_TRACKING_URI": st.url},
                    seconds,
                    st.rss_mb,
                    s3,
                    db,
                )
            finally:
                server.down()


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
