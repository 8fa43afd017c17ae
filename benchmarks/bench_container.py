"""/route at 8 clients inside the manifest-started serving container against the same service
outside it, in one run (issue 23: inside ≤ 1.2 × outside at p50).

Inside: the prod overlay's serving Deployment (`kubectl kustomize k8s/overlays/prod`), its
container run with docker exactly as written (tests/containers/podrun.py: image, command,
the ConfigMap's and the Secret's environment, user, read-only root with tmpfs emptyDirs,
capabilities dropped, its CPU and memory limits: 4 CPUs capped at the host's, 8 GiB), ready
when its readiness probe passes. The prod overlay, not dev: dev limits the pod to 1 CPU, and
the question is what the container costs, not what a smaller CPU budget costs. Outside:
`r2a serve` on the host with the same environment. Both are up together and load the same
champion (the developer's MLflow store; the container gets a writable copy of it at the same
path, see `_writable_copy`; the developer database), and only one is under load at a time:
rounds alternate outside, inside, outside, inside, so that drift in the machine's load falls
on both.

    .venv/bin/python benchmarks/bench_container.py            # 4 rounds of 20 s
    .venv/bin/python benchmarks/bench_container.py --quick    # 2 rounds of 8 s
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

if not __package__:  # `python benchmarks/bench_container.py`: the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (  # noqa: E402
    arg_parser,
    die,
    finish,
    loadavg,
    met,
    new_result,
    pct,
    require_db,
)
from benchmarks.loadgen import check_body, cycle, load_hotpot, run_load  # noqa: E402
from r2adapter.demo import start  # noqa: E402
from r2adapter.processes import free_port, stop, wait_ready  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HOTPOT = ROOT / "data" / "hotpotqa" / "hotpotqa_dev_questions_7405.json"
TARGET_RATIO = 1.2  # inside p50 <= 1.2 x outside p50
CLIENTS = 8
# where the image keeps what it writes (the Deployment's emptyDirs): not for the host's server
CONTAINER_ONLY = ("HOME", "R2A_HOME", "BENTOML_HOME", "HF_HOME", "XDG_CACHE_HOME", "PATH")


def _docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _writable_copy(mlruns: Path) -> Path:
    """A copy of the developer's MLflow store for the container, at the same path inside it
    (the registry names artifacts by absolute path) and writable by its user: loading a
    `models:/` URI from a local store writes `registered_model_meta` into the model's own
    artifact folder, so a read-only mount of the store refuses every load. The original
    stays the host server's, untouched."""
    import shutil

    copy = Path(tempfile.mkdtemp(prefix="r2a-bench-mlruns-")) / "mlruns"
    shutil.copytree(mlruns, copy, ignore=shutil.ignore_patterns("server"))
    for path in [copy, *copy.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)
    copy.parent.chmod(0o755)
    return copy


def _container(key: str, tracking_uri: str, mlruns: Path) -> tuple[str, Any, float]:
    from r2adapter.store.db import database_url
    from tests.containers.conftest import one, pod_container, render
    from tests.containers.podrun import docker_run_args

    objs = render("prod")
    dep = one(objs, "Deployment", "r2a-serving")
    c = pod_container(dep, "serving")
    run = docker_run_args(
        dep,
        c,
        objs,
        secret_values={
            "R2A_DATABASE_URL": database_url(),
            "R2A_API_KEY": key,
            "POSTGRES_PASSWORD": "unused-here",
            "MLFLOW_BACKEND_STORE_URI": "unused-here",
            "R2A_LLM_API_KEY": "unused-here",
        },
        env_overrides={
            "MLFLOW_TRACKING_URI": tracking_uri,
            "R2A_LLM_BASE_URL": "http://127.0.0.1:9/v1",
        },
        extra_args=["--mount", f"type=bind,src={_writable_copy(mlruns)},dst={mlruns}"],
    )
    # the prod limit (4 CPUs) on a smaller host: docker refuses more than the host has
    if "--cpus" in run.args:
        i = run.args.index("--cpus") + 1
        run.args[i] = str(min(float(run.args[i]), float(len(os.sched_getaffinity(0)))))
    name = f"r2a-bench-{secrets.token_hex(4)}"
    done = _docker("run", "-d", "--name", name, *run.args)
    if done.returncode != 0:
        die(f"docker run failed: {(done.stderr.strip().splitlines() or [''])[0]}")
    return name, run, time.monotonic()


def _wait_container(name: str, run: Any, t0: float) -> float:
    from tests.containers.podrun import wait_probe

    def exited() -> int | None:
        st = _docker("inspect", "-f", "{{.State.Running}} {{.State.ExitCode}}", name)
        running, code = (st.stdout.split() + ["", ""])[:2]
        return None if running == "true" else int(code or 1)

    try:  # as the kubelet: readiness only once the startup probe has passed
        wait_probe(name, run, "startupProbe", t0, exited)
        return wait_probe(name, run, "readinessProbe", t0, exited)
    except AssertionError as e:
        done = _docker("logs", "--tail", "15", name)
        logs = (done.stdout + done.stderr).strip()
        _docker("rm", "-f", name)
        die(f"the serving container did not become ready: {e}\n{logs}")
        raise


