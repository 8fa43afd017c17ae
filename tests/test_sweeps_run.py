"""A quality sweep end to end (`r2a evaluate sweep`, r2adapter/evaluate/sweeps.py): a tiny
sweep written by the test over the sample dataset (copied under another name, so the
suite's own `sample` index is left alone), precomputed OpenIE, built into the test run's
database (`db: env`); the result file's keys are the ones docs/results.md and the committed
benchmarks/results/quality.json have. And a sweep over a dataset not indexed is one line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli, sample_copy

pytestmark = pytest.mark.integration  # the embedded Postgres

ROOT = Path(__file__).resolve().parents[1]


def _sweep(home: Path, sweeps: dict, name: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`r2a evaluate sweep --name NAME` with a project home whose params.yaml has `sweeps`."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "params.yaml").write_text(yaml.safe_dump({"sweeps": sweeps}))
    quiet = {"TQDM_DISABLE": "1", "R2A_LLM_BASE_URL": "", "R2A_LLM_BACKEND": ""}
    args = ["evaluate", "sweep", "--name", name]
    return run_cli(args, {**env, **quiet, "R2A_HOME": str(home)}, timeout=110)


@pytest.mark.timeout(120)
def test_quality_sweep_writes_the_result_file(pg_env: dict[str, str], tmp_path: Path) -> None:
    ds = sample_copy(tmp_path / "swsample")
    tiny = {
        "kind": "quality",
        "datasets": [str(ds)],
        "openie": ["precomputed", "llm"],
        "quick": True,
        "llm_max_passages": 0,
        "db": "env",
        "out": "results/quality.json",  # under the home
    }
    res = _sweep(tmp_path / "home", {"tiny": tiny}, "tiny", pg_env)
    assert res.returncode == 0, res.stderr[-2000:]
    data = json.loads((tmp_path / "home" / "results" / "quality.json").read_text())
    committed = json.loads((ROOT / "benchmarks" / "results" / "quality.json").read_text())
    assert list(data) == list(committed)  # the same keys, in the same order
    assert data["benchmark"] == "quality" and data["quick"] is True and data["db"] == "env"
    assert {"loadavg_1_5_15m_at_start", "loadavg_1_5_15m_at_end"} <= data["machine"].keys()
    rows = {r["backend"]: r for r in data["rows"]}
    assert set(rows) == {"precomputed", "llm"}
    assert rows["llm"]["status"] == "skipped" and "llm_max_passages 0" in rows["llm"]["reason"]
    row = rows["precomputed"]
    assert row["status"] == "ok", row
    assert row["dataset"] == "swsample" and row["passages"] == 3
    done = next(r for r in committed["rows"] if r["status"] == "ok")
    assert row.keys() - {"source"} == done.keys()  # source: the dataset given as a folder
    rv = row["retrieval"]
    # `r2a evaluate retrieval --json`'s contract, verbatim
    assert set(rv) == {"dataset", "n_queries", "openie", "index_version", "modes", "rewrite", "ppr"}
    assert rv["openie"] == row["index"]["openie"] == "precomputed:swsample_openie_gpt-4o-mini.json"
    assert rv["index_version"] == row["index"]["version"] and rv["n_queries"] == 1
    assert {"dense", "graph", "catrag"} == set(rv["modes"])
    metrics = {"recall@2", "recall@5", "fcr@2", "fcr@5", "latency_ms_p50", "latency_ms_p95"}
    assert metrics <= set(rv["modes"]["dense"]) and metrics <= set(rv["modes"]["graph"])
    for m in rv["modes"].values():
        assert m["recall@5"] == 1.0  # 3 passages: both gold ones are in any top 5
    assert {"index", "evaluate", "total"} <= row["seconds"].keys()
    assert "| swsample | precomputed | 1 |" in res.stdout
    assert "| swsample | llm | skipped:" in res.stdout
    assert "saved: results/quality.json" in res.stdout


@pytest.mark.timeout(120)
def test_routing_sweep_over_a_dataset_not_indexed(pg_env: dict[str, str], tmp_path: Path) -> None:
    sweeps = {"r": {"kind": "routing", "datasets": ["notindexed"], "out": "r.json"}}
    res = _sweep(tmp_path / "home", sweeps, "r", pg_env)
    assert res.returncode == 1
    assert res.stderr.splitlines() == [
        "error: dataset 'notindexed' is not indexed: run `r2a index --dataset notindexed` first"
    ]
    assert not (tmp_path / "home" / "r.json").exists()
