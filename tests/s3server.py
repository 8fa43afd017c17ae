"""moto's standalone S3-compatible server (`moto_server`, from the package index, in the
venv) on a free loopback port: the object store that stands in for S3 in
tests/test_object_storage.py and under the container tier's MLflow servers
(tests/containers/mlflow_env.py). moto takes any key; the fixed ones below are what boto3
needs to sign with."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from r2adapter.processes import free_port, stop, wait_ready

BIN = Path(sys.executable).parent
KEYS = {
    "AWS_ACCESS_KEY_ID": "r2a-test",
    "AWS_SECRET_ACCESS_KEY": "r2a-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass
class S3Server:
    url: str
    proc: subprocess.Popen[bytes]

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.url, **boto_keys())

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        )
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def env(self) -> dict[str, str]:
        """What a client of this store (an MLflow server) needs: the endpoint and the keys."""
        return {"MLFLOW_S3_ENDPOINT_URL": self.url, **KEYS}

    def stop(self) -> None:
        stop(self.proc)


def boto_keys() -> dict[str, str]:
    return {
        "aws_access_key_id": KEYS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": KEYS["AWS_SECRET_ACCESS_KEY"],
        "region_name": KEYS["AWS_DEFAULT_REGION"],
    }


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without its AWS_* and MLFLOW_* settings, with KEYS."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MLFLOW_"))}
    return {**env, **KEYS, **extra}


def start_s3(log: Path) -> S3Server:
    """`moto_server` on a free port, its output in `log`, once /moto-api/ answers (its own
    process group: `S3Server.stop` ends it)."""
    port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env=clean_env(),
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc, timeout=60, path="/moto-api/", what="moto_server")
    except BaseException:
        stop(proc)
        raise
    return S3Server(url, proc)
