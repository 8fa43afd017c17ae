"""`r2a demo`: start the service, show one query per route (dense, graph, graph rewritten)
with its decision and timings, stop. The last step of `make run`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from r2adapter.processes import free_port, stop, wait_ready

ROOT = Path(__file__).resolve().parents[1]  # the checkout holding serving/


def start(
    env: dict[str, str], log_path: Path, port: int, host: str = "127.0.0.1"
) -> subprocess.Popen[bytes]:
    """`r2a serve` (a real `bentoml serve`) in its own process group, its output in
    `log_path`: the one way the demo, the tests and the benchmarks start the service."""
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "r2adapter.cli", "serve", "--port", str(port), "--host", host],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@contextmanager
def serving(env: dict[str, str], log_path: Path, timeout: float) -> Iterator[str]:
    """The service on a free port: yields its URL once /readyz answers 200, stops it on exit."""
    port = free_port()
    proc = start(env, log_path, port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc, timeout)
        yield url
    finally:
        stop(proc)


def pick_examples(
    url: str, questions: list[str], limit: int = 400
) -> tuple[dict[str, str], tuple[float, str] | None]:
    """First question routed to each of: dense, graph, graph with rewriting; and the
    graph-routed question the router was least sure of (lowest p_graph)."""
    found: dict[str, str] = {}
    least: tuple[float, str] | None = None
    for q in questions[:limit]:
        r = httpx.post(f"{url}/route", json={"query": q}, timeout=30).json()
        kind = (
            r["decision"]
            if r["decision"] == "dense"
            else ("graph rewritten" if r["rewrite"] else "graph")
        )
        found.setdefault(kind, q)
        if r["decision"] == "graph" and (least is None or r["p_graph"] < least[0]):
            least = (float(r["p_graph"]), q)
        if len(found) == 3:
            break
    return found, least


def print_rewritten(rewritten: str, note: str = "") -> None:
    """q' = q + q_r: the query, then its triplets one per line (R²Adapter eq. 6)."""
    query, *triplets = rewritten.split("\n")
    print(f"  q' = {query}")
    for t in triplets:
        print(f"       {t}")
    if note:
        print(f"      {note.strip()}")


def show_rewrite(url: str, least: tuple[float, str] | None, limit: int) -> None:
    """No question reached the rewriter: show what it does with the least sure one."""
    if least is None:
        print(f"\n[graph rewritten] no question among the first {limit} was routed to graph")
        return
    p_graph, q = least
    r = httpx.post(f"{url}/rewrite", json={"query": q}, timeout=120).json()
    print(
        f"\n[graph rewritten] none of the first {limit} questions routed to graph had "
        f"p_graph < ε; the least sure ({p_graph:.3f}) through /rewrite:\n  {q}"
    )
    if r.get("ok"):
        print_rewritten(r["rewritten"], f"  ({r['ms']:.1f} ms)")
    else:
        print(f"  fell back to q: {r.get('fallback')} ({r.get('ms', 0):.0f} ms)")


def demo(dataset: str, questions: list[str], log_path: Path, timeout: float = 300) -> int:
    env = {**os.environ, "R2A_SERVE_DATASET": dataset}
    print(f"serving {dataset} (log: {log_path})")
    with serving(env, log_path, timeout) as url:
        print(f"on {url}")
        info = httpx.post(f"{url}/info", json={}, timeout=10).json()
        print(f"router {info['router']} v{info['router_version']} ready")
        limit = 400
        examples, least = pick_examples(url, questions, limit)
        for kind in ("dense", "graph", "graph rewritten"):
            q = examples.get(kind)
            if q is None and kind == "graph rewritten":
                show_rewrite(url, least, limit)
                continue
            if q is None:
                print(f"\n[{kind}] no question among the first {limit} was routed here")
                continue
            r = httpx.post(
                f"{url}/retrieve", json={"query": q, "mode": "auto", "top_k": 5}, timeout=120
            ).json()
            t = r["timings_ms"]
            print(f"\n[{kind}] {q}")
            print(
                f"  decision {r['decision']}  p_dense {r['p_dense']:.3f}  p_graph "
                f"{r['p_graph']:.3f}  rewritten {r['rewritten']}"
                + (f" (fallback: {r['rewrite_fallback']})" if r.get("rewrite_fallback") else "")
            )
            if r["rewritten"]:
                print_rewritten(r["rewritten_query"])
            print("  ms: " + ", ".join(f"{k} {v:.1f}" for k, v in t.items()))
            for i, p in enumerate(r["passages"][:3], 1):
                print(f"  {i}. {p['title']}")
        return 0
