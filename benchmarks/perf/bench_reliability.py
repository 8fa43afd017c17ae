"""Issue 44's service probes rerun on the developer's state, with figures: the served
champion (`make run`'s) on a copy of the local MLflow store, so that its aliases can be
broken and its file taken away without touching the real one. `r2a serve` runs with a temp
folder (TMPDIR) and a model cache of its own, a 1 s champion poll and no LLM.

  1. A broken champion: a version no flavour loads is made champion; then --reloads POST
     /reload (and a poll a second): the temp folder's growth (goal 0 bytes), the cache's
     (goal one copy a version), load attempts of the broken version, /route's answers
     (all 200 from the last good version).
  2. The alias deleted for --alias-s seconds: /route and /readyz polled every 0.2 s
     (goal: every one 200).
  3. The registry away (the store file replaced by a folder): /reload's time and status,
     five times (goal: 503 + Retry-After within 5 s), /route meanwhile.
  4. The database away for --outage-s seconds under 8 clients of POST /retrieve (dense):
     when the requests in flight at the stop ended, counted from `pg_ctl stop -m fast`'s
     start (goal: failed within 1 s), the slowest requests,
     statuses, WARNING lines in the service log during the outage (goal <= 10), and the
     time to the first 200 once it is back. Anything else on the embedded Postgres sees it
     down for that time.

The repros of items 2, 3 and 7 (a foreign `sample` folder, two overlapping promotions,
blank questions) are tests (tests/test_dataset_source.py, tests/test_promotion_race.py);
/route_batch under mixed load was a study (benchmarks/studies.md, bench_mixed).

    .venv/bin/python -m benchmarks.perf.bench_reliability           # about 4 min
    .venv/bin/python -m benchmarks.perf.bench_reliability --quick   # 20 reloads, 20 s outage
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.lib.common import (
    arg_parser,
    die,
    finish,
    met,
    new_result,
    require_champion,
    require_db,
)
from r2adapter.demo import start
from r2adapter.processes import free_port, stop, wait_ready

ROOT = Path(__file__).resolve().parents[2]
MODEL = "r2a-router"
Q = {"query": "Who is the father of the director of the film Polish Easter?"}
PROBES = ("broken_champion", "alias_deleted", "registry_away", "database_away")


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


class Probe:
    def __init__(self, url: str, log: Path) -> None:
        self.url, self.log = url, log
        self.http = httpx.Client(base_url=url, timeout=60, trust_env=False)

    def post(self, path: str, body: object = None) -> httpx.Response:
        return self.http.post(path, json=body or {})

    def info(self) -> dict[str, Any]:
        return dict(self.post("/info").json())

    def warnings(self) -> list[str]:
        return [x for x in self.log.read_text(errors="replace").splitlines() if "[WARNING]" in x]


def until(check: Any, limit_s: float) -> float | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if check():
            return time.monotonic() - t0
        time.sleep(0.1)
    return None


def broken_champion(p: Probe, registry: Any, tmp: Path, reloads: int) -> dict[str, Any]:
    good = str(registry.get_model_version_by_alias(MODEL, "champion").version)
    folder = tmp / "broken-model"
    folder.mkdir()
    (folder / "MLmodel").write_text("flavors: {}\n")  # a model no flavour can load
    broken = str(registry.create_model_version(MODEL, source=str(folder)).version)
    temp, cache = tmp / "tmp", tmp / "models"
    temp0, cache0 = folder_bytes(temp), folder_bytes(cache)
    registry.set_registered_model_alias(MODEL, "champion", broken)
    statuses: dict[str, int] = {}
    served: set[str] = set()
    try:
        noticed = until(lambda: bool(p.info().get("failed_versions")), 30)
        t0 = time.monotonic()
        for _ in range(reloads):
            r = p.post("/reload")
            statuses[f"reload_{r.status_code}"] = statuses.get(f"reload_{r.status_code}", 0) + 1
            rr = p.post("/route", Q)
            statuses[f"route_{rr.status_code}"] = statuses.get(f"route_{rr.status_code}", 0) + 1
            if rr.status_code == 200:
                served.add(str(rr.json()["router_version"]))
        seconds = time.monotonic() - t0
        failed = (p.info().get("failed_versions") or {}).get("r2a", {})
        out = {
            "good_version": good,
            "broken_version": broken,
            "noticed_after_s": noticed,
            "reloads": reloads,
            "seconds": round(seconds, 1),
            "polls_meanwhile": int(seconds),  # one a second
            "statuses": statuses,
            "versions_served": sorted(served),
            "load_attempts_of_broken": failed.get("attempts"),
            "temp_folder_growth_bytes": folder_bytes(temp) - temp0,
            "model_cache_growth_bytes": folder_bytes(cache) - cache0,
            "model_cache_versions": sorted(x.name for x in (cache / MODEL).iterdir()),
        }
    finally:
        registry.set_registered_model_alias(MODEL, "champion", good)
    until(lambda: p.info().get("champion_error") is None, 30)
    return out


def alias_deleted(p: Probe, registry: Any, seconds: float) -> dict[str, Any]:
    good = str(registry.get_model_version_by_alias(MODEL, "champion").version)
    registry.delete_registered_model_alias(MODEL, "champion")
    route: dict[int, int] = {}
    ready: dict[int, int] = {}
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            c = p.post("/route", Q).status_code
            route[c] = route.get(c, 0) + 1
            c = p.http.get("/readyz").status_code
            ready[c] = ready.get(c, 0) + 1
            time.sleep(0.2)
        error = p.info().get("champion_error")
    finally:
        registry.set_registered_model_alias(MODEL, "champion", good)
    back = until(lambda: p.info().get("champion_error") is None, 30)
    return {
        "seconds": seconds,
        "route_statuses": route,
        "readyz_statuses": ready,
        "champion_error": error,
        "error_cleared_after_restore_s": back,
    }


def registry_away(p: Probe, db: Path) -> dict[str, Any]:
    away = db.with_suffix(".away")
    os.replace(db, away)
    db.mkdir()  # the store cannot be opened: every registry call fails
    tries: list[dict[str, Any]] = []
    try:
        for _ in range(5):
            t0 = time.monotonic()
            r = p.post("/reload")
            tries.append(
                {
                    "seconds": round(time.monotonic() - t0, 2),
                    "status": r.status_code,
                    "retry_after": r.headers.get("retry-after"),
                    "keys": sorted(r.json())
                    if r.headers.get("content-type", "").startswith("application/json")
                    else None,
                }
            )
        route = p.post("/route", Q).status_code
    finally:
        shutil.rmtree(db)
        os.replace(away, db)
    back = until(lambda: p.post("/reload").status_code == 200, 30)
    return {"reloads": tries, "route_status_meanwhile": route, "reload_200_again_after_s": back}


def database_away(p: Probe, seconds: float) -> dict[str, Any]:
    from r2adapter.store import embedded

    body = {**Q, "mode": "dense", "top_k": 5}
    if p.post("/retrieve", body).status_code != 200:
        die("/retrieve does not answer 200 before the outage")
    log0 = len(p.warnings())
    stop_ev = threading.Event()
    gone = [0.0]
    after: list[tuple[float, float, int]] = []  # (start after the stop, seconds, status)
    lock = threading.Lock()

    def client() -> None:
        with httpx.Client(base_url=p.url, timeout=60, trust_env=False) as c:
            while not stop_ev.is_set():
                t0 = time.monotonic()
                code = c.post("/retrieve", json=body).status_code
                t1 = time.monotonic()
                if gone[0] and t1 >= gone[0]:  # in flight when it went, or sent after
                    with lock:
                        after.append((t0 - gone[0], t1 - t0, code))

    threads = [threading.Thread(target=client, daemon=True) for _ in range(8)]
    for th in threads:
        th.start()
    time.sleep(2)
    try:
        gone[0] = time.monotonic()  # pg_ctl stop -m fast: sessions end, connections refused
        embedded.down()
        stopped_in = time.monotonic() - gone[0]
        time.sleep(seconds)
    finally:
        stop_ev.set()
        for th in threads:
            th.join(60)
        warnings = p.warnings()[log0:]
        embedded.up()
    back = until(lambda: p.post("/retrieve", body).status_code == 200, 30)
    in_flight = [s + t0 for t0, s, _ in after if t0 < 0]  # ends, seconds past the stop
    statuses: dict[int, int] = {}
    for _, _, code in after:
        statuses[code] = statuses.get(code, 0) + 1
    return {
        "seconds": seconds,
        "clients": len(threads),
        "requests": len(after),
        "statuses": statuses,
        "stop_took_s": round(stopped_in, 2),
        "in_flight_failed_within_s": round(max(in_flight), 3) if in_flight else None,
        "slowest": [
            {"started_s": round(t0, 3), "took_s": round(s, 3), "status": code}
            for t0, s, code in sorted(after, key=lambda x: -x[1])[:8]
        ],
        "slowest_request_s": round(max(s for _, s, _ in after), 3) if after else None,
        "warning_lines": len(warnings),
        "warning_samples": warnings[:5],
        "first_200_after_restart_s": back,
    }


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__ or "", "20 reloads, 5 s alias, 20 s outage", "reliability.json")
    ap.add_argument("--reloads", type=int, default=100)
    ap.add_argument("--alias-s", type=float, default=15.0)
    ap.add_argument("--outage-s", type=float, default=60.0)
    ap.add_argument(
        "--probes", default=",".join(PROBES), help=f"which to run, of {','.join(PROBES)}"
    )
    args = ap.parse_args(argv)
    chosen = [x for x in args.probes.split(",") if x]
    if not chosen or set(chosen) - set(PROBES):
        die(f"--probes takes a comma list of {', '.join(PROBES)}, not {args.probes!r}")
    if args.quick:
        args.reloads, args.alias_s, args.outage_s = 20, 5.0, 20.0
    require_db()
    require_champion()
    from mlflow import MlflowClient

    from r2adapter.config import settings
    from r2adapter.registry.tracking import relocate

    src = settings().mlflow_uri
    if not src.startswith("sqlite:///"):
        die(f"this probe copies the local MLflow store; the tracking URI is {src}")
    tmp = Path(tempfile.mkdtemp(prefix="r2a-bench-reliability-"))
    store = tmp / "mlruns"
    shutil.copytree(Path(src.removeprefix("sqlite:///")).parent, store)
    relocate(store / "mlflow.db")  # the copy's artifact locations point into the copy
    (tmp / "tmp").mkdir()
    uri = f"sqlite:///{store / 'mlflow.db'}"
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": uri,
        "MLFLOW_SQLALCHEMYSTORE_POOLCLASS": "NullPool",  # the file opened per request
        "R2A_KWAY": "0",  # the two-way champion alone: its alias is the one probed
        "R2A_CHAMPION_POLL_S": "1",
        "R2A_MODEL_CACHE": str(tmp / "models"),
        "TMPDIR": str(tmp / "tmp"),
        "R2A_LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "R2A_LLM_MODEL": "none",
        "BENTOML_DO_NOT_TRACK": "true",
    }
    registry = MlflowClient(uri, uri)
    result = new_result("reliability", args.quick)
    log = tmp / "serve.log"
    port = free_port()
    proc = start(env, log, port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc, 600)
        p = Probe(url, log)
        runs = {
            "broken_champion": lambda: broken_champion(p, registry, tmp, args.reloads),
            "alias_deleted": lambda: alias_deleted(p, registry, args.alias_s),
            "registry_away": lambda: registry_away(p, store / "mlflow.db"),
            "database_away": lambda: database_away(p, args.outage_s),
        }
        for name in chosen:
            print(f"{name} ...", flush=True)
            result[name] = runs[name]()
    finally:
        stop(proc)
    targets: dict[str, bool] = {}
    if b := result.get("broken_champion"):
        targets["temp_folder_growth_0_bytes"] = b["temp_folder_growth_bytes"] == 0
        targets["broken_loaded_once"] = b["load_attempts_of_broken"] == 1
        targets["good_served_throughout"] = b["versions_served"] == [b["good_version"]] and set(
            b["statuses"]
        ) == {"reload_200", "route_200"}
        print(
            f"broken champion, {b['reloads']} reloads in {b['seconds']} s: temp folder "
            f"+{b['temp_folder_growth_bytes']} B, cache +{b['model_cache_growth_bytes'] / 1e6:.1f}"
            f" MB ({', '.join(b['model_cache_versions'])}), broken loaded "
            f"{b['load_attempts_of_broken']}x, served {b['versions_served']} {b['statuses']}"
        )
    if a := result.get("alias_deleted"):
        targets["route_200_without_alias"] = set(a["route_statuses"]) == {200} and set(
            a["readyz_statuses"]
        ) == {200}
        print(
            f"alias deleted {a['seconds']:.0f} s: /route {a['route_statuses']}, "
            f"/readyz {a['readyz_statuses']}"
        )
    if r := result.get("registry_away"):
        targets["reload_503_within_5_s"] = all(
            x["status"] == 503 and x["retry_after"] and x["seconds"] < 5 for x in r["reloads"]
        )
        print(
            "registry away: /reload "
            + ", ".join(f"{x['status']} in {x['seconds']} s" for x in r["reloads"])
            + f"; /route {r['route_status_meanwhile']}"
        )
    if d := result.get("database_away"):
        targets["in_flight_failed_within_1_s"] = (d["in_flight_failed_within_s"] or 0) <= 1.0
        targets["warning_lines_at_most_10"] = d["warning_lines"] <= 10
        print(
            f"database away {d['seconds']:.0f} s (stop took {d['stop_took_s']} s), "
            f"{d['clients']} clients: in flight failed within {d['in_flight_failed_within_s']} s"
            f" of the stop, statuses {d['statuses']}, WARNING lines {d['warning_lines']}, "
            f"first 200 {d['first_200_after_restart_s']} s after the restart"
        )
    result.update(targets=targets, met=all(targets.values()))
    for k, v in targets.items():
        print(f"  {k}: {met(v)}")
    finish(result, args.out)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
