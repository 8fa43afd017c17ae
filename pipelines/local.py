"""The retraining graph run on this machine with kfp.local, each component as a subprocess
(`subprocess`) or in its own container of the project image (`docker`).

    python -m pipelines.local --runner docker --dataset musique --openie precomputed --epochs 1

A local run indexes and labels no development corpus unless asked: `--corpora` (names
separated by commas) and `run`'s `arguments["corpora"]` default to none (the cluster
pipeline's default is params.yaml pipeline.corpora: about 25 min more on quiet cores).

`docker` runs `retrain.local_pipeline` under kfp.local.DockerRunner: every task in
`components._base.IMAGE` (the tag `make image` builds; kfp pulls only a missing tag, and
there is no registry here, so a missing image is refused first, in one line naming
`make image`), with `network_mode=host`, so that the containers reach the host's Postgres
and MLflow server on 127.0.0.1, as the image's own user (10001). What a task sees:

- the settings, explicitly: R2A_DATABASE_URL (the embedded server's URL with its
  password when unset), MLFLOW_TRACKING_URI (must be an http(s) server: a sqlite file of
  the host is not the containers'), R2A_HOME, R2A_DATA_DIR and every other R2A_* /
  MLFLOW_* variable of this process;
- R2A_HOME, a host folder mounted read-write at the same path (params.yaml, labels/,
  reports/, .cache/: what the SubprocessRunner's tasks share on the host);
- the data folder (R2A_DATA_DIR) and a dataset given as a folder, mounted read-only at the
  same paths, so the arguments mean the same under both runners;
- the pipeline root, mounted by kfp itself; it is made writable for the image's user and
  this process's umask is 0 while the run lasts, so that the folders kfp makes there are too.

A task that fails in its container fails the run with `LocalRunFailed`, which names the
task and carries the tail of its container's log (kfp.local itself only says which task).
kfp 2.17's `run_docker_container` removes the container as it exits (`auto_remove`) and
takes a container already gone for a success (exit 0); the runner here waits for the exit
code first and removes the container after, so a fast failure is never read as success.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from r2adapter.errors import R2AError

LOG_TAIL = 60  # lines of a failed task's log kept in the error
PASS_PREFIXES = ("R2A_", "MLFLOW_")
# the host's own servers' settings (`r2a db up`, `r2a mlflow up`): no task starts a server
HOST_ONLY = {
    "R2A_PGDATA",
    "R2A_PG_PORT",
    "R2A_MLFLOW_DIR",
    "R2A_MLFLOW_PORT",
    "R2A_MLFLOW_HOST",
    "R2A_MLFLOW_ARTIFACTS",
}


class LocalRunFailed(R2AError):
    """A task of a local run failed: which one, and its log's tail."""

    def __init__(self, task: str, message: str, log: list[str]) -> None:
        self.task = task
        self.log = log
        super().__init__(message)


@dataclass
class RunResult:
    runner: str
    root: Path
    seconds: float
    containers: list[dict[str, Any]] = field(default_factory=list)  # docker: one per task


# ---- the container runner ------------------------------------------------------------------

_tail: deque[str] = deque(maxlen=LOG_TAIL)
_containers: list[dict[str, Any]] = []


def _run_container(
    client: Any, image: str, command: list[str], volumes: dict[str, Any], **run_args: Any
) -> int:
    """kfp.local's run_docker_container, without its race: stream the log (and keep its
    tail), wait for the exit code, then remove the container."""
    import docker

    if not any(image in (i.tags + i.attrs.get("RepoDigests", [])) for i in client.images.list()):
        raise R2AError(f"image {image} is missing: build it with `make image`")
    _tail.clear()
    t0 = time.perf_counter()
    container = client.containers.run(
        image=image,
        command=command,
        detach=True,
        stdout=True,
        stderr=True,
        volumes=volumes,
        **run_args,
    )
    try:
        for chunk in container.logs(stream=True, follow=True):
            text = chunk.decode(errors="replace")
            print(text, end="")
            _tail.extend(text.splitlines())
        code = int(container.wait()["StatusCode"])
        _containers.append(
            {
                "id": container.id[:12],
                "image": image,
                "user": container.attrs.get("Config", {}).get("User", ""),
                "exit": code,
                "seconds": time.perf_counter() - t0,
            }
        )
        return code
    finally:
        with contextlib.suppress(docker.errors.APIError):
            container.remove(force=True)


def container_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """What each container gets: the settings, explicitly (see the module's docstring)."""
    from r2adapter.config import settings
    from r2adapter.store.db import database_url

    src = {**os.environ, **(env or {})}
    out = {k: v for k, v in src.items() if k.startswith(PASS_PREFIXES) and k not in HOST_ONLY}
    out.setdefault("R2A_DATABASE_URL", database_url())
    out.setdefault("R2A_HOME", str(settings().root))
    out.setdefault("R2A_DATA_DIR", str(settings().data_dir))
    uri = out.get("MLFLOW_TRACKING_URI", settings().mlflow_uri)
    if not uri.startswith(("http://", "https://")):
        raise R2AError(
            f"MLFLOW_TRACKING_URI={uri} is this machine's store, not one a container reaches: "
            "start the server (`r2a mlflow up`) and export the URL it prints"
        )
    out["MLFLOW_TRACKING_URI"] = uri
    out.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DO_NOT_TRACK": "1"})
    out.setdefault("GX_ANALYTICS_ENABLED", "false")
    return out


