"""Registered models on local disk: each version downloaded once into a cache folder that
this project owns, a bounded number of versions kept per model, nothing left in the temp
folder.

`mlflow.pyfunc.load_model("models:/name@alias")` from an MLflow server downloads the model
into a fresh `tmp*` folder that nothing removes: every service start, every `r2a promote`
and every poll that retried a broken champion left a full copy (87 MB) behind (issue 44,
item 1). Here a version is downloaded into `<cache>/<model>/v<version>.<random>.part`
inside the cache, renamed to `v<version>` when complete (a rename is atomic: a second
process that downloaded the same version meanwhile keeps the first copy and drops its
own), and loaded from there, which MLflow does in place. The copy lacks the model's
`code/` folder (`_download_without_code`): the loading process runs its own r2adapter.
Past `MODEL_CACHE_VERSIONS` the least recently used versions of a model go; a `.part`
folder older than `PART_MAX_AGE_S` (a download killed midway) goes too. The routers read
their files while they load, never after (the weights are in memory), so a version
removed while it serves serves on.

R2A_MODEL_CACHE moves the folder (default `.cache/models/` in R2A_HOME, the serving
container's cache volume); R2A_MODEL_CACHE_VERSIONS sets the bound.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from r2adapter.config import settings

MODEL_CACHE_VERSIONS = 2  # per model: the version served and the one replacing it
CODE = "code"  # the pyfunc flavor's folder of `code_paths`: not downloaded here
PART_MAX_AGE_S = 3600.0  # an unfinished download older than this was killed: remove it


def cache_root() -> Path:
    return Path(os.environ.get("R2A_MODEL_CACHE", settings().root / ".cache" / "models"))


def cache_versions() -> int:
    return max(1, int(os.environ.get("R2A_MODEL_CACHE_VERSIONS", str(MODEL_CACHE_VERSIONS))))


def model_folder(model: str) -> Path:
    return cache_root() / re.sub(r"[^A-Za-z0-9_.-]", "_", model)


def local_model(model: str, version: str) -> Path:
    """The folder holding registered `model`'s `version` (its MLmodel at the top),
    downloaded now if the cache has no complete copy."""
    folder = model_folder(model)
    dest = folder / f"v{version}"
    if (dest / "MLmodel").is_file():
        os.utime(dest)  # the most recently used: eviction spares it
        return dest
    folder.mkdir(parents=True, exist_ok=True)
    part = Path(tempfile.mkdtemp(prefix=f"v{version}.", suffix=".part", dir=folder))
    try:
        _download_without_code(f"models:/{model}/{version}", part)
        if dest.is_dir() and not (dest / "MLmodel").is_file():
            shutil.rmtree(dest, ignore_errors=True)  # not a model: replaced by this copy
        try:
            part.rename(dest)
        except OSError:  # another process completed the same version first: keep its copy
            if not (dest / "MLmodel").is_file():
                raise
    finally:
        shutil.rmtree(part, ignore_errors=True)
    evict(model, keep=dest)
    return dest


def _download_without_code(uri: str, dest: Path) -> None:
    """The model's files but its `code/` folder: the project's source, 170 files, which the
    process loading from this cache never imports (it runs its own r2adapter, and Python
    looks a package's modules up in the package it imported). Fetching them one by one was
    0.6 of the 0.7 s a version took over HTTP, on the webhook's path from promotion to the
    new champion serving. A user rebuilding the model elsewhere downloads it whole."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
    from mlflow.store.artifact.models_artifact_repo import ModelsArtifactRepository

    repo = get_artifact_repository(ModelsArtifactRepository.get_underlying_uri(uri))
    for entry in repo.list_artifacts():
        if entry.path.rstrip("/").rsplit("/", 1)[-1] != CODE:
            repo.download_artifacts(entry.path, dst_path=str(dest))


def evict(model: str, keep: Path | None = None) -> list[Path]:
    """Remove `model`'s least recently used versions past the bound, and downloads killed
    midway; `keep` stays whatever its age. The folders removed."""
    folder = model_folder(model)
    if not folder.is_dir():
        return []
    versions, gone = [], []
    for p in folder.iterdir():
        try:
            age = time.time() - p.stat().st_mtime
        except OSError:  # removed by another process meanwhile
            continue
        if p.name.endswith(".part"):
            if age > PART_MAX_AGE_S:
                gone.append(p)
        elif p.is_dir() and p != keep:
            versions.append((age, p))
    room = cache_versions() - (1 if keep is not None else 0)
    gone += [p for _, p in sorted(versions)[room:]]
    for p in gone:
        shutil.rmtree(p, ignore_errors=True)
    return gone


def cached_bytes(model: str | None = None) -> int:
    """The bytes the cache holds (of `model`, else of every model)."""
    root = model_folder(model) if model else cache_root()
    if not root.is_dir():
        return 0
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
