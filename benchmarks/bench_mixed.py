"""Issue 27's mixed load: 16 clients for 60 s — 8 POST /route, 4 POST /retrieve (mode auto,
top_k 5), 4 POST /route_batch of 32 — against this tree's service and a baseline's, in one
run, rounds alternating (baseline, tree, baseline, tree) while both services are up, so that
drift in the machine's load falls on both.

The baseline is the service of another commit (`--baseline`, default 70979d5: the tree
before issue 27's round): its `serving/` and `r2adapter/` from `git archive`, first on the
path of `bentoml serve`, with R2A_HOME a folder holding that commit's params.yaml and
links to this checkout's data, MLflow store, caches and database folder (the same champion,
data, database and environment; the settings the commit knows).
This tree's service is `r2a serve`. Both with R2A_LLM_BASE_URL at a closed port and one
attempt (a rewrite falls back at once: the LLM is not what is measured).

Per round and side: per-endpoint ok, errors by status, p50/p95; tracebacks and log lines
beyond the access log per 1,000 requests (from the service's log over the round). Then the
floor from the parts, on this tree's service alone and one client at a time: GET /healthz
(the HTTP stack), /route, /retrieve and /route_batch of 32; the mix's CPU ms per second of
its request shares says how many requests a second the 2 cores allow. Targets (issue 27):
0 x 503 on /route_batch, 0 tracebacks, <= 2 log lines per 1,000 requests beyond the access
log, /route p50 at least 2 x lower than the baseline's.

    .venv/bin/python benchmarks/bench_mixed.py            # 2 rounds of 60 s a side
    .venv/bin/python benchmarks/bench_mixed.py --quick    # 1 round of 15 s a side
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

if not __package__:  # `python benchmarks/bench_mixed.py`: the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (  # noqa: E402
    arg_parser,
    die,
    finish,
    loadavg,
    met,
    new_result,
    pct,
    require_champion,
    require_db,
)
from benchmarks.loadgen import PhaseResult, cycle, load_hotpot, run_load  # noqa: E402
from r2adapter.demo import start  # noqa: E402
from r2adapter.processes import free_port, stop, wait_ready  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HOTPOT = ROOT / "data" / "hotpotqa" / "hotpotqa_dev_questions_7405.json"
BASELINE = "70979d5"
MIX = {"route": 8, "retrieve": 4, "route_batch": 4}  # clients per endpoint
BATCH = 32
TARGET_LOG_LINES = 2.0  # per 1,000 requests beyond the access log
TARGET_SPEEDUP = 2.0  # /route p50: baseline / this tree
ACCESS = re.compile(r"\(scheme=\w+,method=")


class Served:
    """One service as a child process, its log read from an offset."""

    def __init__(self, name: str, proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.name, self.proc, self.url, self.log = name, proc, url, log

    def mark(self) -> int:
        return self.log.stat().st_size

    def lines_since(self, offset: int) -> list[str]:
        with self.log.open("rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace").splitlines()


def _start_baseline(rev: str, env: dict[str, str], folder: Path) -> Served:
    """`serving/` and `r2adapter/` of `rev`: `bentoml serve` finds them first on its path."""
    from r2adapter.store import embedded

    tar = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "serving", "r2adapter"],
        capture_output=True,
        check=False,
    )
    if tar.returncode != 0:
        die(f"git archive {rev} serving r2adapter failed: {tar.stderr.decode().strip()}")
    tree = folder / f"baseline-{rev}"
    tree.mkdir()
    tgz = folder / "serving.tar"
    tgz.write_bytes(tar.stdout)
    with tarfile.open(tgz) as t:
        t.extractall(tree, filter="data")
    port = free_port()
    log = folder / "baseline.log"
    bentoml = Path(sys.executable).with_name("bentoml")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(bentoml), "serve", "serving.service:R2AService", "--port", str(port)],
            cwd=tree,
            env={
                **env,
                "PYTHONPATH": str(tree),
                "R2A_HOME": str(_baseline_home(rev, folder)),
                "R2A_DATABASE_URL": embedded.url(),  # with its password (SCRAM came later)
            },
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Served(f"baseline {rev}", proc, f"http://127.0.0.1:{port}", log)


def _baseline_home(rev: str, folder: Path) -> Path:
    home = folder / "home"
    home.mkdir()
    params = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:params.yaml"], capture_output=True, check=False
    )
    if params.returncode != 0:
        die(f"git show {rev}:params.yaml failed: {params.stderr.decode().strip()}")
    (home / "params.yaml").write_bytes(params.stdout)
    for name in ("data", "mlruns", ".cache", ".pgdata", "reports"):
        if (ROOT / name).exists():
            (home / name).symlink_to(ROOT / name)
    return home


def _start_tree(env: dict[str, str], folder: Path) -> Served:
    port = free_port()
    log = folder / "tree.log"
    return Served("this tree", start(env, log, port), f"http://127.0.0.1:{port}", log)


def _warm(url: str, questions: list[str]) -> None:
    with httpx.Client(base_url=url, timeout=120, trust_env=False) as c:
        for q in questions[:20]:
            c.post("/route", json={"query": q}).raise_for_status()
            c.post("/retrieve", json={"query": q, "mode": "auto", "top_k": 5}).raise_for_status()
        c.post("/route_batch", json={"queries": questions[:BATCH]}).raise_for_status()


def _is_list(body: Any) -> bool:
    return isinstance(body, list) and len(body) == BATCH and all("decision" in b for b in body)


def _mixed(url: str, questions: list[str], seconds: float) -> dict[str, PhaseResult]:
    singles = [{"query": q} for q in questions]
    lists = [{"queries": questions[i : i + BATCH]} for i in range(0, len(questions) - BATCH, BATCH)]

    async def go() -> dict[str, PhaseResult]:
        kw = {"duration_s": seconds, "max_requests": 10**6, "timeout_s": 120.0}
        out = await asyncio.gather(
            run_load(url, "/route", cycle(singles), clients=MIX["route"], desc="/route",
                     check=lambda b: isinstance(b, dict) and "decision" in b, **kw),  # type: ignore[arg-type]
            run_load(url, "/retrieve",
                     cycle([{**s, "mode": "auto", "top_k": 5} for s in singles]),
                     clients=MIX["retrieve"], desc="/retrieve",
                     check=lambda b: isinstance(b, dict) and "passages" in b, **kw),  # type: ignore[arg-type]
            run_load(url, "/route_batch", cycle(lists), clients=MIX["route_batch"],
                     desc="/route_batch", check=_is_list, **kw),  # type: ignore[arg-type]
        )  # fmt: skip
        return dict(zip(MIX, out, strict=True))

    return asyncio.run(go())


def _round(svc: Served, questions: list[str], seconds: float) -> dict[str, Any]:
    load0, offset = loadavg()[0], svc.mark()
    res = _mixed(svc.url, questions, seconds)
    time.sleep(1.0)  # the access log's last lines
    lines = svc.lines_since(offset)
    n = sum(len(r.latencies_ms) + sum(r.errors.values()) for r in res.values())
    beyond = [ln for ln in lines if ln.strip() and not ACCESS.search(ln)]
    out: dict[str, Any] = {"service": svc.name, "loadavg_before": load0, "requests": n}
    for ep, r in res.items():
        s = r.summary()
        out[ep] = {
            "ok": s["ok"],
            "errors": s["errors_by_kind"],
            "p50_ms": s.get("p50_ms"),
            "p95_ms": s.get("p95_ms"),
            "latencies_ms": r.latencies_ms,
        }
    out["queries_scored"] = (
        out["route"]["ok"] + out["retrieve"]["ok"] + BATCH * out["route_batch"]["ok"]
    )
    out["tracebacks"] = sum(ln.lstrip().startswith("Traceback") for ln in lines)
    out["log_lines_beyond_access"] = len(beyond)
    out["log_lines_beyond_access_per_1000_requests"] = round(1000 * len(beyond) / max(n, 1), 2)
    out["log_samples"] = beyond[:5]
    return out


def _one_at_a_time(url: str, questions: list[str], n: int) -> dict[str, float]:
    """p50 ms of each request kind, one client, nothing else running: the parts."""
    out: dict[str, list[float]] = {"healthz": [], "route": [], "retrieve": [], "route_batch": []}
    with httpx.Client(base_url=url, timeout=120, trust_env=False) as c:
        for i in range(n):
            q = questions[i]
            for kind, call in (
                ("healthz", lambda: c.get("/healthz")),
                ("route", lambda: c.post("/route", json={"query": q})),  # noqa: B023
                ("retrieve", lambda: c.post("/retrieve", json={"query": q, "mode": "auto", "top_k": 5})),  # noqa: B023, E501
                ("route_batch", lambda: c.post("/route_batch", json={"queries": questions[i : i + BATCH]})),  # noqa: B023, E501
            ):  # fmt: skip
                t0 = time.perf_counter()
                call().raise_for_status()
                out[kind].append((time.perf_counter() - t0) * 1000)
    return {k: round(pct(v, 50), 2) for k, v in out.items()}


def _floor(parts: dict[str, float], shares: dict[str, float]) -> dict[str, Any]:
    """The mix's requests a second that the cores allow if each request costs its
    one-client latency in CPU (a bound from above on the cost: a lone request also waits on
    the database and the event loop), and the ms of CPU a second the observed shares need."""
    cores = len(os.sched_getaffinity(0))
    ms_per_request = sum(parts[k] * s for k, s in shares.items())
    return {
        "cores": cores,
        "one_client_p50_ms": parts,
        "request_shares": {k: round(v, 3) for k, v in shares.items()},
        "cpu_ms_per_mixed_request_at_most": round(ms_per_request, 2),
        "mixed_rps_floor": round(cores * 1000 / ms_per_request, 1) if ms_per_request else None,
    }


def _side(rounds: list[dict[str, Any]], name: str) -> dict[str, Any]:
    mine = [r for r in rounds if r["service"] == name]
    out: dict[str, Any] = {"rounds": len(mine)}
    for ep in MIX:
        lat = [ms for r in mine for ms in r[ep]["latencies_ms"]]
        errs: dict[str, int] = {}
        for r in mine:
            for k, v in r[ep]["errors"].items():
                errs[k] = errs.get(k, 0) + v
        out[ep] = {
            "ok": len(lat),
            "errors": errs,
            "p50_ms": pct(lat, 50) if lat else None,
            "p95_ms": pct(lat, 95) if lat else None,
        }
    n = sum(r["requests"] for r in mine)
    out["requests"] = n
    out["queries_scored"] = sum(r["queries_scored"] for r in mine)
    out["tracebacks"] = sum(r["tracebacks"] for r in mine)
    out["log_lines_beyond_access_per_1000_requests"] = round(
        1000 * sum(r["log_lines_beyond_access"] for r in mine) / max(n, 1), 2
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__ or "", "1 round of 15 s a side", "hardening2_mixed.json")
    ap.add_argument("--baseline", default=BASELINE, help="the commit whose serving/ is compared")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--parts", type=int, default=30, help="one-client requests of each kind")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.seconds, args.parts = 1, 15.0, 10
    require_db()
    require_champion()
    questions = load_hotpot(HOTPOT)
    env = {
        **os.environ,
        "R2A_LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "R2A_LLM_MODEL": "none",
        "R2A_LLM_MAX_ATTEMPTS": "1",  # a refused connection falls back at once (3 s with retries)
        "BENTOML_DO_NOT_TRACK": "true",
    }
    folder = Path(tempfile.mkdtemp(prefix="r2a-bench-mixed-"))
    result = new_result("hardening2_mixed", args.quick, clients=sum(MIX.values()))
    services = [_start_baseline(args.baseline, env, folder), _start_tree(env, folder)]
    rounds: list[dict[str, Any]] = []
    try:
        for s in services:
            wait_ready(s.url, s.proc, 600)
            _warm(s.url, questions)
        versions = {
            s.name: httpx.post(f"{s.url}/route", json={"query": questions[0]}, timeout=60).json()
            for s in services
        }
        routers = {n: (v.get("router", "r2a"), v["router_version"]) for n, v in versions.items()}
        if len(set(routers.values())) != 1:
            die(f"the services serve different routers: {routers}")
        for i in range(args.rounds):
            for s in services:
                r = _round(s, questions[i * 2000 :], args.seconds)
                rounds.append(r)
                print(
                    f"  round {i + 1} {s.name:<17} /route p50 {r['route']['p50_ms'] or 0:7.1f} "
                    f"ms  batch ok {r['route_batch']['ok']:>4} err {r['route_batch']['errors']}  "
                    f"tracebacks {r['tracebacks']}  load {r['loadavg_before']:.1f}"
                )
        tree = services[1]
        parts = _one_at_a_time(tree.url, questions[5000:], args.parts)
    finally:
        for s in services:
            stop(s.proc)
    sides = {s.name: _side(rounds, s.name) for s in services}
    base, mine = sides[services[0].name], sides[services[1].name]
    n_tree = sum(mine[ep]["ok"] for ep in MIX) or 1
    shares = {"route": mine["route"]["ok"] / n_tree, "retrieve": mine["retrieve"]["ok"] / n_tree}
    shares["route_batch"] = mine["route_batch"]["ok"] / n_tree
    for r in rounds:
        for ep in MIX:
            del r[ep]["latencies_ms"]
    speedup = (
        base["route"]["p50_ms"] / mine["route"]["p50_ms"]
        if base["route"]["p50_ms"] and mine["route"]["p50_ms"]
        else None
    )
    targets = {
        "route_batch_503": mine["route_batch"]["errors"].get("status_503", 0) == 0,
        "tracebacks": mine["tracebacks"] == 0,
        "log_lines": mine["log_lines_beyond_access_per_1000_requests"] <= TARGET_LOG_LINES,
        "route_p50_speedup": bool(speedup and speedup >= TARGET_SPEEDUP),
    }
    result.update(
        what=(
            f"{sum(MIX.values())} mixed clients ({MIX['route']} /route, {MIX['retrieve']} "
            f"/retrieve auto top_k 5, {MIX['route_batch']} /route_batch of {BATCH}), "
            f"{args.rounds} rounds of {args.seconds:.0f} s a side, alternating"
        ),
        where="the developer database and the champion the service loads (R2A_KWAY default)",
        router=next(iter(routers.values())),
        baseline=args.baseline,
        sides=sides,
        rounds=rounds,
        route_p50_speedup=speedup,
        floor=_floor(parts, shares),
        targets=targets,
        met=all(targets.values()),
    )
    print(
        f"/route p50: baseline {base['route']['p50_ms']:.1f} ms, this tree "
        f"{mine['route']['p50_ms']:.1f} ms ({speedup or 0:.2f}x, target >= {TARGET_SPEEDUP}x) "
        f"{met(targets['route_p50_speedup'])}"
    )
    print(
        f"this tree: /route_batch 503s {mine['route_batch']['errors'].get('status_503', 0)}, "
        f"tracebacks {mine['tracebacks']}, log lines beyond access "
        f"{mine['log_lines_beyond_access_per_1000_requests']}/1000 requests; floor "
        f"{result['floor']['mixed_rps_floor']} mixed requests/s"
    )
    finish(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
