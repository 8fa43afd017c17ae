"""A new user's first `make run`, timed by stage: a fresh clone of this repository (the
committed HEAD, nothing of this checkout's state: no database, no MLflow store, no caches),
`make install` (packages from pip's local cache, as on a laptop that installed once), then
`make run` with its output read line by line, each line stamped as it arrives (issue 42,
item 3).

Stages: `install`; `r2a run` (database up, every dataset validated and loaded); each DVC
stage by its name (`index`, `label`, `corpora@musique_dev`, `train@r2a`, ...), from
"Running stage '<name>'" to the next marker; `dvc metrics show`; `demo` (BentoML started,
one query per route). Index steps (passage embeddings, OpenIE, facts, ADR, ...) come from
the clone's index reports (`reports/index/<dataset>.json`, `seconds_*`).

    .venv/bin/python -m benchmarks.perf.bench_first_run              # clone HEAD into a temp folder
    .venv/bin/python -m benchmarks.perf.bench_first_run --keep DIR   # clone into DIR, keep it

The clone runs on the default Postgres port (54329) unless another server holds it; then on
a free one (R2A_PG_PORT, said in the results). The temp folder is removed at the end, the
clone's Postgres stopped first. Saves benchmarks/results/first_run.json: total_s, stages,
index_steps, the exit code and the last lines of the log when it failed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.lib.common import arg_parser, finish, new_result

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PG_PORT = 54329
STAGE = re.compile(r"Running stage '([^']+)'")
# a stage whose outputs came from the DVC remote (dvc.lock or the run cache matched: the
# development corpora's on a fresh clone, issue 42): timed as "<name> (restored)"
RESTORED = re.compile(r"Stage '([^']+)' is cached - skipping run|Pulling data for stage: '([^']+)'")
# make echoes each recipe line: `<venv>/bin/r2a run`, `<venv>/bin/dvc repro --force`, ...
RECIPE = re.compile(r"^\S*\.venv/bin/(r2a|dvc) (\w+)")
SEGMENT = {
    ("r2a", "run"): "r2a run",
    ("dvc", "metrics"): "dvc metrics show",
    ("r2a", "demo"): "demo",
    ("r2a", "state"): "r2a state",
}


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def timed_make(target: str, cwd: Path, env: dict[str, str], log: Path) -> tuple[int, list]:
    """Run `make target`; every output line with its arrival time (seconds since start)."""
    lines: list[tuple[float, str]] = []
    t0 = time.perf_counter()
    with open(log, "a") as f:
        proc = subprocess.Popen(
            ["make", target],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            t = time.perf_counter() - t0
            lines.append((t, line.rstrip("\n")))
            f.write(f"[{t:7.1f}] {line}")
            f.flush()
            if STAGE.search(line) or RESTORED.search(line) or RECIPE.match(line):
                print(f"[{t:7.1f} s] {line.rstrip()}", flush=True)
        rc = proc.wait()
    lines.append((time.perf_counter() - t0, ""))  # the end, closing the last stage
    return rc, lines


def stages_of(lines: list[tuple[float, str]], first: str = "make run: before r2a run") -> dict:
    """Seconds per stage: each marker line opens a stage that the next one closes."""
    out: dict[str, float] = {}
    name, start = first, 0.0
    for t, line in lines:
        m, c, r = STAGE.search(line), RESTORED.search(line), RECIPE.match(line)
        new = (
            m.group(1)
            if m
            else f"{c.group(1) or c.group(2)} (restored)"
            if c
            else SEGMENT.get((r.group(1), r.group(2)))
            if r
            else None
        )
        if r and new is None:  # `dvc repro`: its stages follow; the time until then is DVC's
            new = f"{r.group(1)} {r.group(2)}"
        if new is None:
            continue
        out[name] = out.get(name, 0.0) + t - start
        name, start = new, t
    out[name] = out.get(name, 0.0) + lines[-1][0] - start
    return {k: round(v, 1) for k, v in out.items() if v >= 0.05}


def index_steps(clone: Path) -> dict[str, dict[str, float]]:
    out = {}
    for f in sorted((clone / "reports" / "index").glob("*.json")):
        rep = json.loads(f.read_text())
        steps: dict[str, Any] = {
            k.removeprefix("seconds_"): round(float(v), 1)
            for k, v in rep.items()
            if k.startswith("seconds_")
        }
        if rep.get("shares_index_of"):
            steps["shares_index_of"] = rep["shares_index_of"]
        out[f.stem] = steps
    return out


def read_log(path: Path) -> tuple[list[tuple[float, str]], list[tuple[float, str]]]:
    """`make install`'s and `make run`'s stamped lines from a saved log (each make's clock
    starts at 0: the run begins where the time goes back)."""
    parts: list[list[tuple[float, str]]] = [[]]
    last = 0.0
    for raw in path.read_text().splitlines():
        m = re.match(r"^\[\s*([0-9.]+)\] ?(.*)$", raw)
        if not m:
            continue
        t = float(m.group(1))
        if t < last - 1.0 and len(parts) == 1:
            parts.append([])
        last = t
        parts[-1].append((t, m.group(2)))
    if len(parts) < 2 or not parts[1]:
        raise SystemExit(f"{path}: no `make run` section after `make install`'s")
    return parts[0], parts[1]


def _stop_postgres(clone: Path, env: dict[str, str]) -> None:
    r2a = clone / ".venv" / "bin" / "r2a"
    if r2a.exists():
        subprocess.run([str(r2a), "db", "down"], cwd=clone, env=env, capture_output=True)


def _summarise(
    result: dict[str, Any], rc: int, install_s: float, lines: list[tuple[float, str]], clone: Path
) -> None:
    stages = {"install": round(install_s, 1), **stages_of(lines)}
    result |= {
        "exit_code": rc,
        "total_s": round(install_s + lines[-1][0], 1),
        "run_s": round(lines[-1][0], 1),
        "stages": stages,
        "index_steps": index_steps(clone),
    }
    if rc != 0:
        result["log_tail"] = [line for _, line in lines[-30:]]
    top = sorted(stages.items(), key=lambda kv: -kv[1])[:8]
    print(f"make run (fresh clone): exit {rc}, {result['total_s']:.0f} s in all")
    for k, v in top:
        print(f"  {k:32s} {v:7.0f} s")


def main() -> None:
    ap = arg_parser(
        __doc__ or "", "(no quick form: the benchmark is the whole run)", "first_run.json"
    )
    ap.add_argument("--keep", type=Path, help="clone into this folder and keep it")
    ap.add_argument("--source", type=Path, default=ROOT, help="the repository to clone")
    ap.add_argument(
        "--from-log",
        type=Path,
        help="recompute the figures from a saved log and the clone kept with --keep "
        "(no new run; the exit code is read from the log's make errors)",
    )
    args = ap.parse_args()
    if args.from_log is not None:
        if args.keep is None:
            raise SystemExit("--from-log needs --keep, the clone the log is of")
        install, run = read_log(args.from_log)
        failed = any(line.startswith("make: ***") for _, line in run)
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=args.keep, capture_output=True, text=True
        ).stdout.strip()
        result = new_result("first_run", False, commit=commit, from_log=str(args.from_log.name))
        result["note"] = (
            "recomputed from the run's log after it ended: the load averages are the "
            "recomputation's, not the run's"
        )
        _summarise(result, 1 if failed else 0, install[-1][0], run, args.keep)
        finish(result, args.out)
        return
    if not (args.source / ".git").exists():
        raise SystemExit(f"error: {args.source} is not a git checkout (--source)")
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=args.source, capture_output=True, text=True
    ).stdout.strip()
    parent = Path(tempfile.mkdtemp(prefix="r2a-first-run-")) if args.keep is None else None
    clone = args.keep if args.keep is not None else parent / "r2adapter"  # type: ignore[operator]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("R2A_", "MLFLOW_"))}
    env.pop("VIRTUAL_ENV", None)
    port_note = None
    if not _port_free(DEFAULT_PG_PORT):
        env["R2A_PG_PORT"] = str(_free_port())
        port_note = f"port {DEFAULT_PG_PORT} was taken: R2A_PG_PORT={env['R2A_PG_PORT']}"
    result = new_result("first_run", False, commit=commit)
    if port_note:
        result["note"] = port_note
    log = ROOT / "benchmarks" / "results" / "first_run.log"
    log.unlink(missing_ok=True)
    try:
        cloned = subprocess.run(
            ["git", "clone", "-q", str(args.source), str(clone)], capture_output=True, text=True
        )
        if cloned.returncode != 0:  # no repository there, or the folder is not empty
            lines = cloned.stderr.strip().splitlines() or ["git clone failed"]
            raise SystemExit(f"error: cannot clone {args.source}: {lines[-1]}")
        print(f"clone of {commit[:12]} in {clone}; log {log}")
        rc, lines = timed_make("install", clone, env, log)
        install_s = lines[-1][0]
        if rc == 0:
            rc, lines = timed_make("run", clone, env, log)
        _summarise(result, rc, install_s, lines, clone)
    finally:
        _stop_postgres(clone, env)
        if parent is not None:
            shutil.rmtree(parent, ignore_errors=True)
    finish(result, args.out)
    sys.exit(0 if result.get("exit_code") == 0 else 1)


if __name__ == "__main__":
    main()
