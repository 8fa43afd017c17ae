"""Issue 44's service probes, kept as tests, over real HTTP against `r2a serve` on a real
MLflow store (sqlite, opened anew for each request so that it can be taken away) and the
test run's Postgres: the last good champion kept when the alias points at a broken version
(backed off, reported in /info, /metrics and one log line) or disappears, /reload within
the error contract while the registry does not answer, the service's INFO lines in its
log, no host or port in a body, in-flight requests failing fast when the database goes,
and one WARNING line an interval for a dependency that is down."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
import typing as t
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mlflow import MlflowClient

from serving.errors import scrub
from tests.conftest import served_store, serving

Q = {"query": "Who is the father of the director of the film?"}
MODEL = "r2a-router"


@pytest.fixture(scope="module")
def svc(
    mini_indexed: str,
    pg_env: dict[str, str],
    champion_store: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, t.Any]]:
    tmp = tmp_path_factory.mktemp("hard3")
    db = tmp / "mlflow" / "mlflow.db"
    env = {
        **pg_env,
        "MLFLOW_TRACKING_URI": served_store(champion_store, db.parent),
        "MLFLOW_SQLALCHEMYSTORE_POOLCLASS": "NullPool",  # the store file opened per request
        "R2A_SERVE_DATASET": "musmini",
        "R2A_KWAY": "0",
        "R2A_CHAMPION_POLL_S": "1",
        "R2A_LOAD_BACKOFF_S": "600",
        "R2A_MODEL_CACHE": str(tmp / "models"),
        "R2A_LLM_BASE_URL": "http://127.0.0.1:9/v1",  # no LLM: nothing here needs one
        "R2A_LLM_MODEL": "none",
    }
    log = tmp / "serve.log"
    registry = MlflowClient(env["MLFLOW_TRACKING_URI"], env["MLFLOW_TRACKING_URI"])
    good = str(registry.get_model_version_by_alias(MODEL, "champion").version)
    with serving(env, log) as url:
        yield {"url": url, "log": log, "tmp": tmp, "db": db, "registry": registry, "good": good}


def post(svc: dict[str, t.Any], path: str, body: object = None) -> httpx.Response:
    return httpx.post(f"{svc['url']}{path}", json=body or {}, timeout=60)


def info(svc: dict[str, t.Any]) -> dict[str, t.Any]:
    r = post(svc, "/info")
    assert r.status_code == 200, r.text
    return t.cast(dict[str, t.Any], r.json())


def metric(svc: dict[str, t.Any], name: str) -> float:
    text = httpx.get(f"{svc['url']}/metrics", timeout=30).text
    m = re.search(rf'^{name}\{{[^}}]*router="r2a"[^}}]*\}} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def log_lines(svc: dict[str, t.Any], needle: str) -> list[str]:
    return [x for x in Path(svc["log"]).read_text(errors="replace").splitlines() if needle in x]


def until(check: t.Callable[[], bool], limit_s: float = 15) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if check():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.integration
def test_the_service_info_lines_are_in_its_log(svc: dict[str, t.Any]) -> None:
    assert log_lines(svc, f"serving r2a champion v{svc['good']}"), "no champion line"
    assert log_lines(svc, "[INFO] [entry_service")


@pytest.mark.integration
def test_a_broken_champion_is_backed_off_and_the_good_one_serves(
    svc: dict[str, t.Any],
) -> None:
    reg, good = svc["registry"], svc["good"]
    folder = svc["tmp"] / "broken"
    folder.mkdir()
    (folder / "MLmodel").write_text("flavors: {}\n")  # a model no flavour can load
    broken = str(reg.create_model_version(MODEL, source=str(folder)).version)
    reg.set_registered_model_alias(MODEL, "champion", broken)
    try:
        assert until(lambda: bool(info(svc).get("failed_versions")))
        t0 = time.monotonic()
        while time.monotonic() - t0 < 5:  # five polls and five /reloads
            r = post(svc, "/route", Q)
            assert r.status_code == 200 and r.json()["router_version"] == good, r.text
            assert post(svc, "/reload").status_code == 200
            time.sleep(1)
        body = info(svc)
        assert body["router_version"] == good
        assert body["failed_versions"]["r2a"]["version"] == broken
        assert body["failed_versions"]["r2a"]["attempts"] == 1  # not retried every poll
        assert body["failed_versions"]["r2a"]["retry_in_s"] > 500
        assert f"v{broken} failed to load" in body["champion_error"]
        assert f"v{good} (the last good one) serves" in body["champion_error"]
        assert metric(svc, "r2a_champion_load_failures_total") == 1
        assert metric(svc, "r2a_champion_stale") == 1
        assert len(log_lines(svc, f"champion v{broken} failed to load")) == 1
        # one cached copy of the broken version, none in the service's temp folder
        assert sorted(p.name for p in (svc["tmp"] / "models" / MODEL).iterdir()) == sorted(
            {f"v{good}", f"v{broken}"}
        )
    finally:
        reg.set_registered_model_alias(MODEL, "champion", good)
    assert until(lambda: info(svc)["champion_error"] is None)
    assert info(svc)["failed_versions"] is None and metric(svc, "r2a_champion_stale") == 0


@pytest.mark.integration
def test_a_deleted_alias_keeps_the_champion_serving(svc: dict[str, t.Any]) -> None:
    reg, good = svc["registry"], svc["good"]
    reg.delete_registered_model_alias(MODEL, "champion")
    try:
        assert until(lambda: "alias is gone" in (info(svc)["champion_error"] or ""))
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3:  # three polls
            r = post(svc, "/route", Q)
            assert r.status_code == 200 and r.json()["router_version"] == good, r.text
            assert httpx.get(f"{svc['url']}/readyz").status_code == 200
            time.sleep(0.3)
        body = info(svc)
        assert f"v{good} (the last good one) serves" in body["champion_error"]
        assert metric(svc, "r2a_champion_stale") == 1
        assert len(log_lines(svc, "champion alias is gone")) == 1
    finally:
        reg.set_registered_model_alias(MODEL, "champion", good)
    assert until(lambda: info(svc)["champion_error"] is None, 5)  # no reload: the same v


@pytest.mark.integration
def test_reload_while_the_registry_is_away_is_503_within_the_contract(
    svc: dict[str, t.Any],
) -> None:
    db: Path = svc["db"]
    away = db.with_suffix(".away")
    os.replace(db, away)
    db.mkdir()  # the store cannot be opened: every registry call fails
    try:
        t0 = time.monotonic()
        r = post(svc, "/reload")
        took = time.monotonic() - t0
        assert r.status_code == 503 and r.headers["retry-after"], r.text
        assert set(r.json()) == {"error", "field"} and "registry" in r.json()["error"]
        assert took < 5, took
        assert post(svc, "/route", Q).status_code == 200
        assert httpx.get(f"{svc['url']}/readyz").status_code == 200
    finally:
        shutil.rmtree(db)
        os.replace(away, db)
    assert until(lambda: post(svc, "/reload").status_code == 200, 10)
    assert info(svc)["ready"] is True  # /reload answers what /info does (no "ready": null)


@pytest.mark.unit
def test_no_host_or_port_survives_scrub() -> None:
    raw = (
        "r2a registry error: MLflow registry error: API request to endpoint /api/2.0/mlflow/"
        "registered-models/alias failed with exception HTTPConnectionPool(host='127.0.0.1', "
        "port=5055): Max retries exceeded; db.internal:5432 refused; 10.0.0.7 and "
        "localhost:3000 and [::1]:80 down"
    )
    out = scrub(raw)
    for leak in ("127.0.0.1", "5055", "db.internal", "5432", "10.0.0.7", "3000", "::1"):
        assert leak not in out, out
    kept = "graph F1 0.512 < champion 0.600 (v1.2.3, r2a-router-kway v12, models.py, 3:30)"
    assert scrub(kept) == kept


@pytest.mark.integration
def test_database_loss_fails_in_flight_requests_fast_and_logs_once(
    svc: dict[str, t.Any],
) -> None:
    """Runs last in this module: stops the session's Postgres and starts it again."""
    from r2adapter.store import embedded

    body = {**Q, "mode": "dense"}
    assert post(svc, "/retrieve", body).status_code == 200
    warnings_before = len(log_lines(svc, "WARNING"))
    stop = threading.Event()
    late: list[tuple[float, int]] = []  # (seconds after the database went, status)
    gone = [0.0]

    def client() -> None:
        while not stop.is_set():
            t0 = time.monotonic()
            r = post(svc, "/retrieve", body)
            if gone[0] and t0 >= gone[0]:
                late.append((time.monotonic() - t0, r.status_code))

    threads = [threading.Thread(target=client, daemon=True) for _ in range(8)]
    for th in threads:
        th.start()
    time.sleep(1)
    try:
        embedded.down()
        gone[0] = time.monotonic()
        time.sleep(10)
    finally:
        stop.set()
        for th in threads:
            th.join(30)
        embedded.up()
    assert late and all(code in (503, 200) for _, code in late), late[:5]
    slowest = max(s for s, _ in late)
    assert slowest < 1.5, sorted(late)[-5:]
    warnings = log_lines(svc, "WARNING")[warnings_before:]
    assert len(warnings) <= 3, json.dumps(warnings[:6])
    assert until(lambda: post(svc, "/retrieve", body).status_code == 200, 10)
