"""Load test of the BentoML service over HTTP on 127.0.0.1 (the service runs as a child).

Phases, each bounded in time (--duration) and in request count (--max-requests), with
--clients concurrent clients (asyncio + one httpx.AsyncClient, keep-alive) replaying the
7,405 HotpotQA dev questions in order, each client taking the next question:

  0. GET /healthz: the HTTP stack's floor on these cores, no model work;
  1. POST /route with adaptive batching (the default service);
  2. POST /retrieve, mode auto, top_k 5 (same service: routing, rewriting when the router
     sends a query to graph with p_graph < ε, retrieval);
  3. /retrieve on the dataset's own questions, one request at a time (sequential, one
     client), each question in mode auto, graph and dense with the order rotated per
     question: p50 per mode and the auto/graph ratio;
  4. POST /route again on a second service started with R2A_ROUTER_BATCHING=0.

Per phase: throughput (successful requests per second of the phase's wall time), latency
p50/p95/p99 (client side, successful requests), errors (non-200 responses, bodies without
the expected field, exceptions) by kind. Before timing, each service is warmed up (routes,
retrievals in every mode, and the rewriter's LLM loaded) so no phase pays a one-time load.
The load average is recorded around every phase: the machine is shared and the numbers move.

    .venv/bin/python -m benchmarks.perf.bench_load --dataset musique       # 30 s a phase
    .venv/bin/python -m benchmarks.perf.bench_load --dataset musique --quick   # 5 s a phase
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from tqdm import tqdm

from benchmarks.lib.common import (
    add_champion_args,
    arg_parser,
    champion_dataset,
    die,
    finish,
    met,
    new_result,
    require_db,
)
from benchmarks.lib.loadgen import (
    Profiler,
    Service,
    ServiceError,
    check_body,
    cycle,
    load_hotpot,
    route_floor,
    run_load,
    timed_phase,
)
from r2adapter.evaluate.results_file import loadavg, pct

ROOT = Path(__file__).resolve().parents[2]
HOTPOT = ROOT / "data" / "hotpotqa" / "hotpotqa_dev_questions_7405.json"
MODES = ("auto", "graph", "dense")
TARGET_ROUTE_P50_MS = 40.0  # /route p50 at 8 clients on 2 cores (issue 12)
TARGET_AUTO_OVER_GRAPH = 0.7  # auto p50 <= 0.7 x always-graph p50 (30% faster)
TARGET_CLIENTS = 8


# -- warm-up and the sequential mode comparison ----------------------------------------------


def warm_up(
    url: str, questions: list[str], n: int, llm: bool, llm_wait_s: float, timeout_s: float
) -> dict[str, Any]:
    """Untimed requests so no phase pays a one-time cost: routes, retrievals in each mode
    when `llm` (the retrievers and the graph load on first use), then a wait of up to
    `llm_wait_s` for the LLM the service preloads at start (/readyz/answer)."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {"errors": 0}
    qs = iter(questions)
    with httpx.Client(base_url=url, timeout=max(timeout_s, 120), trust_env=False) as c:
        first: dict[str, float] = {}
        calls = [("/route", {"query": next(qs)}) for _ in range(n)]
        if llm:
            calls += [
                ("/retrieve", {"query": next(qs), "mode": m, "top_k": 5})
                for _ in range(2)
                for m in MODES
            ]
        for path, body in tqdm(calls, desc="warm-up", unit="req", leave=False):
            t = time.perf_counter()
            try:
                ok = c.post(path, json=body).status_code == 200
            except httpx.HTTPError:
                ok = False
            first.setdefault(f"{path} {body.get('mode', '')}".strip(), (time.perf_counter() - t))
            out["errors"] += not ok
        out["first_call_s"] = {k: round(v, 3) for k, v in first.items()}
        # the service preloads its LLM in a thread at start (the /answer path): wait for it,
        # so no timed phase shares the cores with the load (it took ~40% of the samples of
        # a /route phase profiled while it ran)
        deadline = time.monotonic() + llm_wait_s
        t_llm = time.perf_counter()
        ready, reason = False, ""
        while time.monotonic() < deadline:
            try:
                r = c.get("/readyz/answer")
                ready = r.status_code == 200
                reason = "" if ready else str(r.json().get("error", r.status_code))
            except (httpx.HTTPError, ValueError) as e:
                reason = type(e).__name__
            if ready or "unavailable" in reason:  # loaded, or it never will
                break
            time.sleep(1)
        out["llm"] = {"ready": ready, "waited_s": round(time.perf_counter() - t_llm, 1)}
        if reason:
            out["llm"]["reason"] = reason
    out["s"] = round(time.perf_counter() - t0, 2)
    return out


