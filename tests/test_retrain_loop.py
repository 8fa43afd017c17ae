"""The retraining loop end to end, as a scheduled job runs it: a running `bentoml serve`
serves champion v1; a new version of the data arrives; `r2a retrain --service-url` (a CLI
subprocess) indexes, labels, trains, registers and promotes it and tells the service to
reload; the service then serves v2 and the registry's `champion` alias points at v2. A data
file that does not parse fails the retrain with one line on stderr and changes nothing.

The dataset is its own ("rtmini": the first 30 MuSiQue questions, so the session's
"musmini" is untouched) in its own data folder, with its own MLflow store and R2A_HOME
(params.yaml: the embedding router, seconds to train). The service polls the alias only
every hour here, so the switch it shows comes from the retrain's /reload; it is pointed at
an LLM endpoint that does not answer, so it does not load the local LLM, which nothing here
uses (routing needs none), on the CPUs the retrain needs.

The new data version adds questions over the same corpus whose ids fall in the test split
(the split is a hash of the id): the train and validation labels are those of v1, so the
retrained router cannot do worse than the champion on the gate's metrics and is promoted.
The gate's refusals are tested on crafted metrics elsewhere."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from r2adapter.data.splits import split_of
from r2adapter.loop import CORPORA_STEP, STEPS
from tests.conftest import _free_port, make_mini_musique, run_cli, serving

DATASET = "rtmini"
N = 30  # questions in the second data version
ROUTER = "r2a_embed"  # a linear head over the retrieval embedding: trains in seconds
MODEL = "r2a-router-embed"
HELD_OUT = 2  # test-split questions that only the second data version has
# topk_first: on these 28-30 questions recall_first (the pipeline's rule) labels every
# training question dense, a single class the trainer refuses
PARAMS = """\
label:
  rule: topk_first
router_embedding:
  lr: 3.0e-3
  epochs: 40
  eval_every_n_steps: 10
"""
RETRAIN = [
    "retrain",
    "--dataset",
    DATASET,
    "--openie",
    "precomputed",
    "--router",  # one of the loop's routers (r2adapter/loop.py): the other takes minutes
    ROUTER,
]


def _retrain_env(env: dict[str, str]) -> dict[str, str]:
    """The retrain's own settings: no LLM endpoint (the service's points at nothing), so the
    loop's evaluate step leaves the LLM-router out with a note instead of waiting on it."""
    return {k: v for k, v in env.items() if k != "R2A_LLM_BASE_URL"}


pytestmark = pytest.mark.integration  # Postgres, MLflow and a running service


def _timed(what: str, t0: float) -> None:
    print(f"\n{what}: {time.perf_counter() - t0:.1f} s")  # shown with -s


