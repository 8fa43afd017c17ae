"""bench_index in its quickest form: the sample dataset (copied under another name, so the
suite's own `sample` index is left alone), precomputed OpenIE, built into the test run's
database (`--db env`); the JSON keys and the figures' sanity. (The quality sweep, which
builds the same way: tests/test_sweeps_run.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import sample_copy

pytestmark = pytest.mark.integration  # the embedded Postgres

ROOT = Path(__file__).resolve().parents[1]


def _bench(module: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *args],
        cwd=ROOT,
        env={**env, "TQDM_DISABLE": "1", "R2A_LLM_BASE_URL": "", "R2A_LLM_BACKEND": ""},
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )


def _stage_ok(stage: dict[str, Any], total_s: float) -> None:
    """A stage's time is its own share of the run: positive and within the run's total."""
    assert {"what", "seconds", "passages_per_s", "items", "items_per_s"} <= stage.keys()
    assert 0 < stage["seconds"] <= total_s, (stage, total_s)


@pytest.mark.timeout(120)
def test_bench_index_quick(pg_env: dict[str, str], tmp_path: Path) -> None:
    ds = sample_copy(tmp_path / "bisample")
    out = tmp_path / "index.json"
    args = ["--quick", "--db", "env", "--dataset", str(ds), "--openie", "precomputed"]
    res = _bench("perf.bench_index", [*args, "--out", str(out)], pg_env)
    assert res.returncode == 0, res.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["benchmark"] == "index_throughput" and data["failed"] == {}
    assert {"timestamp", "machine", "targets", "timing_notes", "runs"} <= data.keys()
    assert "loadavg_1_5_15m_at_end" in data["machine"]
    r = data["runs"]["bisample/precomputed"]
    assert r["passages"] == 3 and "rebuild" not in r  # no rebuild outside scratch databases
    cold, warm = r["cold"], r["warm"]
    assert cold["created"] and cold["added"]["passages"] == 3
    assert cold["added"]["openie_cache"] == 3 and cold["added"]["index_versions"] == 1
    stages = {"openie", "passage_embeddings", "entity_embeddings", "fact_embeddings"}
    stages |= {"synonyms", "write"}
    assert set(cold["stages"]) == stages
    for st in cold["stages"].values():
        _stage_ok(st, cold["in_process_total_s"])
    assert sum(st["seconds"] for st in cold["stages"].values()) <= cold["in_process_total_s"]
    assert cold["stages"]["write"]["items"] == cold["added"]["graph_rows"] > 0
    assert cold["wall_s"] >= cold["in_process_total_s"] > 0
    # the second run adds nothing and stops before the graph stages
    assert not warm["created"] and all(v == 0 for v in warm["added"].values())
    assert set(warm["stages"]) == {"openie", "passage_embeddings"}
    assert r["cache"]["ok"] is True and r["cache"]["warm_added_nothing"] is True
    assert "| bisample | precomputed | cold | 3 |" in res.stdout


def test_env_db_refuses_the_project_database(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("R2A_")}
    env["R2A_DATA_DIR"] = str(ROOT / "data")
    res = _bench(
        "perf.bench_index", ["--quick", "--db", "env", "--out", str(tmp_path / "x.json")], env
    )
    assert res.returncode == 1
    assert "--db env points at the project's own database" in res.stdout + res.stderr