def mode_comparison(
    url: str, questions: list[str], top_k: int, budget_s: float, timeout_s: float
) -> dict[str, Any]:
    """Each question in every mode, one request at a time, mode order rotated per question
    so drift in the machine's load falls on all modes alike; stops after `budget_s`."""
    lat: dict[str, list[float]] = {m: [] for m in MODES}
    server: dict[str, dict[str, list[float]]] = {m: {} for m in MODES}
    errors: dict[str, Counter[str]] = {m: Counter() for m in MODES}
    auto_by_decision: dict[str, list[float]] = {"dense": [], "graph": []}
    auto_no_rewrite: list[float] = []  # auto's latency less the server's rewrite time
    graph_when_auto_graph: list[float] = []  # graph-mode latency of the auto-graph questions
    rewrites: Counter[str] = Counter()
    strategies: Counter[str] = Counter()  # auto's strategy when the k-way router routes it
    t_end = time.monotonic() + budget_s
    done = 0
    before = loadavg()
    t0 = time.perf_counter()
    with httpx.Client(base_url=url, timeout=timeout_s, trust_env=False) as c:
        for i, q in enumerate(tqdm(questions, desc="modes (sequential)", unit="question")):
            if time.monotonic() >= t_end:
                break
            order = MODES[i % 3 :] + MODES[: i % 3]
            got: dict[str, tuple[float, dict[str, Any]]] = {}
            for m in order:
                t = time.perf_counter()
                try:
                    r = c.post("/retrieve", json={"query": q, "mode": m, "top_k": top_k})
                except httpx.HTTPError as e:
                    errors[m][type(e).__name__] += 1
                    continue
                ms = (time.perf_counter() - t) * 1000
                if r.status_code != 200:
                    errors[m][f"status_{r.status_code}"] += 1
                    continue
                body = r.json()
                if "passages" not in body:
                    errors[m]["bad_body"] += 1
                    continue
                lat[m].append(ms)
                got[m] = (ms, body)
                for stage, v in (body.get("timings_ms") or {}).items():
                    server[m].setdefault(stage, []).append(float(v))
            done += 1
            if "auto" in got:
                ms, body = got["auto"]
                auto_by_decision.setdefault(body["decision"], []).append(ms)
                strategies[body.get("strategy") or body["decision"]] += 1
                auto_no_rewrite.append(ms - float(body["timings_ms"].get("rewrite", 0.0)))
                if body.get("rewritten"):
                    rewrites["rewritten"] += 1
                elif body.get("rewrite_fallback"):
                    rewrites[f"fallback_{body['rewrite_fallback']}"] += 1
                if body["decision"] == "graph" and "graph" in got:
                    graph_when_auto_graph.append(got["graph"][0])
    wall = time.perf_counter() - t0

    def stats(v: list[float]) -> dict[str, Any]:
        if not v:
            return {"n": 0}
        return {
            "n": len(v),
            "p50_ms": pct(v, 50),
            "p95_ms": pct(v, 95),
            "mean_ms": float(np.mean(v)),
        }

    per_mode = {
        m: {
            **stats(lat[m]),
            "errors": sum(errors[m].values()),
            "errors_by_kind": dict(errors[m]),
            "server_timings_p50_ms": {k: pct(v, 50) for k, v in server[m].items()},
        }
        for m in MODES
    }
    p50 = {m: per_mode[m].get("p50_ms") for m in MODES}
    ratio = p50["auto"] / p50["graph"] if p50["auto"] and p50["graph"] else None
    n_auto = len(lat["auto"])
    return {
        "concurrency": "sequential: one client, one request at a time",
        "questions_planned": len(questions),
        "questions_done": done,
        "budget_s": budget_s,
        "wall_s": round(wall, 2),
        "loadavg_before": before,
        "loadavg_after": loadavg(),
        "modes": per_mode,
        "auto_over_graph_p50": ratio,
        "auto": {
            "graph_share": len(auto_by_decision.get("graph", [])) / n_auto if n_auto else None,
            # kway routes auto over every strategy (<retriever>@<k>); two-way: dense/graph
            "strategy_share": {k: v / n_auto for k, v in strategies.most_common()}
            if n_auto
            else {},
            "by_decision": {k: stats(v) for k, v in auto_by_decision.items()},
            "rewrites": dict(rewrites),
            "less_server_rewrite_time": stats(auto_no_rewrite),
            "auto_less_rewrite_over_graph_p50": (
                pct(auto_no_rewrite, 50) / p50["graph"]
                if auto_no_rewrite and p50["graph"]
                else None
            ),
            "graph_mode_on_auto_graph_questions": stats(graph_when_auto_graph),
        },
    }


