"""Benchmarks in their quick form: every module under benchmarks/perf/ answers --help with the
options they share; no database, a small synthetic graph, seconds; run as modules
(`python -m benchmarks.perf.bench_ppr`; no test imports a benchmark). And the τ-sweep curve
the routing sweep plots, from the library (r2adapter/evaluate/routing_targets.py)."""

from __future__ import annotations

import ast
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.unit  # no Postgres, no server: subprocesses on synthetic data

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


PERF = sorted(p.stem for p in (BENCH / "perf").glob("bench_*.py"))


def _run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**os.environ, **(env or {}), "TQDM_DISABLE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_perf_modules_are_found() -> None:
    assert {"bench_first_run", "bench_index", "bench_ppr", "bench_load", "bench_scale"} <= set(PERF)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", PERF)
def test_perf_module_answers_help(name: str) -> None:
    """Each perf harness runs as a module and has the options every benchmark shares
    (benchmarks/lib/common.py `arg_parser`), its description its docstring's opening."""
    res = _run(["-m", f"benchmarks.perf.{name}", "--help"])
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.startswith(f"usage: {name}.py") and "--quick" in res.stdout
    assert "--out" in res.stdout
    doc = ast.get_docstring(ast.parse((BENCH / "perf" / f"{name}.py").read_text())) or ""
    words = " ".join(re.sub(r"\s+", " ", doc).split()[:6])
    assert words and words in re.sub(r"\s+", " ", res.stdout), (name, words)


def test_benchmarks_edit_no_path_and_import_no_tests() -> None:
    """Benchmarks run as modules from the repository root: no sys.path edit, no test helper."""
    for f in BENCH.rglob("*.py"):
        src = f.read_text()
        assert "sys.path" not in src, f
        assert not re.search(r"^\s*(from|import)\s+tests\b", src, re.M), f


@pytest.mark.timeout(60)
def test_bench_ppr_quick_synthetic(tmp_path: Path) -> None:
    out = tmp_path / "ppr.json"
    t0 = time.perf_counter()
    res = _run(
        [
            "-m",
            "benchmarks.perf.bench_ppr",
            "--quick",
            "--synthetic-only",
            "--candidates",
            "--nodes",
            "1500",
            "--reps",
            "4",
            "--out",
            str(out),
        ]
    )
    wall_ms = (time.perf_counter() - t0) * 1000
    assert res.returncode == 0, res.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["benchmark"] == "ppr" and data["quick"] is True
    assert {"timestamp", "machine", "targets", "graphs", "skipped"} <= data.keys()
    assert {"cpu_count", "numpy", "scipy", "igraph"} <= data["machine"].keys()
    (name, g), *_ = data["graphs"].items()
    assert name.startswith("synthetic")
    for side in ("ours", "igraph_prpack"):
        assert g[side]["n"] == 4
        assert 0 < g[side]["p50_ms"] <= g[side]["p95_ms"] < wall_ms
    assert g["speedup_p50"] == pytest.approx(g["igraph_prpack"]["p50_ms"] / g["ours"]["p50_ms"])
    # timings are of this run: positive, and within the wall time of the whole script
    assert 0 < g["ours_transition_build_ms"] < wall_ms
    assert g["max_abs_diff"] < 1e-6 and g["agrees_1e-6"] is True
    shape = g["graph"]  # the synthetic graph's own figures (SyntheticGraph.stats)
    assert shape["nodes"] == 1500 and shape["edges"] == 3000
    assert 0.2 < shape["cross_cluster_edges"] / shape["edges"] < 0.3  # a quarter leave
    assert shape["degree_max"] > 10 * shape["degree_p50"]  # heavy-tailed, not uniform random
    assert shape["isolated_nodes"] == 0 and 0 < shape["passage_nodes"] < shape["nodes"]
    # --candidates: ours and every solver × layout variant, each agreeing with prpack
    cands = g["candidates"]
    timed = {who: c for who, c in cands.items() if isinstance(c, dict) and "p50_ms" in c}
    layouts = ("f64 natural", "f32 natural", "f32 rcm")
    expected = {"ours", "chebyshev f32 rcm tol=1e-6"}
    expected |= {f"{solver} {lay} tol=1e-7" for solver in ("power", "chebyshev") for lay in layouts}
    assert set(timed) == expected, sorted(cands)
    assert set(cands["extra_build_ms"]) == set(layouts)
    assert all(0 < ms < wall_ms for ms in cands["extra_build_ms"].values())
    for who, c in timed.items():
        assert c["max_abs_diff_vs_prpack"] < 1e-6, who
        assert 0 < c["p50_ms"] <= c["p95_ms"] < wall_ms, who
    assert timed["ours"]["top5_passages_same_as_ours"] == 1.0
    assert "ours" in res.stdout and "prpack" in res.stdout


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow  # starts each script's whole stack in a subprocess: seconds each
@pytest.mark.timeout(60)
def test_benches_exit_1_with_one_line_when_db_down() -> None:
    url = f"postgresql://postgres@127.0.0.1:{_closed_port()}/r2adapter"
    env = {**os.environ, "R2A_DATABASE_URL": url, "TQDM_DISABLE": "1"}
    modules = {
        "perf.bench_ppr": [],
        "perf.bench_dense": [],
        "perf.bench_load": ["--dataset", "musique"],
    }
    procs = {  # all at once: each waits out the pool's connect timeout
        module: subprocess.Popen(
            [sys.executable, "-m", f"benchmarks.{module}", "--quick", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for module, args in modules.items()
    }
    for script, proc in procs.items():
        _, err = proc.communicate(timeout=50)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert proc.returncode == 1, (script, err)
        assert len(lines) == 1 and lines[0].startswith("error: database unreachable"), err


def test_routing_curve_sends_the_largest_margins_to_graph() -> None:
    from r2adapter.evaluate.routing_targets import hybrid_curve

    margins = np.array([0.9, -0.2, 0.5, 0.1])
    dense = np.array([0.0, 1.0, 0.0, 1.0])
    graph = np.array([1.0, 0.0, 1.0, 0.5])
    curve = {round(p["graph_usage"], 2): p["recall@5"] for p in hybrid_curve(margins, dense, graph)}
    assert curve[0.0] == 0.5  # all dense
    assert curve[0.5] == 1.0  # queries 0 and 2 (largest margins) to graph: both gain
    assert curve[0.75] == pytest.approx(0.875)  # query 3 next: loses half a gold passage
    assert curve[1.0] == pytest.approx(0.625)  # all graph
