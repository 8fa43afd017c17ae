"""The growth benchmark (benchmarks/perf/bench_scale.py) runs the library's graph retrieval on a
synthetic index: the script runs, prints its JSON last, and reports the GraphParams it
searched with, which are params.yaml's with the scale configuration's overrides (no copy of
the parameters of its own). It is run as a script: no test imports a benchmark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # the benchmark as a subprocess: ~4 s, out of make test-fast
def test_bench_scale_runs_the_library_and_prints_json_last(tmp_path: Path) -> None:
    from r2adapter.config import graph_params

    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.perf.bench_scale",
            "--sizes",
            "1000,3000",
            "--queries",
            "8",
            "--exact-queries",
            "4",
            "--hnsw-max",
            "0",
            "--top-n",
            "50",
            "--out",
            str(tmp_path / "scale.json"),
        ],
        cwd=ROOT,
        env={**os.environ, "TQDM_DISABLE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    for n in ("1000", "3000"):
        row = out["sizes"][n]
        for key in ("graph_search_p50_ms", "seed_p50_ms", "ppr_local_p50_ms", "ppr_exact_p50_ms"):
            assert row[key] > 0, key
        assert row["csr_mb"] > 0 and row["queries"] == 8 and row["exact_queries"] == 4
        # queries are a fact's embedding with noise: the retriever's seeding always matches
        assert row["unmatched"] == 0
        assert 0 <= row["top5_agreement"] <= 1
    assert out["sizes"]["3000"]["csr_mb"] > 2 * out["sizes"]["1000"]["csr_mb"]
    assert "graph_search_p50_ms" in out["slopes"]
    saved = json.loads((tmp_path / "scale.json").read_text())
    configured = asdict(graph_params())
    overrides = {"passage_seed_top_n": 50, "ppr_solver": "local", "ppr_r_max": 1e-6}
    overrides["fact_filter"] = "none"
    for key, value in saved["graph_params"].items():
        assert value == overrides.get(key, configured[key]), key
    assert saved["passage_seeds"] == 50 and saved["ppr_tol"] == configured["ppr_tol"]
    assert (tmp_path / "scale.png").stat().st_size > 0
