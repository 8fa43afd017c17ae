"""The load-generation harness of the service benchmarks (bench_load): the service as a child
process (`Service`), closed-loop clients posting over one keep-alive httpx.AsyncClient
(`run_load`, its `PhaseResult`), the HotpotQA questions they replay, a py-spy profile of the
service with its flame graph drawn here, and the floor under /route's p50 from the HTTP
stack's throughput and the model CPU a request.

Run as a script, it loads any running service, or draws a flame graph from a profile's
collapsed stacks, or computes a floor; each prints one JSON object last:

    .venv/bin/python -m benchmarks.lib.loadgen load http://127.0.0.1:3000 /route \\
        --body '{"query": "Who directed Heat?"}' --check decision --clients 8 --duration 10
    .venv/bin/python -m benchmarks.lib.loadgen flame route.collapsed.txt route.svg
    .venv/bin/python -m benchmarks.lib.loadgen floor --healthz-rps 560 --clients 8 \\
        --model-ms encode=3.6 --model-ms router=5.6
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from tqdm import tqdm

from benchmarks.lib.common import die
from r2adapter.demo import start
from r2adapter.errors import R2AError
from r2adapter.evaluate.results_file import loadavg, pct
from r2adapter.processes import free_port, stop, wait_ready

# -- the service as a child process ---------------------------------------------------------


class ServiceError(Exception):
    pass


class Service:
    """`python -m r2adapter.cli serve` on 127.0.0.1 in its own process group."""

    def __init__(self, env: dict[str, str], log_path: Path, startup_timeout: float) -> None:
        self.env = env
        self.log_path = log_path
        self.startup_timeout = startup_timeout
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.startup_s = 0.0

    def __enter__(self) -> Service:
        t0 = time.perf_counter()
        self.proc = start({**os.environ, **self.env}, self.log_path, self.port)
        try:
            wait_ready(self.url, self.proc, self.startup_timeout)
        except R2AError as e:
            self.stop()
            raise ServiceError(f"{e}: {self.last_log_line()} (log: {self.log_path})") from None
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.perf_counter() - t0
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def last_log_line(self) -> str:
        try:
            lines = [ln for ln in self.log_path.read_text(errors="replace").splitlines() if ln]
        except OSError:
            return "no log"
        return lines[-1][:300] if lines else "empty log"

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)


# -- load generation -------------------------------------------------------------------------


@dataclass
class PhaseResult:
    latencies_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)  # successful bodies, if kept
    wall_s: float = 0.0
    stopped_early: str | None = None

    def error(self, kind: str, detail: str) -> None:
        self.errors[kind] += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(f"{kind}: {detail[:200]}")

    def summary(self) -> dict[str, Any]:
        v = np.asarray(self.latencies_ms, dtype=np.float64)
        n_err = sum(self.errors.values())
        out: dict[str, Any] = {
            "requests": int(v.size) + n_err,
            "ok": int(v.size),
            "errors": n_err,
            "errors_by_kind": dict(self.errors),
            "error_samples": self.error_samples,
            "wall_s": round(self.wall_s, 3),
            "throughput_rps": v.size / self.wall_s if self.wall_s > 0 else 0.0,
        }
        if v.size:
            out.update(
                p50_ms=pct(v, 50),
                p95_ms=pct(v, 95),
                p99_ms=pct(v, 99),
                mean_ms=float(v.mean()),
                min_ms=float(v.min()),
                max_ms=float(v.max()),
            )
        if self.stopped_early:
            out["stopped_early"] = self.stopped_early
        return out


def check_body(field_name: str) -> Callable[[Any], bool]:
    return lambda body: isinstance(body, dict) and field_name in body


async def run_load(
    url: str,
    path: str,
    bodies: Iterator[dict[str, Any]],
    *,
    clients: int,
    duration_s: float,
    max_requests: int,
    timeout_s: float,
    check: Callable[[Any], bool],
    alive: Callable[[], bool] = lambda: True,
    desc: str = "",
    keep_bodies: bool = False,
    transport: httpx.AsyncBaseTransport | None = None,
    method: str = "POST",
) -> PhaseResult:
    """`clients` workers post the next body until `duration_s` has passed or `max_requests`
    have been started. A request in flight at the deadline is allowed to finish (each has
    `timeout_s`); the whole phase is cancelled at duration + timeout + 5 s regardless."""
    res = PhaseResult()
    started = 0
    stop = asyncio.Event()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    bar = tqdm(total=round(duration_s), desc=desc or path, unit="s", leave=False)

    async def worker(client: httpx.AsyncClient, deadline: float) -> None:
        nonlocal started
        while not stop.is_set() and time.monotonic() < deadline and started < max_requests:
            try:
                body = next(bodies)
            except StopIteration:
                return
            started += 1
            t0 = time.perf_counter()
            try:
                r = await (client.post(path, json=body) if method == "POST" else client.get(path))
            except (httpx.HTTPError, OSError) as e:
                res.error(type(e).__name__, str(e) or type(e).__name__)
                await asyncio.sleep(0.05)  # a dead server must not turn this into a busy loop
                continue
            ms = (time.perf_counter() - t0) * 1000
            if r.status_code != 200:
                res.error(f"status_{r.status_code}", r.text)
                continue
            if method != "POST":  # a probe (GET /healthz): the status is the answer
                res.latencies_ms.append(ms)
                continue
            try:
                data = r.json()
            except json.JSONDecodeError:
                res.error("bad_json", r.text)
                continue
            if not check(data):
                res.error("bad_body", r.text)
                continue
            res.latencies_ms.append(ms)
            if keep_bodies:
                res.bodies.append(data)

    async def ticker(t0: float) -> None:
        while not stop.is_set():
            await asyncio.sleep(1)
            bar.n = min(round(time.monotonic() - t0), bar.total)
            bar.set_postfix(ok=len(res.latencies_ms), err=sum(res.errors.values()))
            if not alive():
                res.stopped_early = "the service exited"
                stop.set()

    async with httpx.AsyncClient(
        base_url=url, timeout=timeout_s, limits=limits, trust_env=False, transport=transport
    ) as client:
        t0 = time.monotonic()
        deadline = t0 + duration_s
        tick = asyncio.create_task(ticker(t0))
        work = asyncio.gather(*(worker(client, deadline) for _ in range(clients)))
        try:
            await asyncio.wait_for(work, duration_s + timeout_s + 5)
        except TimeoutError:
            res.stopped_early = "hard stop at duration + request timeout"
        finally:
            res.wall_s = time.monotonic() - t0
            stop.set()
            tick.cancel()
            bar.close()
    return res


def cycle(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    while True:
        yield from items


def timed_phase(coro_fn: Callable[[], Any]) -> tuple[PhaseResult, dict[str, Any]]:
    before = loadavg()
    res = asyncio.run(coro_fn())
    return res, {"loadavg_before": before, "loadavg_after": loadavg()}


# -- the questions the clients replay ------------------------------------------------------


def load_hotpot(path: Path) -> list[str]:
    try:
        rows = json.loads(path.read_text())
        qs = [r["question"] for r in rows if isinstance(r.get("question"), str)]
    except (OSError, ValueError, TypeError, AttributeError, KeyError) as e:
        die(f"cannot read the HotpotQA questions from {path}: {e}")
    if not qs:
        die(f"{path} holds no questions")
    return qs


# -- where /route's time goes: the floor and a profile ---------------------------------------


def route_floor(
    healthz: dict[str, Any], clients: int, model_ms: dict[str, float]
) -> dict[str, Any]:
    """What /route could do on these cores if it cost only the HTTP round trip (client and
    server, from this run's /healthz throughput: every core busy) plus its model work: CPU ms
    a request, the req/s that allows, and the p50 of `clients` closed-loop clients at it."""
    cores = len(os.sched_getaffinity(0))
    rps_h = healthz.get("throughput_rps") or 0.0
    if not rps_h:
        return {}
    http_ms = cores * 1000.0 / rps_h
    cpu_ms = http_ms + sum(model_ms.values())
    rps = cores * 1000.0 / cpu_ms
    return {
        "cores": cores,
        "http_cpu_ms": round(http_ms, 2),
        "model_cpu_ms": {k: round(v, 2) for k, v in model_ms.items()},
        "cpu_ms_per_request": round(cpu_ms, 2),
        "rps": round(rps, 1),
        "p50_ms": round(clients * 1000.0 / rps, 1),
    }


class Profiler:
    """`py-spy record` of the service's process tree while the block runs: a flame graph
    (SVG) at `svg` and the frames with the largest share of samples (self time, from the
    raw output). A no-op when `svg` is None; a one-line error when py-spy is missing."""

    def __init__(self, svc: Service, svg: Path | None) -> None:
        self.svc, self.svg = svc, svg
        self.top: list[dict[str, Any]] = []
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Profiler:
        if self.svg is None or self.svc.proc is None:
            return self
        spy = Path(sys.executable).with_name("py-spy")
        if not spy.exists():
            die("--profile needs py-spy: .venv/bin/pip install py-spy")
        self.svg.parent.mkdir(parents=True, exist_ok=True)
        self._raw = self.svg.with_suffix(".collapsed.txt")
        base = [str(spy), "record", "--pid", str(self.svc.proc.pid), "--subprocesses"]
        base += ["--rate", "200", "--nonblocking"]
        # two recorders would double the overhead: one raw (collapsed stacks) file, the SVG
        # drawn from it afterwards
        self._proc = subprocess.Popen(
            [*base, "--format", "raw", "--output", str(self._raw)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # attached before the load starts
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is None or self.svg is None:
            return
        self._proc.send_signal(signal.SIGINT)
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        if not self._raw.exists():
            print("warning: py-spy wrote no profile (ptrace not permitted?)", file=sys.stderr)
            return
        self.top = top_frames(self._raw)
        flame(self._raw, self.svg)


def top_frames(raw: Path, n: int = 25) -> list[dict[str, Any]]:
    """Share of samples per leaf frame (self time) and per frame anywhere on the stack
    (inclusive), from py-spy's collapsed stacks ("a;b;c count")."""
    self_n: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        c = int(count)
        total += c
        frames = stack.split(";")
        self_n[frames[-1]] += c
        for f in set(frames):
            incl[f] += c
    if not total:
        return []
    return [
        {"frame": f, "self": round(c / total, 4), "inclusive": round(incl[f] / total, 4)}
        for f, c in self_n.most_common(n)
    ]


def flame(raw: Path, svg: Path) -> None:
    """An icicle graph (a flame graph drawn root at the top) from collapsed stacks, drawn
    here with no external tool: one rectangle a frame, its width its share of samples."""
    root: dict[str, Any] = {"n": 0, "kids": {}}
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        node = root
        node["n"] += int(count)
        for f in stack.split(";"):
            node = node["kids"].setdefault(f, {"n": 0, "kids": {}})
            node["n"] += int(count)
    if not root["n"]:
        return
    width, row = 1600.0, 16
    rects: list[str] = []
    depth_max = 0

    def esc(t: str) -> str:
        return t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    def draw(node: dict[str, Any], x: float, depth: int) -> None:
        nonlocal depth_max
        depth_max = max(depth_max, depth)
        for name, kid in sorted(node["kids"].items()):
            w = width * kid["n"] / root["n"]
            if w >= 0.5:
                label = name[: max(int(w / 7) - 1, 0)]
                y = depth * row
                rects.append(
                    f"<g><title>{esc(name)} ({100 * kid['n'] / root['n']:.1f}%)</title>"
                    f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 1}" '
                    f'fill="hsl({20 + 3 * (depth % 10)},85%,{55 + (len(name) % 20)}%)"/>'
                    f'<text x="{x + 2:.1f}" y="{y + row - 4}" font-size="11">'
                    f"{esc(label)}</text></g>"
                )
                draw(kid, x, depth + 1)
            x += w

    draw(root, 0.0, 0)
    body = "\n".join(rects)
    svg.write_text(
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
        f'height="{(depth_max + 1) * row}" font-family="monospace">\n{body}\n</svg>\n'
    )


