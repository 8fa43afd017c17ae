"""MLflow as a server (issue 23, item 3): `r2a mlflow up` on the embedded Postgres (its own
database), the project's train → register → alias → promote through it over HTTP, the
champion loaded as `models:/r2a-router-embed@champion` over HTTP, the artifacts in the
server's S3 destination (moto's, tests/containers/mlflow_env.py) and none in its local
folder, and a restart that keeps everything."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import run_cli
from tests.containers.mlflow_env import MlflowServer, mlflow_server, served_champion, stored_in_s3

pytestmark = [pytest.mark.containers, pytest.mark.timeout(2400)]

__all__ = ["mlflow_server"]  # the fixture, imported for this module


def _session_cmdlines(pid: int) -> list[bytes]:
    sid = os.getsid(pid)
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if os.getsid(int(p.name)) == sid:
                    out.append((p / "cmdline").read_bytes())
            except OSError:
                continue
    return out


def test_up_status_own_database_no_password_in_argv(mlflow_server: MlflowServer) -> None:
    import psycopg

    from r2adapter.registry import server
    from r2adapter.store import embedded

    print(f"mlflow server first start {mlflow_server.start_s:.1f} s, {mlflow_server.rss_mb} MB")
    r = run_cli(["mlflow", "status"], mlflow_server.env, timeout=60)
    assert r.returncode == 0 and "healthy" in r.stdout, r.stdout + r.stderr
    with psycopg.connect(embedded.url("postgres")) as conn:
        names = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
    assert {"mlflow", "r2adapter"} <= names
    st = server.status()
    assert st.running and st.healthy and st.pid
    pw = embedded.password()
    assert pw and not any(pw.encode() in c for c in _session_cmdlines(st.pid))
    key = mlflow_server.state / "webhook.key"
    assert key.is_file() and key.stat().st_mode & 0o777 == 0o600
    # a second `up` finds it running and changes nothing
    r = run_cli(["mlflow", "up"], mlflow_server.env, timeout=60)
    assert r.returncode == 0 and f"pid {st.pid}" in r.stdout, r.stdout + r.stderr


def test_train_register_promote_load_over_http(
    mlflow_server: MlflowServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    import mlflow
    from mlflow import MlflowClient

    from r2adapter.config import settings

    dataset = served_champion(mlflow_server, tmp_path_factory)
    print(f"index + label + train + promote through the server: {mlflow_server.timings}")
    c = MlflowClient(tracking_uri=mlflow_server.url, registry_uri=mlflow_server.url)
    v = c.get_model_version_by_alias("r2a-router-embed", "champion")
    assert v.status == "READY" and v.tags["dataset"] == Path(dataset).name
    assert str(c.get_model_version_by_alias("r2a-router-embed", "candidate").version) == v.version
    exp = c.get_experiment_by_name("r2a-router")
    assert exp.artifact_location.startswith("mlflow-artifacts:"), exp.artifact_location
    # the artifacts went through the server to its S3 destination, and nowhere else
    stored_in_s3(mlflow_server, "r2a-router-embed", v.version)

    # mlflow.set_tracking_uri also writes MLFLOW_TRACKING_URI into os.environ: keep the
    # session's value to put back, or every later in-process client reads this server
    before = {k: os.environ.get(k) for k in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")}
    mlflow.set_tracking_uri(mlflow_server.url)
    mlflow.set_registry_uri(mlflow_server.url)
    try:
        t0 = time.perf_counter()
        model = mlflow.pyfunc.load_model("models:/r2a-router-embed@champion")
        # the model's signature names its one input column, `query`
        queries = ["Who is the father of the director of the film?", "Where is Paris?"]
        out = model.predict(pd.DataFrame({"query": queries}))
        print(
            f"load models:/r2a-router-embed@champion over HTTP + predict: "
            f"{time.perf_counter() - t0:.1f} s"
        )
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        mlflow.set_tracking_uri(settings().mlflow_uri)
        mlflow.set_registry_uri(settings().mlflow_uri)
    assert os.environ.get("MLFLOW_TRACKING_URI") == before["MLFLOW_TRACKING_URI"]
    assert list(out.columns[:3]) == ["p_dense", "p_graph", "decision"] and len(out) == 2
    assert set(out["decision"]) <= {"dense", "graph"}

    # the project's own reader (what the service calls) finds the same champion
    r = run_cli(["models", "--json"], mlflow_server.env, timeout=120)
    assert r.returncode == 0 and "r2a-router-embed" in r.stdout, r.stderr[-1000:]


def test_down_then_up_keeps_the_registry(mlflow_server: MlflowServer) -> None:
    """Stop and start again (warm: no migration): the champion is still there."""
    from mlflow import MlflowClient

    r = run_cli(["mlflow", "down"], mlflow_server.env, timeout=60)
    assert r.returncode == 0 and "stopped" in r.stdout
    assert run_cli(["mlflow", "status"], mlflow_server.env, timeout=30).stdout.startswith("stopped")
    t0 = time.perf_counter()
    r = run_cli(["mlflow", "up"], mlflow_server.env, timeout=300)
    mlflow_server.timings["warm_start_s"] = time.perf_counter() - t0
    print(f"mlflow server warm restart: {mlflow_server.timings['warm_start_s']:.1f} s: {r.stdout}")
    assert r.returncode == 0 and "healthy" in r.stdout, r.stdout + r.stderr
    c = MlflowClient(tracking_uri=mlflow_server.url, registry_uri=mlflow_server.url)
    if "champion_dataset" in mlflow_server.cache:
        assert c.get_model_version_by_alias("r2a-router-embed", "champion").status == "READY"


def test_port_taken_is_one_line(mlflow_server: MlflowServer) -> None:
    """A second server on the same port refuses in one line naming the setting."""
    env = {**mlflow_server.env, "R2A_MLFLOW_DIR": str(mlflow_server.state / "other")}
    r = run_cli(["mlflow", "up"], env, timeout=60)
    assert r.returncode == 1, r.stdout
    assert r.stderr.count("\n") == 1 and "R2A_MLFLOW_PORT" in r.stderr, r.stderr