# -- main ------------------------------------------------------------------------------------


def load_phase(
    svc: Service,
    path: str,
    field_name: str,
    bodies: Iterator[dict[str, Any]],
    args: argparse.Namespace,
    desc: str,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One timed phase of `args.clients` clients posting to `path` (a reply without
    `field_name` is an error): its figures, with the share routed to graph, and the
    successful replies."""
    res, load = timed_phase(
        lambda: run_load(
            svc.url,
            path,
            bodies,
            clients=args.clients,
            duration_s=args.duration,
            max_requests=args.max_requests,
            timeout_s=args.timeout,
            check=check_body(field_name),
            alive=svc.alive,
            desc=desc,
            keep_bodies=True,
        )
    )
    out = {**res.summary(), **load, "clients": args.clients}
    if res.bodies:
        graph = sum(b["decision"] == "graph" for b in res.bodies)
        out["graph_share"] = graph / len(res.bodies)
    return out, res.bodies


def http_floor(svc: Service, args: argparse.Namespace) -> dict[str, Any]:
    """GET /healthz under the same clients: what the HTTP stack, the event loop and the
    load generator cost on these cores with no model work, a floor under /route's p50."""
    res, load = timed_phase(
        lambda: run_load(
            svc.url,
            "/healthz",
            cycle([{}]),
            clients=args.clients,
            duration_s=args.duration,
            max_requests=args.max_requests,
            timeout_s=args.timeout,
            check=lambda body: True,
            alive=svc.alive,
            desc="/healthz floor",
            method="GET",
        )
    )
    return {**res.summary(), **load, "clients": args.clients}


# -- where /route's time goes: the floor and a profile ---------------------------------------


def model_cpu_ms(dataset: str, router_kind: str, questions: list[str]) -> dict[str, float]:
    """CPU ms per query, one query at a time in this process, of the two model parts of
    /route: the retrieval encoder (the router's evidence reads its embedding) and the
    champion router's own scoring. Measured before any service starts."""
    from r2adapter.index.encoder import get_encoder
    from r2adapter.registry.models import load_router

    enc = get_encoder()
    router, _ = load_router(router_kind, "champion")
    router.bind(dataset)
    for q in questions[:5]:  # first calls load and compile
        router.score([q], enc.encode([q]))
    enc_ms, score_ms = [], []
    for q in questions:
        t0 = time.process_time()
        v = enc.encode([q])
        t1 = time.process_time()
        router.score([q], v)
        enc_ms.append((t1 - t0) * 1000)
        score_ms.append((time.process_time() - t1) * 1000)
    return {"encode": float(np.median(enc_ms)), "router": float(np.median(score_ms))}


def rel(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def table(phases: dict[str, dict[str, Any]]) -> str:
    head = (
        f"{'phase':<22}{'clients':>8}{'req/s':>9}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}"
        f"{'ok':>7}{'errors':>7}{'load 1m':>8}"
    )
    lines = [head, "-" * len(head)]
    for name, p in phases.items():
        lines.append(
            f"{name:<22}{p['clients']:>8}{p['throughput_rps']:>9.1f}"
            f"{p.get('p50_ms', float('nan')):>9.1f}{p.get('p95_ms', float('nan')):>9.1f}"
            f"{p.get('p99_ms', float('nan')):>9.1f}{p['ok']:>7}{p['errors']:>7}"
            f"{p['loadavg_after'][0]:>8.2f}"
        )
    return "\n".join(lines)


def retrieve_phases(
    svc: Service,
    args: argparse.Namespace,
    retrieve_bodies: Iterator[dict[str, Any]],
    ds_questions: list[str],
    mode_budget: float,
    result: dict[str, Any],
) -> None:
    """Phases 2 and 3: /retrieve auto under load, then the sequential mode comparison."""
    phases = result["phases"]
    phases["retrieve_auto"], b = load_phase(
        svc, "/retrieve", "passages", retrieve_bodies, args, "/retrieve auto"
    )
    if b:
        phases["retrieve_auto"].update(
            rewritten=sum(bool(x.get("rewritten")) for x in b),
            rewrite_fallbacks=dict(
                Counter(x["rewrite_fallback"] for x in b if x.get("rewrite_fallback"))
            ),
            server_timings_p50_ms={
                s: pct([float(x["timings_ms"][s]) for x in b], 50)
                for s in ("route", "rewrite", "retrieve")
            },
        )
    result["modes"] = mode_comparison(
        svc.url, ds_questions, args.top_k, mode_budget, max(args.timeout, 60)
    )


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__, "5 s a phase, 15 mode questions", "load.json")
    add_champion_args(ap, "dataset the service serves and whose questions the mode comparison uses")
    ap.add_argument("--clients", type=int, default=TARGET_CLIENTS)
    ap.add_argument("--duration", type=float, help="seconds per load phase (30; quick 5)")
    ap.add_argument("--max-requests", type=int, default=20_000, help="cap per load phase")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    ap.add_argument("-k", "--top-k", type=int, default=5)
    ap.add_argument(
        "--mode-queries", type=int, help="dataset questions for the mode comparison (100; quick 15)"
    )
    ap.add_argument(
        "--mode-budget", type=float, help="seconds for the mode comparison (600; quick 90)"
    )
    ap.add_argument(
        "--rewrite-budget",
        type=float,
        help="R2A_REWRITE_BUDGET_S for the service (default: the service's, 5 s)",
    )
    ap.add_argument(
        "--service-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment for the service (repeatable), e.g. OMP_NUM_THREADS=1",
    )
    ap.add_argument("--startup-timeout", type=float, default=300.0)
    ap.add_argument("--llm-wait", type=float, default=180.0, help="wait for the LLM to load")
    ap.add_argument("--log-dir", type=Path, help="service logs (default: a temporary folder)")
    ap.add_argument(
        "--route-only",
        action="store_true",
        help="only the /healthz floor and the two /route phases (no /retrieve, no modes, no LLM)",
    )
    ap.add_argument(
        "--profile",
        type=Path,
        metavar="SVG",
        help="py-spy flame graph of the service during the batched /route phase, written here "
        "(its top frames go into the JSON)",
    )
    args = ap.parse_args(argv)
    if args.clients < 1 or args.max_requests < 1 or args.timeout <= 0:
        die("--clients, --max-requests and --timeout must be positive")
    args.duration = args.duration or (5.0 if args.quick else 30.0)
    n_modes = args.mode_queries or (15 if args.quick else 100)
    mode_budget = args.mode_budget or (90.0 if args.quick else 600.0)
    warm_n = 8 if args.quick else 16
    # SIGTERM runs the `finally` clauses that stop the service
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    require_db()  # one line and exit 1 when Postgres is down
    dataset = champion_dataset(args.dataset, args.router)  # exit 1 when it is not indexed
    from r2adapter.evaluate.retrieval import stored_queries
    from r2adapter.registry.models import alias_version, model_name

    champ = alias_version(args.router, "champion")
    if champ is None:
        die(f"no champion for {model_name(args.router)}: run `r2a train` then `r2a promote`")
    hotpot = load_hotpot(HOTPOT)
    print("model CPU per query (encoder, router), one at a time, before the services start")
    model_ms = model_cpu_ms(dataset, args.router, hotpot[1000 : 1100 if not args.quick else 1020])
    ds_questions = [q.question for q in stored_queries(dataset, complete_only=False)][:n_modes]
    if not ds_questions:
        die(f"dataset '{dataset}' has no stored questions: run `r2a data load` first")
    # warm-up takes its questions from the end, the timed phases from the start
    warm_qs = hotpot[::-1]

    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="r2a-bench-load-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    env = {"R2A_SERVE_DATASET": dataset, "R2A_ROUTER": args.router}
    if args.rewrite_budget:
        env["R2A_REWRITE_BUDGET_S"] = str(args.rewrite_budget)
    for item in args.service_env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            die(f"--service-env takes NAME=VALUE, not {item!r}")
        env[name] = value

    result: dict[str, Any] = {
        **new_result("load", args.quick),
        "config": {
            "dataset": dataset,
            "router": args.router,
            "champion_version": str(champ.version),
            "champion_dataset_tag": champ.tags.get("dataset"),
            "clients": args.clients,
            "duration_s": args.duration,
            "max_requests_per_phase": args.max_requests,
            "request_timeout_s": args.timeout,
            "top_k": args.top_k,
            "load_questions": f"{HOTPOT.relative_to(ROOT)} ({len(hotpot)}), in order",
            "mode_questions": f"{dataset}: first {len(ds_questions)} stored questions",
            "rewrite_budget_s": args.rewrite_budget or "service default (5)",
            "service_env": env,
            "host": "127.0.0.1",
            "client": "asyncio + httpx.AsyncClient, keep-alive, in this process (shares the "
            "2 cores with the service)",
        },
        "notes": "throughput = successful requests / phase wall time (the deadline plus the "
        "requests in flight at it); latency client side, successful requests only; errors = "
        "non-200, bodies without the expected field, exceptions.",
        "services": {},
        "phases": {},
    }
    route_bodies = cycle([{"query": q} for q in hotpot])
    retrieve_bodies = cycle([{"query": q, "mode": "auto", "top_k": args.top_k} for q in hotpot])
    try:
        print(f"service (adaptive batching) for {dataset}, logs in {log_dir}")
        with Service(env, log_dir / "serve-batching.log", args.startup_timeout) as svc:
            info = httpx.post(f"{svc.url}/info", json={}, timeout=30, trust_env=False).json()
            warm = warm_up(
                svc.url, warm_qs, warm_n, not args.route_only, args.llm_wait, args.timeout
            )
            result["services"]["batching"] = {
                "startup_s": round(svc.startup_s, 2),
                "info": info,
                "warmup": warm,
            }
            phases = result["phases"]
            phases["healthz_floor"] = http_floor(svc, args)
            with Profiler(svc, args.profile) as prof:
                phases["route_batching"], _ = load_phase(
                    svc, "/route", "decision", route_bodies, args, "/route batching"
                )
            if prof.top:
                result["profile"] = {"svg": rel(args.profile), "top_self_share": prof.top}
            result["floor"] = route_floor(phases["healthz_floor"], args.clients, model_ms)
            if not args.route_only:
                retrieve_phases(svc, args, retrieve_bodies, ds_questions, mode_budget, result)
        print("service without batching (R2A_ROUTER_BATCHING=0)")
        env0 = {**env, "R2A_ROUTER_BATCHING": "0"}
        with Service(env0, log_dir / "serve-no-batching.log", args.startup_timeout) as svc:
            warm = warm_up(svc.url, warm_qs, warm_n, False, args.llm_wait, args.timeout)
            result["services"]["no_batching"] = {"startup_s": round(svc.startup_s, 2), **warm}
            # the same questions as the batched run, from the start
            again = cycle([{"query": q} for q in hotpot])
            phases["route_no_batching"], _ = load_phase(
                svc, "/route", "decision", again, args, "/route no batching"
            )
    except ServiceError as e:
        die(str(e))

    # -- targets ---------------------------------------------------------------------------
    phases = result["phases"]
    modes = result.get("modes") or {"modes": {}, "auto_over_graph_p50": None}
    errors = sum(p["errors"] for p in phases.values()) + sum(
        m["errors"] for m in modes["modes"].values()
    )
    route_p50 = phases["route_batching"].get("p50_ms")
    ratio = modes["auto_over_graph_p50"]
    floor = result["floor"]
    result["targets"] = {
        "zero_errors": {"errors": errors, "met": errors == 0},
        "route_p50_ms": {
            "target": TARGET_ROUTE_P50_MS,
            "clients": args.clients,
            "batching": route_p50,
            "healthz_floor": phases["healthz_floor"].get("p50_ms"),
            "floor_p50_ms": floor.get("p50_ms"),
            "no_batching": phases["route_no_batching"].get("p50_ms"),
            "met": route_p50 is not None and route_p50 <= TARGET_ROUTE_P50_MS,
            "met_without_batching": (phases["route_no_batching"].get("p50_ms") or 1e9)
            <= TARGET_ROUTE_P50_MS,
            "evaluated_as_specified": args.clients == TARGET_CLIENTS,
        },
        "auto_over_graph_p50": {
            "target_max": TARGET_AUTO_OVER_GRAPH,
            "ratio": ratio,
            **{f"{k}_p50_ms": modes["modes"].get(k, {}).get("p50_ms") for k in MODES},
            "concurrency": "sequential",
            "met": ratio is not None and ratio <= TARGET_AUTO_OVER_GRAPH,
        },
    }

    print()
    print(table(phases))
    m = modes
    if m["modes"]:
        print(
            f"\nmodes on {dataset} ({m['questions_done']} questions, sequential): "
            + ", ".join(
                f"{k} p50 {v.get('p50_ms', float('nan')):.1f} ms" for k, v in m["modes"].items()
            )
            + f"; auto graph share {m['auto']['graph_share'] or 0:.2f}, "
            f"rewrites {m['auto']['rewrites']}"
        )
    t = result["targets"]
    print(f"target 0 errors: {t['zero_errors']['errors']} ({met(t['zero_errors']['met'])})")
    print(
        f"target /route p50 <= {TARGET_ROUTE_P50_MS:.0f} ms at {args.clients} clients: "
        f"batching {_ms(route_p50)} ({met(t['route_p50_ms']['met'])}), without "
        f"{_ms(t['route_p50_ms']['no_batching'])}; GET /healthz floor "
        f"{_ms(t['route_p50_ms']['healthz_floor'])}; this run's floor for /route "
        f"{_ms(floor.get('p50_ms'))} ({floor.get('rps', 0):.0f} req/s)"
    )
    print(
        f"target auto p50 <= {TARGET_AUTO_OVER_GRAPH} x graph p50: ratio "
        f"{'n/a' if ratio is None else f'{ratio:.2f}'} ({met(t['auto_over_graph_p50']['met'])})"
    )
    finish(result, args.out)
    return 0


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f} ms"


if __name__ == "__main__":
    raise SystemExit(main())