@pytest.fixture(scope="module")
def loop(pg_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Data v1 retrained into champion v1, and the service serving it."""
    t0 = time.perf_counter()
    tmp = tmp_path_factory.mktemp("retrain")
    home = tmp / "home"
    home.mkdir()
    (home / "params.yaml").write_text(PARAMS)
    folder = Path(make_mini_musique(tmp / "data" / DATASET, N))
    queries_file = folder / f"{DATASET}.json"
    queries = json.loads(queries_file.read_text())
    held = {q["id"] for q in queries if split_of(q["id"]) == "test"}
    held = set(sorted(held)[:HELD_OUT])
    assert len(held) == HELD_OUT
    v1 = json.dumps([q for q in queries if q["id"] not in held])
    v2 = queries_file.read_text()  # all N: v1 and the held-out questions
    queries_file.write_text(v1)
    mlflow_uri = f"sqlite:///{tmp}/mlflow.db"
    env = {
        **pg_env,
        "R2A_HOME": str(home),
        "R2A_DATA_DIR": str(tmp / "data"),
        "MLFLOW_TRACKING_URI": mlflow_uri,
        "R2A_ROUTER": ROUTER,
        "R2A_SERVE_DATASET": DATASET,
        "R2A_CHAMPION_POLL_S": "3600",
        "R2A_LLM_BASE_URL": f"http://127.0.0.1:{_free_port()}/v1",  # nothing listens
        "TQDM_DISABLE": "1",
    }
    r = run_cli(RETRAIN, _retrain_env(env), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"promote: {ROUTER}: champion moved to v1" in r.stdout, r.stdout
    # the loop's steps, in r2adapter/loop.py's order, for this family alone: the others
    # (r2a, kway, adr) and the corpora the families with their own labels train on untouched
    once = {CORPORA_STEP}
    steps = [line.split(":")[0] for line in r.stdout.splitlines() if ": " in line]
    assert [s for s in steps if s in STEPS] == [s for s in STEPS if s not in once], r.stdout
    assert "r2a:" not in r.stdout
    _timed("retrain v1 (index, label, train, promote)", t0)
    t1 = time.perf_counter()
    with serving(env, tmp / "serve.log") as url:
        _timed("service ready", t1)
        yield {
            "url": url,
            "env": env,
            "home": home,
            "mlflow": mlflow_uri,
            "queries_file": queries_file,
            "v2": v2,
        }


def _served(url: str) -> str | None:
    info = httpx.post(f"{url}/info", json={}, timeout=30).json()
    assert info["router"] == ROUTER and info["dataset"] == DATASET, info
    return info["router_version"]


def _registry(uri: str) -> tuple[str, list[str]]:
    """The champion's version and every registered version."""
    import mlflow

    c = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
    champion = str(c.get_model_version_by_alias(MODEL, "champion").version)
    return champion, sorted(str(v.version) for v in c.search_model_versions(f"name='{MODEL}'"))


def test_malformed_data_fails_in_one_line_and_changes_nothing(loop: dict) -> None:
    served, (champion, versions) = _served(loop["url"]), _registry(loop["mlflow"])
    labels = (loop["home"] / "labels" / f"{DATASET}.jsonl").read_text()
    good = loop["queries_file"].read_text()
    loop["queries_file"].write_text(good[: len(good) // 2])  # a truncated file
    try:
        t0 = time.perf_counter()
        r = run_cli([*RETRAIN, "--service-url", loop["url"]], _retrain_env(loop["env"]), 300)
        _timed("failing retrain", t0)
    finally:
        loop["queries_file"].write_text(good)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("error: ") and "malformed JSON" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert _registry(loop["mlflow"]) == (champion, versions)
    assert _served(loop["url"]) == served
    assert (loop["home"] / "labels" / f"{DATASET}.jsonl").read_text() == labels


def test_new_data_version_is_retrained_promoted_and_served(loop: dict) -> None:
    before = _served(loop["url"])
    champion, versions = _registry(loop["mlflow"])
    assert before == champion
    loop["queries_file"].write_text(loop["v2"])  # the new data version arrives
    t0 = time.perf_counter()
    r = run_cli([*RETRAIN, "--service-url", loop["url"]], _retrain_env(loop["env"]), 600)
    _timed("retrain v2 with --service-url", t0)
    assert r.returncode == 0, r.stderr[-2000:]
    new = str(max(int(v) for v in versions) + 1)
    assert "index: version" in r.stdout and f"label: {N} queries" in r.stdout, r.stdout
    assert f"{ROUTER} v{new} registered as candidate" in r.stdout, r.stdout
    assert f"promote: {ROUTER}: champion moved to v{new}" in r.stdout, r.stdout
    assert f"service: now serving {ROUTER} v{new}" in r.stdout, r.stdout

    # the service switched on /reload (it polls only hourly here), without a restart
    assert _served(loop["url"]) == new != before
    assert _registry(loop["mlflow"]) == (new, sorted([*versions, new]))
    routed = httpx.post(f"{loop['url']}/route", json={"query": "Who founded it?"}, timeout=60)
    assert routed.status_code == 200 and routed.json()["router_version"] == new, routed.text

    # the new version was trained on the new data: two more test questions
    import mlflow

    c = mlflow.MlflowClient(tracking_uri=loop["mlflow"], registry_uri=loop["mlflow"])
    runs = {v: c.get_run(c.get_model_version(MODEL, v).run_id).data.params for v in (before, new)}
    assert int(runs[new]["n_test"]) == int(runs[before]["n_test"]) + HELD_OUT
    assert runs[new]["n_train"] == runs[before]["n_train"]
    assert runs[new]["label_md5"] != runs[before]["label_md5"]
    labels = (loop["home"] / "labels" / f"{DATASET}.jsonl").read_text().splitlines()
    assert len(labels) == N
