"""The retraining CronJob's container from the rendered cronjob overlay (dev with the
optional k8s/components/retrain-cronjob), run with docker as written (image, command, the
ConfigMap's environment, user, securityContext, read-only root with its emptyDirs, the
projected service-account token as a read-only file at its mount path), up to where it
contacts Kubeflow: the real `kfp.Client` in the image sends to a stand-in of the KFP REST
API on localhost (tests/containers/kfp_standin.py), and what arrived is checked: the
`Authorization: Bearer` header with the projected token on every request, the run's
service account (r2a-pipeline), the run with its parameters and the pipeline spec of
pipelines/retrain.yaml, and, with `--recurring` and the CronJob's own schedule, the
recurring run with KFP's six-field cron (k8s/base/recurring-run.yaml)."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT
from tests.containers.conftest import Containers, one, pod_container
from tests.containers.kfp_standin import API, KfpStandIn
from tests.containers.podrun import docker_run_args

pytestmark = pytest.mark.containers


@pytest.fixture
def kfp_api() -> Iterator[KfpStandIn]:
    s = KfpStandIn().start()
    yield s
    s.stop()


def _projected_token(folder: Path, pod: dict[str, Any]) -> tuple[dict[str, str], str]:
    """What the kubelet projects for the pod's token volume: a JWT for the volume's audience
    in the file its `path` names, readable by the pod's fsGroup. Returns the volume → host
    folder mapping and the token."""
    (volume,) = [v for v in pod["volumes"] if "projected" in v]
    (source,) = volume["projected"]["sources"]
    sa = source["serviceAccountToken"]

    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    exp = int(time.time()) + int(sa["expirationSeconds"])
    claims = {"aud": [sa["audience"]], "exp": exp, "sub": "system:serviceaccount:r2a-retrain"}
    token = f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / sa["path"]).write_text(token)
    folder.chmod(0o755)
    (folder / sa["path"]).chmod(0o644)
    return {volume["name"]: str(folder)}, token


def _run_to_exit(
    containers: Containers,
    rendered: dict[str, list[dict[str, Any]]],
    url: str,
    extra: list[str],
    token_dir: Path,
) -> tuple[str, int, float, str]:
    objs = rendered["cronjob"]
    cron = one(objs, "CronJob", "r2a-retrain")
    c = pod_container(cron, "submit")
    mounts, token = _projected_token(
        token_dir, cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    )
    # the ConfigMap's KFP_HOST is the in-cluster address; here it is the stand-in's
    run = docker_run_args(cron, c, objs, env_overrides={"KFP_HOST": url}, mounts=mounts)
    name = containers.run("retrain", *run.args, *extra)
    t0 = time.monotonic()
    deadline = t0 + float(cron["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"])
    while (code := containers.exit_code(name)) is None:
        assert time.monotonic() < deadline, "the Job would pass its activeDeadlineSeconds"
        time.sleep(0.5)
    return containers.logs(name), code, time.monotonic() - t0, token


def _sent_matches_package(sent: dict[str, Any]) -> None:
    """What kfp.Client sent is pipelines/retrain.yaml: its pipeline spec, and (kfp-kubernetes)
    its platform spec, which the client wraps together when the package has both."""
    pipeline, platform = list(yaml.safe_load_all((ROOT / "pipelines" / "retrain.yaml").read_text()))
    if "pipeline_spec" in sent:
        assert sent["platform_spec"] == platform
        sent = sent["pipeline_spec"]
    assert sent == pipeline


def test_cronjob_container_submits_one_run(
    image: str, rendered: dict[str, list[dict[str, Any]]], containers: Containers,
    kfp_api: KfpStandIn, tmp_path: Path,
) -> None:  # fmt: skip
    logs, code, seconds, token = _run_to_exit(containers, rendered, kfp_api.url, [], tmp_path)
    assert code == 0, logs[-3000:]
    # every request authenticated with the projected token; the run as r2a-pipeline
    assert kfp_api.requests and {r.bearer for r in kfp_api.requests} == {token}
    print(f"\nretrain CronJob container: submitted in {seconds:.1f} s")
    assert "run " in logs and "created in experiment r2adapter-retrain" in logs, logs[-2000:]
    (exp,) = kfp_api.experiments.values()
    assert exp["display_name"] == "r2adapter-retrain"
    (run,) = kfp_api.runs.values()
    assert run["experiment_id"] == exp["experiment_id"]
    assert run["display_name"] == "r2a-retrain-2wikimultihopqa"
    assert run["service_account"] == "r2a-pipeline"
    params = run["runtime_config"]["parameters"]
    assert params["dataset"] == "2wikimultihopqa" and params["openie"]
    _sent_matches_package(run["pipeline_spec"])
    paths = [(r.method, r.path) for r in kfp_api.requests]
    assert ("POST", f"{API}/runs") in paths and ("POST", f"{API}/experiments") in paths
    assert not [r for r in kfp_api.requests if r.path.startswith(f"{API}/recurringruns")]


def test_cronjob_container_creates_the_recurring_run(
    image: str, rendered: dict[str, list[dict[str, Any]]], containers: Containers,
    kfp_api: KfpStandIn, tmp_path: Path,
) -> None:  # fmt: skip
    cron = one(rendered["cronjob"], "CronJob", "r2a-retrain")
    schedule = cron["spec"]["schedule"]
    extra = ["--recurring", schedule]
    logs, code, _, token = _run_to_exit(containers, rendered, kfp_api.url, extra, tmp_path)
    assert code == 0, logs[-3000:]
    assert kfp_api.requests and {r.bearer for r in kfp_api.requests} == {token}
    (job,) = kfp_api.recurring.values()
    assert job["service_account"] == "r2a-pipeline"
    documented = yaml.safe_load((ROOT / "k8s" / "base" / "recurring-run.yaml").read_text())
    assert job["trigger"]["cron_schedule"]["cron"] == documented["cron_expression"]
    assert job["display_name"] == documented["job_name"]
    assert int(job["max_concurrency"]) == documented["max_concurrency"]
    assert job["no_catchup"] is True
    assert job["runtime_config"]["parameters"]["dataset"] == documented["parameters"]["dataset"]
    _sent_matches_package(job["pipeline_spec"])


def test_cronjob_container_fails_clearly_without_kubeflow(
    image: str, rendered: dict[str, list[dict[str, Any]]], containers: Containers,
    tmp_path: Path,
) -> None:  # fmt: skip
    from r2adapter.processes import free_port

    url = f"http://127.0.0.1:{free_port()}"
    logs, code, seconds, _ = _run_to_exit(containers, rendered, url, [], tmp_path)
    assert code == 2, logs[-2000:]
    assert "error: KFP API at http://127.0.0.1:" in logs
    print(f"\nretrain CronJob container without Kubeflow: exit 2 after {seconds:.1f} s")