def docker_runner(env: dict[str, str], read_only: list[str], writable: list[str]) -> Any:
    from docker.types import Mount
    from kfp import local

    mounts = [Mount(p, p, type="bind", read_only=True) for p in dict.fromkeys(read_only)]
    mounts += [Mount(p, p, type="bind", read_only=False) for p in dict.fromkeys(writable)]
    return local.DockerRunner(network_mode="host", environment=env, mounts=mounts)


@contextlib.contextmanager
def _patched_docker() -> Iterator[None]:
    from kfp.local import docker_task_handler

    saved = docker_task_handler.run_docker_container
    docker_task_handler.run_docker_container = _run_container
    saved_umask = os.umask(0)  # kfp's folders in the pipeline root: writable for uid 10001
    try:
        yield
    finally:
        os.umask(saved_umask)
        docker_task_handler.run_docker_container = saved


def _failed_task(message: str) -> str:
    # kfp: "... Inner task failed: 'register' inside 'condition-1' ..." / "Task 'x' finished ..."
    import re

    plain = re.sub(r"\x1b\[[0-9;]*m", "", message)
    m = re.search(r"Inner task failed: '?([\w-]+)'?", plain) or re.search(
        r"Task '?([\w-]+)'?", plain
    )
    return m.group(1) if m else "unknown"


def run(
    runner: str,
    pipeline_root: Path,
    arguments: dict[str, Any],
    env: dict[str, str] | None = None,
    mounts_read_only: list[str] | None = None,
    enable_caching: bool = False,
) -> RunResult:
    """`retrain.local_pipeline(**arguments)` under `runner` ("subprocess" or "docker");
    `enable_caching`: kfp.local's task cache under the pipeline root (the tasks the
    pipeline marks cacheable are served from an earlier run with the same inputs).
    `arguments` without "corpora" run with none (no development corpus indexed)."""
    from kfp import local

    from pipelines import retrain

    arguments = {"corpora": [], **arguments}
    pipeline_root = Path(pipeline_root).resolve()
    pipeline_root.mkdir(parents=True, exist_ok=True)
    _containers.clear()
    if runner == "subprocess":
        local.init(
            runner=local.SubprocessRunner(use_venv=False),
            pipeline_root=str(pipeline_root),
            enable_caching=enable_caching,
        )
        ctx: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    elif runner == "docker":
        _docker_ready()
        cenv = container_env(env)
        pipeline_root.chmod(0o777)
        home = Path(cenv["R2A_HOME"])
        ro = [cenv["R2A_DATA_DIR"], *(mounts_read_only or [])]
        dataset = str(arguments.get("dataset", ""))
        if os.sep in dataset and Path(dataset).is_dir():
            ro.append(str(Path(dataset).resolve()))
        local.init(
            runner=docker_runner(cenv, ro, [str(home)]),
            pipeline_root=str(pipeline_root),
            enable_caching=enable_caching,
        )
        ctx = _patched_docker()
    else:
        raise R2AError(f"unknown runner '{runner}': subprocess or docker")
    t0 = time.perf_counter()
    with ctx:
        try:
            retrain.local_pipeline(**arguments)
        except RuntimeError as e:
            task = _failed_task(str(e))
            log = list(_tail) if runner == "docker" else []
            last = next((x for x in reversed(log) if x.strip()), "")
            raise LocalRunFailed(
                task,
                f"task {task} failed{' in its container' if runner == 'docker' else ''}: "
                f"{last.strip()[:300] or str(e)}",
                log,
            ) from None
    return RunResult(runner, pipeline_root, time.perf_counter() - t0, list(_containers))


def _docker_ready() -> None:
    try:
        import docker

        docker.from_env().ping()
    except Exception as e:
        raise R2AError(
            f"no Docker daemon answers ({type(e).__name__}): start one "
            "(containers/docker-up.sh, or `make test-containers` does)"
        ) from None


def main(argv: list[str] | None = None) -> int:
    from pipelines import retrain

    ap = argparse.ArgumentParser(
        prog="python -m pipelines.local", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--runner", choices=["subprocess", "docker"], default="docker")
    ap.add_argument("--pipeline-root", default=None, help="default: reports/tmp/kfp-<runner>")
    for name, default in retrain.DEFAULTS.items():
        if name == "corpora":  # names separated by commas; none unless given (see above)
            ap.add_argument("--corpora", type=retrain.corpora_arg, default=[], metavar="NAMES")
            continue
        ap.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    args = ap.parse_args(argv)
    from r2adapter.config import settings

    root = Path(args.pipeline_root or settings().root / "reports" / "tmp" / f"kfp-{args.runner}")
    arguments = {name: getattr(args, name) for name in retrain.DEFAULTS}
    try:
        res = run(args.runner, root, arguments)
    except LocalRunFailed as e:
        print("\n".join(e.log[-20:]), file=sys.stderr)
        print(f"error: {e}", file=sys.stderr)
        return 1
    except R2AError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"pipeline done under {res.runner} in {res.seconds:.0f} s; outputs in {res.root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
