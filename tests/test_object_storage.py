"""Object storage without a cloud: moto's standalone S3-compatible server (`moto_server`,
from the package index) on localhost, and through it, with the pinned dvc-s3 and boto3:
`dvc push` to an s3:// remote and `dvc pull` into an empty clone; an MLflow server started
with `--artifacts-destination s3://...` (what k8s/components/s3-artifacts runs) logging and
registering a model whose files land in the bucket, loaded back in a fresh process; and
the faults: the S3 server down during `dvc push` is one error line naming the endpoint; down
during an MLflow log, nothing is registered (the client's error names the tracking server,
not the object store: the server proxies the upload)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from r2adapter.processes import free_port, stop, wait_ready
from tests.conftest import ROOT
from tests.s3server import BIN, S3Server, clean_env, start_s3

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def _env(**extra: str) -> dict[str, str]:
    return clean_env(GIT_PYTHON_REFRESH="quiet", **extra)


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    server = start_s3(tmp_path_factory.mktemp("moto") / "moto.log")
    for bucket in ("r2a-dvc", "r2a-mlflow"):
        server.client().create_bucket(Bucket=bucket)
    yield server
    server.stop()


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _dvc_repo(path: Path, endpoint: str, env: dict[str, str]) -> None:
    """A git repository with DVC, one tracked folder, and an s3:// default remote at
    `endpoint` (as README.md's `dvc remote add` and `dvc remote modify endpointurl`)."""
    git = ["git", "-c", "user.email=t@example.org", "-c", "user.name=t"]
    (path / "data").mkdir(parents=True)
    (path / "data" / "corpus.json").write_text('[{"title": "a", "text": "b"}]\n')
    (path / "data" / "queries.json").write_text("[]\n")
    for args in (
        ["git", "init", "-q", "."],
        [str(BIN / "dvc"), "init", "-q"],
        [str(BIN / "dvc"), "add", "-q", "data"],
        [str(BIN / "dvc"), "remote", "add", "-d", "store", "s3://r2a-dvc/dvcstore"],
        [str(BIN / "dvc"), "remote", "modify", "store", "endpointurl", endpoint],
        ["git", "add", "-A"],
        [*git, "commit", "-qm", "data"],
    ):
        r = _run(args, path, env)
        assert r.returncode == 0, (args, r.stderr[-2000:])


def test_dvc_push_then_pull_into_an_empty_clone(s3: S3Server, tmp_path: Path) -> None:
    env = _env()
    repo, clone = tmp_path / "repo", tmp_path / "clone"
    _dvc_repo(repo, s3.url, env)
    r = _run([str(BIN / "dvc"), "push"], repo, env)
    assert r.returncode == 0, r.stderr[-2000:]
    # the two files and the folder's listing (.dir), content-addressed in the bucket
    assert "3 files pushed" in r.stdout, r.stdout
    assert len(s3.keys("r2a-dvc", "dvcstore/files/md5/")) == 3
    assert _run(["git", "clone", "-q", str(repo), str(clone)], tmp_path, env).returncode == 0
    assert not (clone / "data").exists()
    r = _run([str(BIN / "dvc"), "pull"], clone, env)
    assert r.returncode == 0, r.stderr[-2000:]
    for name in ("corpus.json", "queries.json"):
        assert (clone / "data" / name).read_bytes() == (repo / "data" / name).read_bytes()


def test_dvc_push_with_the_s3_server_down_names_the_endpoint(tmp_path: Path) -> None:
    env = _env()
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    _dvc_repo(tmp_path / "repo", down, env)
    r = _run([str(BIN / "dvc"), "push"], tmp_path / "repo", env)
    assert r.returncode != 0
    errors = [line for line in r.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and down in errors[0], r.stderr
    assert "Could not connect to the endpoint URL" in errors[0]


# ---- MLflow's artifacts in S3 -----------------------------------------------------------------


class Doubler:
    """A pyfunc small enough to log in a second: the artifact path is what is tested."""


@pytest.fixture(scope="module")
def mlflow_s3(s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mlflow server --artifacts-destination s3://r2a-mlflow/artifacts` (proxied: clients
    need no S3 keys), the endpoint and keys in its environment as the component gives them."""
    state = tmp_path_factory.mktemp("mlflow-s3")
    port = free_port()
    env = _env(
        MLFLOW_S3_ENDPOINT_URL=s3.url,
        MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false",
    )
    proc = subprocess.Popen(
        [
            str(BIN / "mlflow"),
            "server",
            "--backend-store-uri",
            f"sqlite:///{state}/mlflow.db",
            "--artifacts-destination",
            "s3://r2a-mlflow/artifacts",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],  # fmt: skip
        stdout=(state / "server.log").open("wb"),
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc, timeout=240, path="/health", what="mlflow server")
        yield url
    finally:
        stop(proc)


LOG_AND_REGISTER = """
import sys, mlflow, pandas as pd
mlflow.set_tracking_uri(sys.argv[1])
class Doubler(mlflow.pyfunc.PythonModel):
    def predict(self, context, model_input, params=None):
        return model_input[["x"]] * 2
with mlflow.start_run() as run:
    info = mlflow.pyfunc.log_model(
        name="model", python_model=Doubler(), registered_model_name=sys.argv[2],
        input_example=pd.DataFrame({"x": [1.0]}), pip_requirements=["mlflow"],
    )
print(info.registered_model_version, run.info.run_id)
"""

LOAD = """
import sys, mlflow, pandas as pd
mlflow.set_tracking_uri(sys.argv[1])
m = mlflow.pyfunc.load_model(f"models:/{sys.argv[2]}/1")
print(m.predict(pd.DataFrame({"x": [1.5, 2.0]}))["x"].tolist())
"""


def _py(code: str, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    # a fresh process with no S3 keys: the server proxies the artifacts
    env = {k: v for k, v in _env(**extra).items() if not k.startswith("AWS_")}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_mlflow_logs_registers_and_loads_through_s3(s3: S3Server, mlflow_s3: str) -> None:
    r = _py(LOG_AND_REGISTER, mlflow_s3, "s3-probe")
    assert r.returncode == 0, r.stderr[-3000:]
    version, run_id = r.stdout.split()[-2:]
    assert version == "1"
    stored = s3.keys("r2a-mlflow", "artifacts/")
    assert any(k.endswith("MLmodel") for k in stored), stored
    assert any(k.endswith("python_model.pkl") for k in stored), stored
    r = _py(LOAD, mlflow_s3, "s3-probe")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == "[3.0, 4.0]"


def test_mlflow_log_with_the_s3_server_down_registers_nothing(s3: S3Server, mlflow_s3: str) -> None:
    """Last in the module: it stops the S3 server. The log fails and no version of the
    model exists (nothing half-registered)."""
    from mlflow import MlflowClient

    stop(s3.proc)
    # MLflow's client retries a 5xx 7 times with backoff (minutes per file): once here
    r = _py(LOG_AND_REGISTER, mlflow_s3, "s3-down", MLFLOW_HTTP_REQUEST_MAX_RETRIES="0")
    assert r.returncode != 0
    assert "MlflowException" in r.stderr, r.stderr[-2000:]
    assert MlflowClient(mlflow_s3).search_model_versions("name='s3-down'") == []