# -- as a script -------------------------------------------------------------------------------


def _model_ms(items: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            out[name] = float(value)
        except ValueError:
            die(f"--model-ms takes NAME=MS, not {item!r}")
        if not sep or not name:
            die(f"--model-ms takes NAME=MS, not {item!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    load = sub.add_parser("load", help="one load phase against a running service")
    load.add_argument("url", help="the service, e.g. http://127.0.0.1:3000")
    load.add_argument("path", help="the endpoint, e.g. /route")
    load.add_argument(
        "--body",
        action="append",
        default=[],
        metavar="JSON",
        help="a request body (repeatable; the clients cycle through them; default {})",
    )
    load.add_argument("--method", choices=("POST", "GET"), default="POST")
    load.add_argument("--check", metavar="FIELD", help="a 200 without this field is an error")
    load.add_argument("--clients", type=int, default=8)
    load.add_argument("--duration", type=float, default=10.0, help="seconds")
    load.add_argument("--max-requests", type=int, default=20_000)
    load.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    fl = sub.add_parser("flame", help="a flame graph and the top frames from collapsed stacks")
    fl.add_argument("raw", type=Path, help="py-spy's collapsed stacks (`a;b;c count` lines)")
    fl.add_argument("svg", type=Path, help="the flame graph to write")
    fl.add_argument("--top", type=int, default=25)
    fo = sub.add_parser("floor", help="the /route floor from /healthz's throughput")
    fo.add_argument("--healthz-rps", type=float, required=True)
    fo.add_argument("--clients", type=int, required=True)
    fo.add_argument("--model-ms", action="append", default=[], metavar="NAME=MS")
    args = ap.parse_args(argv)

    out: Any
    if args.command == "load":
        if args.clients < 1 or args.max_requests < 1 or args.timeout <= 0:
            die("--clients, --max-requests and --timeout must be positive")
        try:
            bodies = [json.loads(b) for b in args.body] or [{}]
        except json.JSONDecodeError as e:
            die(f"--body is not JSON: {e}")
        res, load_avg = timed_phase(
            lambda: run_load(
                args.url.rstrip("/"),
                args.path,
                cycle(bodies),
                clients=args.clients,
                duration_s=args.duration,
                max_requests=args.max_requests,
                timeout_s=args.timeout,
                check=check_body(args.check) if args.check else lambda body: True,
                method=args.method,
            )
        )
        out = {**res.summary(), **load_avg, "clients": args.clients}
    elif args.command == "flame":
        if not args.raw.is_file():
            die(f"no collapsed stacks at {args.raw}")
        out = top_frames(args.raw, args.top)
        flame(args.raw, args.svg)
    else:
        out = route_floor(
            {"throughput_rps": args.healthz_rps}, args.clients, _model_ms(args.model_ms)
        )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
