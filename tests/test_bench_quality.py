"""bench_quality and bench_index in their quickest form: the sample dataset (copied under
another name, so the suite's own `sample` index is left alone), precomputed OpenIE, built
into the test run's database (`--db env`); the JSON keys and the figures' sanity."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration  # the embedded Postgres

ROOT = Path(__file__).resolve().parents[1]


def _sample_copy(folder: Path) -> Path:
    """data/sample as a dataset named after `folder` (files renamed to match)."""
    src = ROOT / "data" / "sample"
    folder.mkdir(parents=True)
    for f in src.glob("sample*.json"):
        shutil.copy(f, folder / f.name.replace("sample", folder.name, 1))
    return folder


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


@pytest.mark.timeout(120)
def test_bench_quality_quick(pg_env: dict[str, str], tmp_path: Path) -> None:
    ds = _sample_copy(tmp_path / "bqsample")
    out = tmp_path / "quality.json"
    args = ["--quick", "--db", "env", "--dataset", str(ds), "--out", str(out)]
    args += ["--openie", "precomputed", "--openie", "llm", "--llm-max-passages", "0"]
    res = _bench("quality.bench_quality", args, pg_env)
    assert res.returncode == 0, res.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["benchmark"] == "quality" and data["quick"] is True
    assert {"timestamp", "machine", "db", "llm", "contract", "rows"} <= data.keys()
    assert "loadavg_1_5_15m_at_start" in data["machine"]
    rows = {r["backend"]: r for r in data["rows"]}
    assert set(rows) == {"precomputed", "llm"}
    assert rows["llm"]["status"] == "skipped" and rows["llm"]["reason"]
    row = rows["precomputed"]
    assert row["status"] == "ok", row
    assert row["dataset"] == "bqsample" and row["passages"] == 3
    rv = row["retrieval"]
    # `r2a evaluate retrieval --json`'s contract, verbatim
    assert set(rv) == {"dataset", "n_queries", "openie", "index_version", "modes", "rewrite", "ppr"}
    assert rv["ppr"]["solver"] in {"auto", "local", "exact"} and rv["ppr"]["r_max"] > 0
    assert rv["openie"] == row["index"]["openie"] == "precomputed:bqsample_openie_gpt-4o-mini.json"
    assert rv["index_version"] == row["index"]["version"] and rv["n_queries"] == 1
    metrics = {"recall@2", "recall@5", "fcr@2", "fcr@5", "latency_ms_p50", "latency_ms_p95"}
    metrics.add("answer_in_context@5")  # the sample's queries carry answers
    # graph strategies: where the PPR mass sits, and the solver's time
    structure = {"fallbacks", "hub_mass", "ppr_weighted_strength", "ppr_ms_p50", "ppr_ms_p95"}
    # and the entity-normalised reading (mass renormalised over the phrase nodes)
    structure |= {"entity_mass", "hub_mass_entities", "ppr_weighted_strength_entities"}
    assert set(rv["modes"]) == {"dense", "graph", "catrag"}
    assert set(rv["modes"]["dense"]) == metrics
    assert set(rv["modes"]["graph"]) == metrics | structure
    assert metrics | structure <= set(rv["modes"]["catrag"])
    for m in rv["modes"].values():
        assert m["recall@5"] == 1.0  # 3 passages: both gold ones are in any top 5
        assert 0 <= m["recall@2"] <= 1 and m["latency_ms_p50"] > 0
    assert {"index", "evaluate", "total"} <= row["seconds"].keys()
    assert isinstance(row["warnings"], list)
    assert "| bqsample | precomputed | 1 |" in res.stdout
    assert "| bqsample | llm | skipped:" in res.stdout


def _stage_ok(stage: dict[str, Any], total_s: float) -> None:
    """A stage's time is its own share of the run: positive and within the run's total."""
    assert {"what", "seconds", "passages_per_s", "items", "items_per_s"} <= stage.keys()
    assert 0 < stage["seconds"] <= total_s, (stage, total_s)


@pytest.mark.timeout(120)
def test_bench_index_quick(pg_env: dict[str, str], tmp_path: Path) -> None:
    ds = _sample_copy(tmp_path / "bisample")
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


def test_quality_merge_keeps_other_rows_and_flags_empty_graphs() -> None:
    from r2adapter.evaluate.quality_rows import merged_rows

    def ok(ds: str, backend: str, bare: int, fallbacks: int) -> dict[str, Any]:
        modes = {"dense": {}, "graph": {"fallbacks": fallbacks}}
        return {
            "dataset": ds,
            "backend": backend,
            "status": "ok",
            "index": {"passages": 3, "passages_without_facts": bare},
            "retrieval": {"n_queries": 100, "modes": modes},
        }

    old = [ok("musique", "spacy", 0, 0), ok("sample", "llm", 0, 0)]
    new = [ok("sample", "llm", 3, 1), ok("sample", "spacy", 0, 0)]
    rows = merged_rows(old, new)
    assert [(r["dataset"], r["backend"]) for r in rows] == [
        ("sample", "spacy"),
        ("sample", "llm"),
        ("musique", "spacy"),
    ]
    llm = rows[1]
    assert llm["index"]["passages_without_facts"] == 3  # the new row replaced the old one
    assert any("no facts" in w for w in llm["warnings"])
    assert any("fell back" in w for w in llm["warnings"])
    assert rows[0]["warnings"] == [] and rows[2]["warnings"] == []