def _round(url: str, questions: list[str], seconds: float, desc: str) -> dict[str, Any]:
    bodies = cycle([{"query": q} for q in questions])
    load0 = loadavg()[0]
    res = asyncio.run(
        run_load(
            url,
            "/route",
            bodies,
            clients=CLIENTS,
            duration_s=seconds,
            max_requests=10**6,
            timeout_s=60,
            check=check_body("decision"),
            desc=desc,
        )
    )
    out = res.summary()
    out["loadavg_before"] = load0
    out["latencies_ms"] = res.latencies_ms
    return out


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__ or "", "2 rounds of 8 s", "container_route.json")
    ap.add_argument("--rounds", type=int, default=4, help="rounds per side (alternating)")
    ap.add_argument("--seconds", type=float, default=20.0, help="seconds per round")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.seconds = 2, 8.0
    from components._base import IMAGE
    from r2adapter.config import settings

    if _docker("info", timeout=30).returncode != 0:
        die("no Docker daemon answers: make docker-up")
    if _docker("image", "inspect", IMAGE).returncode != 0:
        die(f"no image {IMAGE}: make image")
    require_db()
    tracking = settings().mlflow_uri
    if not tracking.startswith("sqlite:///"):
        die(f"MLFLOW_TRACKING_URI {tracking}: this benchmark mounts a local sqlite store")
    mlruns = Path(tracking.removeprefix("sqlite:///")).parent
    questions = load_hotpot(HOTPOT)[:2000]
    key = secrets.token_hex(16)
    result = new_result("container_route", args.quick, clients=CLIENTS)
    name, run, t0 = _container(key, tracking, mlruns)
    log = Path(tempfile.mkdtemp(prefix="r2a-bench-container-")) / "serve.log"
    same = {k: v for k, v in run.env.items() if k not in CONTAINER_ONLY}
    env = {**os.environ, **same, "MLFLOW_TRACKING_URI": tracking}
    port = free_port()
    proc = start(env, log, port)
    outside, inside = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{run.ports['http']}"
    rounds: list[dict[str, Any]] = []
    try:
        ready_s = _wait_container(name, run, t0)
        wait_ready(outside, proc, 600)
        for url in (outside, inside):  # both warmed
            for q in questions[:40]:
                httpx.post(f"{url}/route", json={"query": q}, timeout=60).raise_for_status()
        versions = {
            side: httpx.post(f"{u}/route", json={"query": questions[0]}, timeout=60).json()[
                "router_version"
            ]
            for side, u in (("outside", outside), ("inside", inside))
        }
        if len(set(versions.values())) != 1:
            die(f"the two services serve different routers: {versions}")
        for i in range(args.rounds):
            for side, url in (("outside", outside), ("inside", inside)):
                r = _round(url, questions, args.seconds, f"{side} {i + 1}/{args.rounds}")
                r["side"] = side
                rounds.append(r)
                print(
                    f"  round {i + 1} {side:<7} ok {r['ok']:>5}  errors {r['errors']:>3}  "
                    f"p50 {r.get('p50_ms', float('nan')):7.1f} ms  load {r['loadavg_before']:.1f}"
                )
    finally:
        stop(proc)
        _docker("rm", "-f", name, timeout=60)
    sides: dict[str, Any] = {}
    for side in ("outside", "inside"):
        lat = [ms for r in rounds if r["side"] == side for ms in r["latencies_ms"]]
        errs = sum(r["errors"] for r in rounds if r["side"] == side)
        sides[side] = {
            "requests_ok": len(lat),
            "errors": errs,
            "p50_ms": pct(lat, 50) if lat else None,
            "p95_ms": pct(lat, 95) if lat else None,
            "rounds_p50_ms": [r.get("p50_ms") for r in rounds if r["side"] == side],
        }
    for r in rounds:
        del r["latencies_ms"]
    ratio = (
        sides["inside"]["p50_ms"] / sides["outside"]["p50_ms"]
        if sides["inside"]["p50_ms"] and sides["outside"]["p50_ms"]
        else None
    )
    result.update(
        what=(
            f"POST /route, {CLIENTS} clients, HotpotQA dev questions in order; "
            f"{args.rounds} rounds of {args.seconds:.0f} s per side, alternating"
        ),
        image=IMAGE,
        container=" ".join(run.args[:-1]).replace(key, "<key>"),
        router_version=next(iter(versions.values())),
        container_ready_s=round(ready_s, 1),
        sides=sides,
        rounds=rounds,
        p50_ratio_inside_over_outside=ratio,
        target_ratio=TARGET_RATIO,
        met=bool(ratio is not None and ratio <= TARGET_RATIO),
    )
    print(
        f"/route p50 at {CLIENTS} clients: outside {sides['outside']['p50_ms']:.1f} ms, inside "
        f"{sides['inside']['p50_ms']:.1f} ms: ratio {ratio:.2f} (target <= {TARGET_RATIO}) "
        f"{met(bool(result['met']))}"
    )
    finish(result, args.out)
    return 0 if not (sides["inside"]["errors"] or sides["outside"]["errors"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
