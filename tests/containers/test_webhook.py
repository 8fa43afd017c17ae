"""Promotion pushed, not polled (issue 23, item 4): the MLflow server's registry webhook on
`model_version_alias.created` reaches the serving container (the project image running
`bentoml serve`, host network; R2A_WEBHOOK_SERVE=local serves with `r2a serve` instead),
its champion poll set to 10 minutes so that only the push can explain a swap within
seconds; it answers with the new version within 2 s of the alias moving; bad, stale and
missing signatures are 401, reload nothing and are counted in /metrics; the API key guards
people's paths, not this one. The server keeps its artifacts in S3 (moto's,
tests/containers/mlflow_env.py) and the container has no S3 keys: the champion it serves
came from the bucket through the server."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import _free_port, serving
from tests.containers.mlflow_env import MlflowServer, mlflow_server, served_champion, stored_in_s3

pytestmark = [pytest.mark.containers, pytest.mark.timeout(2400)]

__all__ = ["mlflow_server"]

SECRET = "webhook-secret-of-the-container-tier"
KEY = "people-api-key"
MODEL = "r2a-router-embed"
PUSH_BUDGET_S = 2.0


@pytest.fixture(scope="module")
def service(
    mlflow_server: MlflowServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    from r2adapter.registry import server

    server.up()  # idempotent: an earlier module may have stopped and restarted it
    dataset = served_champion(mlflow_server, tmp_path_factory)
    env = {
        **mlflow_server.env,
        "R2A_ROUTER": "r2a_embed",
        "R2A_SERVE_DATASET": Path(dataset).name,
        "R2A_KWAY": "0",
        "R2A_CHAMPION_POLL_S": "600",  # the fallback poll, far outside the test
        "R2A_WEBHOOK_SECRET": SECRET,
        "R2A_API_KEY": KEY,
        "R2A_API_KEY_ALL": "1",
    }
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    if os.environ.get("R2A_WEBHOOK_SERVE", "container") == "local":
        with serving(env, log, timeout=600) as url:
            wid = server.register_webhook(
                f"{url}/webhooks/mlflow", mlflow_server.url, secret=SECRET
            )
            yield {"url": url, "env": env, "log": log, "webhook": wid}
        return
    from components._base import IMAGE

    image = os.environ.get("R2A_IMAGE") or IMAGE  # what `make image` built
    assert docker("image", "inspect", image).returncode == 0, (
        f"image {image} is missing: make image"
    )
    from r2adapter.store.db import database_url

    port = _free_port()
    keep = ("R2A_ROUTER", "R2A_SERVE_DATASET", "R2A_KWAY", "R2A_CHAMPION_POLL_S")
    cenv = {k: env[k] for k in (*keep, "R2A_WEBHOOK_SECRET", "R2A_API_KEY", "R2A_API_KEY_ALL")}
    cenv |= {"R2A_DATABASE_URL": database_url(), "MLFLOW_TRACKING_URI": mlflow_server.url}
    name = f"r2a-webhook-serving-{uuid.uuid4().hex[:8]}"
    args = ["run", "-d", "--name", name, "--network", "host"]
    for k, v in cenv.items():
        args += ["-e", f"{k}={v}"]
    args += [image, "bentoml", "serve", "serving.service:R2AService"]
    args += ["--host", "127.0.0.1", "--port", str(port)]
    r = docker(*args, timeout=120)
    assert r.returncode == 0, r.stderr
    url = f"http://127.0.0.1:{port}"
    try:
        t0 = time.perf_counter()
        deadline = time.monotonic() + 900
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            state = docker("inspect", "-f", "{{.State.Running}}", name).stdout.strip()
            assert state == "true", (
                f"serving container exited: {docker('logs', name).stderr[-3000:]}"
            )
            assert time.monotonic() < deadline, docker("logs", name).stderr[-3000:]
            time.sleep(1)
        print(f"\nserving container ready in {time.perf_counter() - t0:.0f} s")
        wid = server.register_webhook(f"{url}/webhooks/mlflow", mlflow_server.url, secret=SECRET)
        yield {"url": url, "env": env, "container": name, "webhook": wid}
    finally:
        logs = docker("logs", name)
        log.write_text(logs.stdout + logs.stderr)
        docker("rm", "-f", name, timeout=60)


def docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def _info(url: str) -> dict[str, Any]:
    r = httpx.post(f"{url}/info", json={}, headers={"Authorization": f"Bearer {KEY}"}, timeout=10)
    assert r.status_code == 200, r.text
    return dict(r.json())


def _metric(url: str, outcome: str) -> float:
    # R2A_API_KEY_ALL: /metrics, like every path but the probes and the webhook, needs the key
    r = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {KEY}"}, timeout=10)
    assert r.status_code == 200, r.text
    text = r.text
    for line in text.splitlines():
        if line.startswith("r2a_webhook_total{") and f'outcome="{outcome}"' in line:
            return float(line.split()[-1])
    return 0.0


def test_promotion_reaches_the_service_within_2s(
    service: dict[str, Any], mlflow_server: MlflowServer
) -> None:
    from mlflow import MlflowClient

    url = service["url"]
    c = MlflowClient(tracking_uri=mlflow_server.url, registry_uri=mlflow_server.url)
    served = _info(url)["router_version"]
    champion = c.get_model_version_by_alias(MODEL, "champion")
    assert served == champion.version
    stored_in_s3(mlflow_server, MODEL, served)  # what the container loaded is in the bucket
    latencies = []
    # four promotions, a new version of the champion's model each time; the first pays the
    # cold path once (MLflow's first delivery, the worker's first reload of a new version:
    # 3.4 s at load ~11), the budget holds for the ones after it
    for _ in range(4):
        src = c.get_model_version_by_alias(MODEL, "champion")
        # MLflow 3: the source `models:/<model id>` needs that id beside it
        model_id = src.model_id or src.source.removeprefix("models:/").split("/")[0]
        new = c.create_model_version(
            MODEL, src.source, run_id=src.run_id, tags=src.tags, model_id=model_id
        )
        deadline = time.monotonic() + 60
        while c.get_model_version(MODEL, new.version).status != "READY":
            assert time.monotonic() < deadline
            time.sleep(0.2)
        t0 = time.perf_counter()
        c.set_registered_model_alias(MODEL, "champion", new.version)
        while (v := _info(url)["router_version"]) != new.version:
            assert time.perf_counter() - t0 < 30, f"still serving v{v} after 30 s: no push"
            time.sleep(0.05)
        latencies.append(time.perf_counter() - t0)
    mlflow_server.timings["webhook_push_s"] = max(latencies[1:])
    stored_in_s3(mlflow_server, MODEL, new.version)  # and what it reloaded last
    print(f"alias moved -> service answers with it: {[round(x, 2) for x in latencies]} s")
    assert latencies[0] < 30, latencies  # the poll is 600 s: only the push explains it
    assert max(latencies[1:]) <= PUSH_BUDGET_S, latencies
    assert _metric(url, "reloaded") >= 4


def _post(url: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(
        f"{url}/webhooks/mlflow",
        content=body,
        headers={"Content-Type": "application/json", **headers},
        timeout=30,
    )


def test_bad_stale_missing_signature_401_counted_no_reload(service: dict[str, Any]) -> None:
    from mlflow.webhooks.delivery import _generate_hmac_signature

    url = service["url"]
    before = _info(url)["router_version"]
    payload = json.dumps(
        {
            "entity": "model_version_alias",
            "action": "created",
            "data": {"name": MODEL, "alias": "champion", "version": "1"},
        }
    )
    counts = {o: _metric(url, o) for o in ("bad_signature", "stale", "missing_headers")}
    now = str(int(time.time()))
    cases = {
        "bad_signature": (now, _generate_hmac_signature("wrong-secret", "d1", now, payload)),
        "stale": (
            str(int(time.time()) - 3600),
            _generate_hmac_signature(SECRET, "d2", str(int(time.time()) - 3600), payload),
        ),
    }
    for outcome, (ts, sig) in cases.items():
        delivery = "d1" if outcome == "bad_signature" else "d2"
        r = _post(
            url,
            payload.encode(),
            {"X-MLflow-Signature": sig, "X-MLflow-Timestamp": ts, "X-MLflow-Delivery-Id": delivery},
        )
        assert r.status_code == 401 and set(r.json()) == {"error", "field"}, r.text
        assert r.json()["error"].startswith("webhook refused"), r.text  # the receiver's 401
    r = _post(url, payload.encode(), {})
    assert r.status_code == 401
    assert _metric(url, "bad_signature") == counts["bad_signature"] + 1
    assert _metric(url, "stale") == counts["stale"] + 1
    assert _metric(url, "missing_headers") == counts["missing_headers"] + 1
    assert _info(url)["router_version"] == before  # nothing reloaded

    # a correctly signed delivery needs no API key (the path authenticates by signature)...
    ts, delivery = str(int(time.time())), str(uuid.uuid4())
    sig = _generate_hmac_signature(SECRET, delivery, ts, payload)
    ok = _post(
        url,
        payload.encode(),
        {"X-MLflow-Signature": sig, "X-MLflow-Timestamp": ts, "X-MLflow-Delivery-Id": delivery},
    )
    assert ok.status_code == 200 and ok.json()["reloaded"] is True, ok.text
    # ...while people's paths still do
    assert httpx.post(f"{url}/reload", json={}, timeout=10).status_code == 401
