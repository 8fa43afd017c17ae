"""The BentoML service over real HTTP: `bentoml serve` on localhost with the real database
and a registered champion. Every endpoint, bad input, the database stopped mid-run and
restarted, and a champion switch while serving."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import run_cli, served_store, serving

pytestmark = pytest.mark.integration  # a real `bentoml serve` on the embedded Postgres

QUESTION = "Who is the father of the director of the film?"


@pytest.fixture(scope="module")
def service(
    mini_indexed: str,
    pg_env: dict[str, str],
    champion_store: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, str]]:
    tmp = tmp_path_factory.mktemp("svc")
    env = {
        **pg_env,
        "MLFLOW_TRACKING_URI": served_store(champion_store, tmp / "mlflow"),
        "R2A_SERVE_DATASET": "musmini",
        "R2A_CHAMPION_POLL_S": "1",
        "R2A_REWRITE_BUDGET_S": "3",
    }
    log = tmp / "serve.log"
    with serving(env, log) as url:
        yield {"url": url, "env": json.dumps(env), "log": str(log)}


def post(svc: dict[str, str], path: str, body: object, timeout: float = 60) -> httpx.Response:
    return httpx.post(f"{svc['url']}{path}", json=body, timeout=timeout)


def test_health_ready_and_metrics(service: dict[str, str]) -> None:
    assert httpx.get(f"{service['url']}/healthz").status_code == 200
    assert httpx.get(f"{service['url']}/readyz").status_code == 200
    post(service, "/route", {"query": QUESTION})
    metrics = httpx.get(f"{service['url']}/metrics").text
    assert "r2a_route_total" in metrics and "r2a_graph_usage_ratio" in metrics


def test_route(service: dict[str, str]) -> None:
    r = post(service, "/route", {"query": QUESTION})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["router_version"] == "1" and body["query"] == QUESTION
    assert 0 <= body["p_dense"] <= 1 and 0 <= body["p_graph"] <= 1
    # the champion's rule on the scores it returned: graph iff p_graph − p_dense > τ (eq. 4),
    # rewrite iff graph and p_graph < ε, every graph-bound query at ε ≥ 1 (eq. 7)
    graph = body["p_graph"] - body["p_dense"] > body["tau"]
    assert body["decision"] == ("graph" if graph else "dense")
    eps = body["epsilon"]
    assert body["rewrite"] == (graph and (eps >= 1.0 or body["p_graph"] < eps))


@pytest.mark.parametrize("mode", ["dense", "graph", "catrag", "auto"])
def test_retrieve_modes(service: dict[str, str], mode: str) -> None:
    r = post(service, "/retrieve", {"query": QUESTION, "mode": mode, "top_k": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body["passages"]) == 3 and body["dataset"] == "musmini"
    assert set(body["timings_ms"]) == {"route", "rewrite", "retrieve", "answer"}
    if mode != "auto":
        assert body["decision"] == mode and body["rewritten"] is False


def test_adr_modes_and_no_hypergraph_is_503(
    service: dict[str, str], mini_indexed: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """An ADR mode on a dataset whose index has no hypergraph: 503 with Retry-After and a
    JSON body naming the command that builds it (a second service, serving such a
    dataset); on the served dataset, once built, the operator's passages."""
    from tests.conftest import make_mini_musique

    env = json.loads(service["env"])
    tmp = tmp_path_factory.mktemp("nohg")
    path = make_mini_musique(tmp / "musnohg", n=6)
    r = run_cli(["index", "--dataset", path, "--openie", "precomputed"], env, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    with serving({**env, "R2A_SERVE_DATASET": "musnohg"}, tmp / "serve.log") as url:
        r = httpx.post(f"{url}/retrieve", json={"query": QUESTION, "mode": "adr_simple"},
                       timeout=60)  # fmt: skip
        assert r.status_code == 503 and r.headers["Retry-After"], r.text
        body = r.json()
        assert body["field"] is None and "r2a index --dataset musnohg --adr" in body["error"]
        assert httpx.post(f"{url}/retrieve", json={"query": QUESTION}, timeout=60).is_success
    r = run_cli(["index", "--dataset", mini_indexed, "--openie", "precomputed", "--adr"], env)
    assert r.returncode == 0, r.stderr[-2000:]
    r = post(service, "/retrieve", {"query": QUESTION, "mode": "adr_complex", "top_k": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["decision"] == "adr_complex" and 0 < len(body["passages"]) <= 3


def test_rewrite_and_answer(service: dict[str, str]) -> None:
    r = post(service, "/rewrite", {"query": QUESTION})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["rewritten"].startswith(QUESTION)
    assert (body["fallback"] is None) == body["ok"]
    # the local LLM loads in the background: /readyz/answer says when /answer can answer
    deadline = time.time() + 180
    while httpx.get(f"{service['url']}/readyz/answer").status_code != 200:
        assert time.time() < deadline, "the answer path was not ready in 180 s"
        time.sleep(1)
    r = post(service, "/answer", {"query": QUESTION, "mode": "dense", "top_k": 2}, timeout=120)
    assert r.status_code == 200, r.text
    assert isinstance(r.json()["answer"], str) and r.json()["answer"]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/route", {"query": ""}, "query"),
        ("/route", {"query": "   "}, "query"),
        ("/route", {"query": "x" * 2001}, "query"),
        ("/route", {"query": 42}, "query"),
        ("/route", {}, "query"),
        ("/retrieve", {"query": "q", "mode": "bm42"}, "mode"),
        ("/retrieve", {"query": "q", "top_k": 0}, "top_k"),
        ("/retrieve", {"query": "q", "top_k": 101}, "top_k"),
        ("/retrieve", {"query": "q", "top_k": "5"}, "top_k"),
        ("/retrieve", {"query": "q", "top_k": True}, "top_k"),
        ("/retrieve", {"query": "q", "top_k": None}, "top_k"),
        ("/retrieve", {"query": "q", "mode": None}, "mode"),
        ("/route_batch", {"queries": ["fine", " "]}, "queries[1]"),
        ("/answer", {"query": ["a list"]}, "query"),
        ("/rewrite", {"query": None}, "query"),
    ],
)
def test_bad_input_is_422_with_json(
    service: dict[str, str], path: str, body: object, field: str
) -> None:
    r = post(service, path, body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and r.json()["error"]


def test_champion_switch_while_serving(service: dict[str, str]) -> None:
    env = json.loads(service["env"])
    r = run_cli(["train", "--dataset", "musmini", "--epochs", "2"], env, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    import mlflow

    uri = env["MLFLOW_TRACKING_URI"]  # this module's store, not the session's
    mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri).set_registered_model_alias(
        "r2a-router", "champion", "2"
    )
    deadline = time.time() + 60
    versions = set()
    while time.time() < deadline:
        r = post(service, "/route", {"query": QUESTION})
        assert r.status_code == 200, r.text  # no downtime while the model is swapped
        versions.add(r.json()["router_version"])
        if r.json()["router_version"] == "2":
            break
        time.sleep(0.3)
    assert "2" in versions


def test_database_down_then_back(service: dict[str, str]) -> None:
    """Runs last in this module: stops the session's Postgres and starts it again."""
    from r2adapter.store import embedded

    embedded.down()
    try:
        r = post(service, "/retrieve", {"query": QUESTION, "mode": "dense"})
        assert r.status_code == 503 and "error" in r.json(), r.text
        assert "postgresql://" not in r.text and "127.0.0.1" not in r.text
        assert httpx.get(f"{service['url']}/healthz").status_code == 200
        assert httpx.get(f"{service['url']}/readyz").status_code == 503
        r = post(service, "/route", {"query": QUESTION})
        assert r.status_code == 200, r.text  # decided in memory (two-way or k-way champion)
    finally:
        embedded.up()
    deadline = time.time() + 30
    while time.time() < deadline:
        r = post(service, "/retrieve", {"query": QUESTION, "mode": "dense"})
        if r.status_code == 200:
            break
        time.sleep(1)
    assert r.status_code == 200, r.text
