"""The serving Deployment of the rendered dev overlay, started with docker exactly as written
(tests/containers/podrun.py: image, command, the environment from the ConfigMap and the
Secret, ports, user, securityContext with a read-only root and tmpfs for its emptyDirs,
--cap-drop ALL, no-new-privileges, the CPU and memory limits), its startup, readiness and
liveness probes polled as the kubelet polls them; then /route and /retrieve with the API key
answer 200, and SIGTERM ends it within terminationGracePeriodSeconds.

What stands in for the cluster: the real Secret (created out of band, k8s/README.md) holds
the test run's Postgres URL (tests/conftest.py `pg_env`, on 127.0.0.1) and a fresh API key;
the ConfigMap's in-cluster MLflow address is replaced by the test run's MLflow server
(tests/containers/mlflow_env.py), through which a router champion was trained and
promoted on the MuSiQue subset; the server keeps its artifacts in S3 (moto's), so the
version the container answers with came from the bucket. The container shares the host's
network (no bridge here).
"""

from __future__ import annotations

import secrets
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from r2adapter.route.kinds import TRAINED_ROUTERS
from tests.conftest import train_champion
from tests.containers.conftest import Containers, docker, one, pod_container
from tests.containers.mlflow_env import MlflowServer, mlflow_server, stored_in_s3
from tests.containers.podrun import PodRun, docker_run_args, wait_probe

pytestmark = pytest.mark.containers

__all__ = ["mlflow_server"]  # the fixture, imported for this module

QUESTION = "Who is the father of the director of the film?"


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


@pytest.fixture(scope="module")
def champion(mlflow_server: MlflowServer, mini_indexed: str) -> str:
    """A router champion (kind r2a, the service's default) trained and promoted through the
    MLflow server on the indexed MuSiQue subset."""
    t0 = time.perf_counter()
    train_champion(mini_indexed, mlflow_server.env)
    print(f"\nchampion through the MLflow server: {time.perf_counter() - t0:.0f} s")
    return Path(mini_indexed).name


def _start(
    containers: Containers,
    rendered: dict[str, list[dict[str, Any]]],
    srv: MlflowServer,
    api_key: str,
) -> tuple[str, PodRun, dict[str, Any], float]:
    from r2adapter.store import embedded

    objs = rendered["dev"]
    dep = one(objs, "Deployment", "r2a-serving")
    c = pod_container(dep, "serving")
    port = c["ports"][0]["containerPort"]
    assert _port_free(port), f"port {port} (the manifest's containerPort) is taken on this host"
    run = docker_run_args(
        dep,
        c,
        objs,
        secret_values={
            # the Secret's other keys (Postgres, MLflow's store, the LLM, the webhook's
            # signing key, object storage) are not read on this path: a stand-in each
            **{k: "unused-here" for k in one(objs, "Secret", "r2a-secrets")["stringData"]},
            "R2A_DATABASE_URL": embedded.url(),
            "R2A_API_KEY": api_key,
        },
        env_overrides={"MLFLOW_TRACKING_URI": srv.url},
    )
    assert run.env["R2A_API_KEY"] == api_key and "CHANGE_ME" not in run.env.values()
    name = containers.run("serving", *run.args)
    return name, run, dep, time.monotonic()


def test_serving_deployment_as_written(
    image: str,
    rendered: dict[str, list[dict[str, Any]]],
    containers: Containers,
    mlflow_server: MlflowServer,
    champion: str,
) -> None:
    key = secrets.token_hex(16)
    name, run, dep, t0 = _start(containers, rendered, mlflow_server, key)
    exited = lambda: containers.exit_code(name)  # noqa: E731
    startup = wait_probe(name, run, "startupProbe", t0, exited)
    ready = wait_probe(name, run, "readinessProbe", t0, exited)
    live = wait_probe(name, run, "livenessProbe", t0, exited)
    budget = (
        run.probes["startupProbe"]["periodSeconds"] * run.probes["startupProbe"]["failureThreshold"]
    )
    print(
        f"\nserving container: startup probe passed at {startup:.0f} s (budget {budget} s),"
        f" ready at {ready:.0f} s, live at {live:.0f} s"
    )
    url = f"http://127.0.0.1:{run.ports['http']}"
    auth = {"Authorization": f"Bearer {key}"}
    r = httpx.post(f"{url}/route", json={"query": QUESTION}, headers=auth, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["decision"] in {"dense", "graph"} and r.json()["router_version"]
    # the two-way champion answered (R2A_ROUTER's model; "router" names the k-way one, which
    # this registry has none of): the version it loaded is in the bucket
    assert r.json().get("router") is None, r.json()
    model = TRAINED_ROUTERS[run.env.get("R2A_ROUTER", "r2a")].model
    stored_in_s3(mlflow_server, model, r.json()["router_version"])
    r = httpx.post(
        f"{url}/retrieve", json={"query": QUESTION, "mode": "dense", "top_k": 3}, headers=auth,
        timeout=60,
    )  # fmt: skip
    assert r.status_code == 200, r.text
    assert r.json()["mode"] == "dense" and len(r.json()["passages"]) == 3
    # The probes above carried no key; the key guards /reload, and a caller holding another
    # key (a Secret with a wrong one is the same pod: it starts, its probes pass) gets 401.
    bad = httpx.post(f"{url}/reload", headers={"Authorization": "Bearer wrong"}, timeout=60)
    assert bad.status_code == 401
    grace = dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    t_stop = time.monotonic()
    assert docker("kill", "--signal", "TERM", name, timeout=30).returncode == 0
    while containers.exit_code(name) is None:
        assert time.monotonic() - t_stop < grace, f"still running {grace} s after SIGTERM"
        time.sleep(0.2)
    print(f"serving container: exited {time.monotonic() - t_stop:.1f} s after SIGTERM")
