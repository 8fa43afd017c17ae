"""What a cluster needs of the platform beyond the manifests: the torch build each image
must hold and the GPU trainer's refusal without a GPU (r2adapter/train/accelerator.py);
the pipeline's exit handler recording a run's outcome in a real MLflow store
(r2adapter/registry/pipeline_runs.py, components/record.py); the submission's identity,
through the real kfp.Client against the KFP REST stand-in (tests/containers/kfp_standin.py):
a bearer token from a token file and the run's service account (pipelines/submit.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from r2adapter.errors import R2AError
from r2adapter.train import accelerator
from tests.conftest import ROOT
from tests.containers.kfp_standin import KfpStandIn

pytestmark = pytest.mark.unit


# ---- the torch build and the GPU ------------------------------------------------------------


def test_the_cpu_build_is_recognised_and_the_cuda_one_refused() -> None:
    import torch

    variant, cuda = accelerator.torch_build()
    assert (variant, cuda) == (
        ("cuda", torch.version.cuda) if torch.version.cuda else ("cpu", None)
    )
    if variant != "cpu":
        pytest.skip("this venv holds a CUDA torch")
    assert accelerator.check_build("cpu") == f"torch {torch.__version__} (cpu)"
    with pytest.raises(R2AError, match=r"is the cpu build, not the cuda one: the CUDA wheelhouse"):
        accelerator.check_build("cuda")
    with pytest.raises(R2AError, match="unknown torch variant 'rocm'"):
        accelerator.check_build("rocm")


def test_gpu_task_without_a_usable_gpu_stops_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """R2A_ACCELERATOR=gpu (the pipeline's GPU trainer): a CPU torch names the CUDA image;
    a CUDA torch without a device names the node. Unset: nothing is asked."""
    import torch

    monkeypatch.delenv(accelerator.ENV, raising=False)
    assert accelerator.require_gpu() is None
    monkeypatch.setenv(accelerator.ENV, "gpu")
    if torch.version.cuda is None:
        with pytest.raises(R2AError, match=r"is the CPU build: run this task in the CUDA image"):
            accelerator.require_gpu()
    elif not torch.cuda.is_available():
        with pytest.raises(R2AError, match="no GPU is visible on this node"):
            accelerator.require_gpu()
    else:
        assert accelerator.require_gpu()
        return
    assert accelerator.main([]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: R2A_ACCELERATOR=gpu") and err.count("\n") == 1


def test_the_train_component_refuses_without_a_gpu_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The component's own function (what the GPU task runs) exits with the one line, no
    traceback, before it reads anything, on a machine without a usable GPU."""
    import torch

    from components.train import train

    if torch.version.cuda is not None and torch.cuda.is_available():
        pytest.skip("a usable GPU is here")
    monkeypatch.setenv(accelerator.ENV, "gpu")
    missing = SimpleNamespace(path=str(tmp_path / "no-labels.jsonl"))
    with pytest.raises(SystemExit) as e:
        train.python_func("sample", "minilm", 0, 0, 0.0, missing, missing, missing)
    msg = str(e.value.code)
    assert msg.startswith("error: R2A_ACCELERATOR=gpu") and "\n" not in msg


# ---- the exit handler's record ---------------------------------------------------------------


@pytest.fixture
def mlflow_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from r2adapter.config import settings

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("R2A_HOME", str(tmp_path))
    settings.cache_clear()
    yield uri
    settings.cache_clear()


@pytest.mark.integration  # a real MLflow store
def test_record_marks_a_failed_run_where_users_look(mlflow_store: str) -> None:
    from mlflow import MlflowClient

    from r2adapter.registry import pipeline_runs as pr

    failed = pr.PipelineOutcome(
        state="FAILED",
        kfp_run="run-1",
        job="projects/p/pipelineJobs/run-1",
        task="exit-handler-1",
        error="label-shard: OOMKilled\nsecond line",
    )
    assert failed.line() == "pipeline run run-1: FAILED in exit-handler-1: label-shard: OOMKilled"
    run_id = pr.record(failed)
    ok = pr.record(pr.PipelineOutcome(state="SUCCEEDED", kfp_run="run-2"))
    cancelled = pr.record(pr.PipelineOutcome(state="CANCELLED", kfp_run="run-3"))
    c = MlflowClient(mlflow_store)
    exp = c.get_experiment_by_name(pr.EXPERIMENT)
    runs = {r.info.run_id: r for r in c.search_runs([exp.experiment_id])}
    assert set(runs) == {run_id, ok, cancelled}
    r = runs[run_id]
    assert r.info.status == "FAILED" and r.info.run_name == "kfp-run-1"
    assert r.data.tags[pr.TAG_STATE] == "FAILED"
    assert r.data.tags["r2a.error"].startswith("label-shard: OOMKilled")
    assert r.data.tags["r2a.failed_task"] == "exit-handler-1"
    assert (runs[ok].info.status, runs[cancelled].info.status) == ("FINISHED", "KILLED")
    # what users search for: the failed runs
    found = c.search_runs([exp.experiment_id], f"tags.`{pr.TAG_STATE}` = 'FAILED'")
    assert [x.info.run_id for x in found] == [run_id]
    md = failed.markdown(run_id)
    assert md.startswith("# pipeline run run-1: FAILED") and run_id in md and "OOMKilled" in md
    # an unknown state writes nothing
    with pytest.raises(R2AError, match="unknown pipeline state 'RUNNING'"):
        pr.record(pr.PipelineOutcome(state="RUNNING", kfp_run="run-4"))
    assert len(c.search_runs([exp.experiment_id])) == 3


@pytest.mark.integration  # a real MLflow store
def test_exit_component_writes_the_summary_and_returns_its_line(
    mlflow_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The component's own code (what the cluster runs in the exit pod), called directly."""
    from kfp import dsl
    from kfp.dsl import Markdown

    from components.record import record_run

    status = dsl.PipelineTaskFinalStatus(
        state="FAILED",
        pipeline_job_resource_name="jobs/run-9",
        pipeline_task_name="exit-handler-1",
        error_code=2,
        error_message="train: pod deadline exceeded",
    )
    summary = Markdown(uri=str(tmp_path / "summary.md"))
    summary.path = str(tmp_path / "summary.md")
    line = record_run.python_func(status=status, pipeline_run="run-9", summary=summary)
    assert line == "pipeline run run-9: FAILED in exit-handler-1: train: pod deadline exceeded"
    out = capsys.readouterr().out
    # its line comes first (other libraries' output before it, if any, is whitespace)
    assert out.lstrip().startswith(line + "\n") and "recorded as MLflow run" in out
    text = (tmp_path / "summary.md").read_text()
    assert "| state | FAILED |" in text and "pod deadline exceeded" in text


# ---- identity: the submission's bearer token and service account -----------------------------


def _jwt(exp: float) -> str:
    """A token shaped like a projected service-account token (the server checks its
    signature; the client reads only `exp`)."""
    import base64
    import json

    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    claims = {"aud": ["pipelines.kubeflow.org"], "exp": int(exp), "sub": "system:sa"}
    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


@pytest.fixture
def kfp_api() -> Iterator[KfpStandIn]:
    s = KfpStandIn().start()
    yield s
    s.stop()


def test_submission_sends_the_token_and_the_service_account(
    kfp_api: KfpStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real kfp.Client against the KFP REST stand-in: with the token path in
    KF_PIPELINES_SA_TOKEN_PATH (as the CronJob component sets it) every request carries
    `Authorization: Bearer <the file's token>`, and the run and the recurring run name the
    service account (default r2a-pipeline; --service-account another)."""
    import time

    from pipelines import submit

    token = _jwt(time.time() + 3600)
    path = tmp_path / "token"
    path.write_text(token + "\n")
    monkeypatch.setenv("KF_PIPELINES_SA_TOKEN_PATH", str(path))
    monkeypatch.setenv("R2A_HOME", str(ROOT))
    assert submit.main(["--host", kfp_api.url, "--corpora", ""]) == 0
    (run,) = kfp_api.runs.values()
    assert run["service_account"] == "r2a-pipeline"
    assert kfp_api.requests and all(r.bearer == token for r in kfp_api.requests)
    # a rotated token (the kubelet rewrites the file) is read again for the next request
    rotated = _jwt(time.time() + 7200)
    path.write_text(rotated)
    sent = len(kfp_api.requests)
    args = ["--host", kfp_api.url, "--recurring", "0 3 * * 0", "--service-account", "ci-runner"]
    assert submit.main(args) == 0
    (job,) = kfp_api.recurring.values()
    assert job["service_account"] == "ci-runner"
    assert {r.bearer for r in kfp_api.requests[sent:]} == {rotated}


def test_no_token_path_sends_no_credentials(
    kfp_api: KfpStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipelines import submit

    monkeypatch.delenv("KF_PIPELINES_SA_TOKEN_PATH", raising=False)
    monkeypatch.setenv("R2A_HOME", str(ROOT))
    assert submit.main(["--host", kfp_api.url, "--corpora", ""]) == 0
    assert all("authorization" not in r.headers for r in kfp_api.requests)
    (run,) = kfp_api.runs.values()
    assert run["service_account"] == "r2a-pipeline"


@pytest.mark.parametrize("case", ["missing", "empty", "expired"])
def test_a_bad_token_file_fails_in_one_line_naming_it(
    case: str,
    kfp_api: KfpStandIn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import time

    from pipelines import submit

    path = tmp_path / "token"
    if case == "empty":
        path.write_text("\n")
    elif case == "expired":
        path.write_text(_jwt(time.time() - 60))
    monkeypatch.setenv("R2A_HOME", str(ROOT))
    assert submit.main(["--host", kfp_api.url, "--token-path", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: token file {path}") and err.count("\n") == 1, err
    want = {"missing": "No such file", "empty": "is empty", "expired": "expired at"}[case]
    assert want in err
    assert kfp_api.requests == []  # nothing sent
