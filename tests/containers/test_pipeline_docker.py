"""The retraining pipeline in containers (issue 23, item 2): `retrain.local_pipeline` under
kfp.local.DockerRunner (pipelines/local.py), every component in the project image with the
host's network, on the MuSiQue subset (60 questions, precomputed OpenIE), from the data to
models registered and promoted (`champion`) in an MLflow server of this module's own, which
keeps their files in S3 (moto's, tests/containers/mlflow_env.py); its figures equal the
SubprocessRunner run's on the same data. Then the faults: a component
failing in its container fails the run naming it, with its log; the MLflow server down: the
first step that calls it fails clearly and no alias moves."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipelines import local as kfp_local
from r2adapter.loop import ROUTERS
from tests.conftest import ROOT, environ, make_mini_musique
from tests.containers.mlflow_env import BUCKET, MlflowServer, own_mlflow_server, stored_in_s3

pytestmark = [pytest.mark.containers, pytest.mark.pipeline_docker, pytest.mark.timeout(7200)]

ARGS: dict[str, Any] = {
    "openie": "precomputed",
    "epochs": 2,  # the routers' other settings are params.yaml's (as `r2a train` reads them)
    "eval_every_n_steps": 0,
    "tau_step": 0.0,
    "n_label_shards": 2,
    "n_index_shards": 2,
}
# a failed MLflow call gives up in seconds, not after minutes of retries (both runs: the
# environment is part of kfp.local's cache key)
FAST_FAIL = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
# timings are not a function of the data; neither is the k-way branch (its labels are every
# strategy's measured milliseconds)
TIMING = re.compile(r"(^|_)(ms|seconds|latency|time|timings?|p50|p95|qps|kway)(_|$)")


def _per_router(task: str) -> list[str]:
    return [task if i == 0 else f"{task}-{i + 1}" for i in range(len(ROUTERS))]


COMPARED = ["validate", "index", "label-merge", "evaluate"]
COMPARED += [t for task in ("train", "register", "promote") for t in _per_router(task)]


def _home(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "params.yaml", path / "params.yaml")
    path.chmod(0o777)  # the image's user (10001) writes labels/, reports/, .cache/ here
    return path


def _outputs(root: Path, task: str) -> dict[str, Any]:
    found = sorted(root.glob(f"*/{task}/executor_output.json"), key=lambda p: p.stat().st_mtime)
    assert found, f"no output of {task} under {root}"
    return json.loads(found[-1].read_text())


def _figures(root: Path, task: str) -> dict[str, float]:
    """A task's numeric Metrics, timings left out."""
    arts = _outputs(root, task).get("artifacts", {}).get("metrics", {}).get("artifacts", [])
    meta = arts[0]["metadata"] if arts else {}
    return {
        k: float(v)
        for k, v in meta.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and not TIMING.search(k)
    }


@pytest.fixture(scope="module")
def mlflow_server(
    pg_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MlflowServer]:
    """This module's own registry (a server with a database of its own): the session's
    server holds the other modules' routers, and the pipeline's versions and gate are
    compared with a SubprocessRunner run that starts from an empty registry."""
    with own_mlflow_server(pg_env, tmp_path_factory.mktemp("mlflow-pipeline")) as srv:
        yield srv


@pytest.fixture(scope="module")
def runs(
    mlflow_server: MlflowServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """The same pipeline on the same data twice: SubprocessRunner (a sqlite registry of its
    own), then DockerRunner (the MLflow server)."""
    from r2adapter.registry import server

    server.up()  # idempotent: an earlier module may have restarted it
    folder = tmp_path_factory.mktemp("ds")
    folder.chmod(0o755)
    dataset = make_mini_musique(folder / "kfpdock")
    Path(dataset).chmod(0o755)
    args = {"dataset": dataset, **ARGS}

    sub_home = _home(tmp_path_factory.mktemp("home-sub"))
    sub_env = {
        "R2A_HOME": str(sub_home),
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path_factory.mktemp('mlflow-sub')}/mlflow.db",
        **FAST_FAIL,
    }
    with environ(sub_env, unset=("KUBERNETES_SERVICE_HOST",)):
        sub = kfp_local.run("subprocess", tmp_path_factory.mktemp("kfp-sub"), args)
    print(f"\nSubprocessRunner run: {sub.seconds:.0f} s")

    dock_home = _home(tmp_path_factory.mktemp("home-docker"))
    dock_env = {"R2A_HOME": str(dock_home), "MLFLOW_TRACKING_URI": mlflow_server.url, **FAST_FAIL}
    dock_root = tmp_path_factory.mktemp("kfp-docker")
    dock = kfp_local.run("docker", dock_root, args, env=dock_env, enable_caching=True)
    print(
        f"DockerRunner run: {dock.seconds:.0f} s, {len(dock.containers)} containers,"
        f" artifacts in s3://{BUCKET}/{mlflow_server.prefix}"
    )
    yield {
        "dataset": dataset,
        "args": args,
        "sub": sub,
        "dock": dock,
        "dock_env": dock_env,
        "sub_home": sub_home,
        "dock_home": dock_home,
    }


