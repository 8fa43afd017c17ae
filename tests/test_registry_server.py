"""r2adapter/registry/server.py's settings that need no server: the database a server keeps
its registry in (R2A_MLFLOW_DB), and that the backend URL names it; where its artifacts go
(R2A_MLFLOW_ARTIFACTS: `mlflow server`'s --artifacts-destination), with the S3 keys in its
environment and never in its argv."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from r2adapter.config import settings
from r2adapter.errors import R2AError
from r2adapter.registry import server

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _fresh_settings() -> Iterator[None]:
    """settings() caches R2A_DATABASE_URL; leave the next test the cache it would have had."""
    yield
    settings.cache_clear()


def test_the_database_is_mlflow_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("R2A_MLFLOW_DB", raising=False)
    monkeypatch.setenv("R2A_DATABASE_URL", "postgresql://u:p@127.0.0.1:5544/r2a?sslmode=disable")
    settings.cache_clear()  # settings() is read once per process; this test changes its input
    assert server.db_name() == "mlflow"
    assert server.backend_uri() == "postgresql+psycopg://u:p@127.0.0.1:5544/mlflow?sslmode=disable"
    monkeypatch.setenv("R2A_MLFLOW_DB", "mlflow_staging")
    assert server.backend_uri().endswith("/mlflow_staging?sslmode=disable")


@pytest.mark.parametrize("bad", ["", "Mlflow", "ml-flow", 'x"; drop', "a" * 64, "1abc"])
def test_a_database_name_that_is_not_an_identifier_is_one_line(
    monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    monkeypatch.setenv("R2A_MLFLOW_DB", bad)
    with pytest.raises(R2AError) as e:
        server.db_name()
    assert "R2A_MLFLOW_DB" in str(e.value) and "\n" not in str(e.value)


# ---- where the artifacts go (R2A_MLFLOW_ARTIFACTS) -------------------------------------------


@pytest.fixture
def state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("R2A_MLFLOW_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("R2A_MLFLOW_ARTIFACTS", raising=False)
    return tmp_path / "state"


def _destination_arg(cmd: list[str]) -> str:
    assert cmd.count("--artifacts-destination") == 1, cmd
    return cmd[cmd.index("--artifacts-destination") + 1]


def test_artifacts_default_to_the_state_folder(state: Path) -> None:
    cmd = server.server_command(server.artifacts_destination())
    assert _destination_arg(cmd) == str((state / "artifacts").resolve())


def test_artifacts_in_a_folder_are_given_as_an_absolute_path(
    state: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # the server runs in its state folder: a relative path would move
    monkeypatch.setenv("R2A_MLFLOW_ARTIFACTS", "store/mlflow")
    cmd = server.server_command(server.artifacts_destination())
    assert _destination_arg(cmd) == str(tmp_path / "store" / "mlflow")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("s3://r2a-mlflow", "s3://r2a-mlflow"),
        ("s3://r2a-mlflow/mlflow", "s3://r2a-mlflow/mlflow"),
        ("s3://r2a.mlflow-2/a/b/", "s3://r2a.mlflow-2/a/b"),
    ],
)
def test_an_s3_destination_is_passed_as_given(
    state: Path, monkeypatch: pytest.MonkeyPatch, value: str, expected: str
) -> None:
    monkeypatch.setenv("R2A_MLFLOW_ARTIFACTS", value)
    assert _destination_arg(server.server_command(server.artifacts_destination())) == expected


def test_s3_keys_reach_the_server_by_its_environment_not_its_argv(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "s3-secret-that-must-not-show"
    monkeypatch.setenv("R2A_DATABASE_URL", "postgresql://u:p@127.0.0.1:5544/r2a")
    monkeypatch.setenv("R2A_MLFLOW_ARTIFACTS", "s3://r2a-mlflow/mlflow")
    monkeypatch.setenv("MLFLOW_S3_ENDPOINT_URL", "http://127.0.0.1:9000")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "r2a-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    settings.cache_clear()
    cmd = server.server_command(server.artifacts_destination())
    assert not any(secret in a or "r2a-key" in a for a in cmd), cmd
    env = server.server_env()
    assert env["AWS_SECRET_ACCESS_KEY"] == secret and env["AWS_ACCESS_KEY_ID"] == "r2a-key"
    assert env["MLFLOW_S3_ENDPOINT_URL"] == "http://127.0.0.1:9000"


@pytest.mark.parametrize(
    "bad",
    [
        "s3://",
        "s3://ab",  # a bucket name has 3 characters at least
        "s3://R2A_Mlflow/x",
        "s3://key:secret@r2a-mlflow/x",
        "s3://r2a-mlflow/a b",
        "gs://r2a-mlflow/x",
        "http://minio:9000/r2a-mlflow",
        "file:///tmp/artifacts",
        "mlflow-artifacts:/x",
    ],
)
def test_a_destination_that_is_neither_a_folder_nor_s3_is_one_line(
    state: Path, monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    monkeypatch.setenv("R2A_MLFLOW_ARTIFACTS", bad)
    with pytest.raises(R2AError) as e:
        server.artifacts_destination()
    message = str(e.value)
    assert message.startswith("R2A_MLFLOW_ARTIFACTS=") and "\n" not in message
    assert "s3://bucket[/prefix]" in message
    assert "secret" not in message  # a key written into the URL is not echoed


def test_a_file_is_not_a_folder(
    state: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("x")
    monkeypatch.setenv("R2A_MLFLOW_ARTIFACTS", str(tmp_path / "a-file"))
    with pytest.raises(R2AError, match="R2A_MLFLOW_ARTIFACTS=.*a folder"):
        server.artifacts_destination()


def test_s3_without_credentials_is_one_line_before_any_request(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """boto3 signs before it connects: with no key anywhere in its chain (environment,
    files, instance metadata) the check names the variables, and the endpoint, a closed
    port, is never asked (a connection error would be another message)."""
    for k in [k for k in os.environ if k.startswith(("AWS_", "BOTO_"))]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("BOTO_CONFIG", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("MLFLOW_S3_ENDPOINT_URL", "http://127.0.0.1:9")
    with pytest.raises(R2AError) as e:
        server._check_s3("s3://r2a-mlflow/mlflow")
    assert "no S3 credentials" in str(e.value) and "AWS_SECRET_ACCESS_KEY" in str(e.value)
    assert "\n" not in str(e.value)