def test_docker_run_every_component_in_the_image(
    runs: dict[str, Any], mlflow_server: MlflowServer
) -> None:
    from mlflow import MlflowClient

    from components._base import IMAGE

    dock = runs["dock"]
    mlflow_server.timings["docker_pipeline_s"] = dock.seconds
    mlflow_server.timings["subprocess_pipeline_s"] = runs["sub"].seconds
    # one folder per task run (a ParallelFor's iterations each have their own)
    tasks = {
        str(p.parent.relative_to(dock.root)) for p in dock.root.glob("*/**/executor_output.json")
    }
    assert len(dock.containers) == len(tasks) >= 15, (len(dock.containers), sorted(tasks))
    for c in dock.containers:  # one container per task, the project image, its own user
        assert c["image"] == IMAGE and c["exit"] == 0, c
        assert c["user"] in ("10001", "10001:10001", "app"), c
    assert len({c["id"] for c in dock.containers}) == len(dock.containers)

    c = MlflowClient(tracking_uri=mlflow_server.url, registry_uri=mlflow_server.url)
    name = Path(runs["dataset"]).name
    for r, register in zip(ROUTERS, _per_router("register"), strict=True):
        version = _outputs(dock.root, register)["parameterValues"]["version"]
        champion = c.get_model_version_by_alias(r.model, "champion")
        assert champion.version == version and champion.tags["dataset"] == name, r.model
        assert champion.tags["kfp_pipeline_run"], "register did not tag the pipeline run"
        keys = stored_in_s3(mlflow_server, r.model, champion.version)
        print(f"{r.model} v{champion.version}: {len(keys)} files in s3://{BUCKET}")
        assert (
            _outputs(dock.root, _per_router("promote")[ROUTERS.index(r)])["parameterValues"][
                "Output"
            ]
            is True
        )
    # the labels both runs wrote are the same file
    labels = [h / "labels" / f"{name}.jsonl" for h in (runs["sub_home"], runs["dock_home"])]
    assert labels[0].read_bytes() == labels[1].read_bytes()


def test_docker_figures_equal_subprocess_figures(runs: dict[str, Any]) -> None:
    sub, dock = runs["sub"].root, runs["dock"].root
    diffs = {}
    n = 0
    for task in COMPARED:
        a, b = _figures(sub, task), _figures(dock, task)
        if task.startswith("register"):
            a.pop("version", None), b.pop("version", None)  # each registry counts its own
        assert a, f"{task}: no figures"
        n += len(a)
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b or a[k] != pytest.approx(b[k], rel=1e-9, abs=1e-9):
                diffs[f"{task}.{k}"] = (a.get(k), b.get(k))
    md5 = [_outputs(r, "label-merge")["parameterValues"]["md5"] for r in (sub, dock)]
    print(f"compared {n} figures of {len(COMPARED)} tasks; label md5 {md5[0]}")
    assert md5[0] == md5[1]
    assert not diffs, f"SubprocessRunner vs DockerRunner: {diffs}"


def test_component_failing_in_its_container_names_it_with_its_log(
    runs: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    bad = {**runs["args"], "dataset": "no-such-dataset"}
    with pytest.raises(kfp_local.LocalRunFailed) as e:
        kfp_local.run("docker", tmp_path_factory.mktemp("kfp-bad"), bad, env=runs["dock_env"])
    assert e.value.task == "validate"
    assert "\n" not in str(e.value) and "no-such-dataset" in str(e.value), str(e.value)
    assert any("Traceback" in line for line in e.value.log), e.value.log[-10:]


def test_mlflow_server_down_fails_clearly_and_promotes_nothing(
    runs: dict[str, Any], mlflow_server: MlflowServer
) -> None:
    """The same run again with the server stopped: kfp.local's cache serves the steps up to
    the two-way routers' `train` steps (the same inputs); the first step to call MLflow
    fails, and which one that is depends on the cache (the train tasks of the k-way router
    and ADR, `train-3` and `train-4`, are not cached, so they run again; a served two-way
    `train` leaves it to its `register`), never on a step before them."""
    from mlflow import MlflowClient

    from r2adapter.registry import server

    c = MlflowClient(tracking_uri=mlflow_server.url, registry_uri=mlflow_server.url)

    def aliases() -> dict[str, tuple[str, ...]]:
        out = {}
        for r in ROUTERS:
            versions = c.search_model_versions(f"name='{r.model}'")
            out[r.model] = tuple(
                sorted(f"{v.version}:{','.join(sorted(v.aliases))}" for v in versions)
            )
        return out

    before = aliases()
    server.down()
    try:
        with pytest.raises(kfp_local.LocalRunFailed) as e:
            kfp_local.run(
                "docker", runs["dock"].root, runs["args"], env=runs["dock_env"], enable_caching=True
            )
    finally:
        server.up()
    print(f"server down: {e.value}")
    assert re.fullmatch(r"(train|register|promote)(-\d+)?", e.value.task), (
        e.value.task,
        str(e.value),
    )
    text = "\n".join(e.value.log)
    # the one-line message names the MLflow endpoint (its first log line may be urllib3's
    # retry warning, which names it by URL); the log holds the project's own error
    assert "mlflow" in str(e.value).lower(), str(e.value)
    assert "MLflow store unreachable" in text, text[-2000:]
    assert "Connection refused" in text or "ConnectionError" in text or "Max retries" in text, (
        e.value.log[-15:]
    )
    assert aliases() == before, "an alias moved or a version appeared while the server was down"
