"""The quality sweeps as one config (params.yaml `sweeps:`, r2adapter/evaluate/sweeps.py):
each sweep is read into its dataclass with one-line errors, an unknown name is one line that
lists the known ones, dvc.yaml's `sweep` rows are params.yaml's sweeps, and `make run`
leaves them out. (Sweeps run end to end: tests/test_sweeps_run.py.)"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from r2adapter.config import SWEEP_KEYS, sweep_names, sweep_params
from r2adapter.errors import R2AError
from r2adapter.evaluate.quality_rows import merged_rows
from r2adapter.loop import STEPS
from tests.conftest import run_cli

pytestmark = pytest.mark.unit  # files and one CLI subprocess: no Postgres, no server

ROOT = Path(__file__).resolve().parents[1]
TWO = {
    "sweeps": {
        "small": {"kind": "quality", "datasets": ["sample"], "out": "small.json"},
        "routers": {"kind": "routing", "heldout": ["musique"], "out": "r.json"},
    }
}


def test_unknown_sweep_is_one_line_naming_the_known(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(TWO, sort_keys=False))
    env = {**os.environ, "R2A_HOME": str(tmp_path)}
    r = run_cli(["evaluate", "sweep", "--name", "nope"], env, timeout=120)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.splitlines() == [
        "error: unknown sweep 'nope': params.yaml sweeps: has small, routers"
    ]


def test_sweeps_are_read_and_checked() -> None:
    small = sweep_params("small", _data=TWO)
    assert small.kind == "quality" and small.datasets == ("sample",) and small.db == "scratch"
    assert sweep_params("routers", _data=TWO).heldout == ("musique",)
    assert sweep_names(_data={}) == []
    with pytest.raises(R2AError, match=r"^unknown sweep 'x': params.yaml sweeps: has none$"):
        sweep_params("x", _data={})

    def bad(body: dict[str, Any], message: str) -> None:
        with pytest.raises(R2AError, match=message) as e:
            sweep_params("s", _data={"sweeps": {"s": body}})
        assert "\n" not in str(e.value)

    ok = {"kind": "quality", "out": "q.json"}
    bad({**ok, "heldout": ["musique"]}, r"sweeps.s: heldout not read by a quality sweep")
    bad({**ok, "kind": "routing", "openie": ["spacy"]}, r"openie not read by a routing sweep")
    bad({**ok, "kind": "bench"}, r"^params.yaml: sweeps.s.kind must be one of quality, routing")
    bad({**ok, "out": "q.txt"}, r"^params.yaml: sweeps.s.out must name a .json file")
    bad({**ok, "colour": 1}, r"unknown key\(s\) sweeps.s.colour")
    bad({**ok, "quick": "yes"}, r"sweeps.s.quick must be of type bool")
    bad({**ok, "kind": "routing", "datasets": ["a", "b"]}, r"trains on one corpus")


def test_the_projects_sweeps_are_dvc_stages_off_the_loop() -> None:
    """dvc.yaml's `sweep` rows are params.yaml's sweeps in its order, each stage runs
    `r2a evaluate sweep --name` its name into its `out` (kept in git, not in DVC's cache),
    and `make run` reproduces the loop's stages only (the sweeps take hours)."""
    # this checkout's params.yaml, whatever project an earlier test pointed settings() at
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    names = sweep_names(_data=params)
    assert list(params["sweeps"]) == names == ["quality", "routing"]
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    (rows,) = [v["sweep_stages"] for v in dvc["vars"] if "sweep_stages" in v]
    assert list(rows) == names
    for name, row in rows.items():
        sweep = sweep_params(name, _data=params)
        assert row["out"] == sweep.out and sweep.out.startswith("benchmarks/results/")
        assert (ROOT / sweep.out).is_file(), f"{sweep.out}: the committed result is missing"
        assert set(SWEEP_KEYS[sweep.kind]) >= set(params["sweeps"][name]) - {"kind", "out"}
    stage = dvc["stages"]["sweep"]
    assert stage["foreach"] == "${sweep_stages}"
    assert stage["do"]["cmd"] == "r2a evaluate sweep --name ${key}"
    assert stage["do"]["outs"] == [{"${item.out}": {"cache": False, "persist": True}}]
    assert "sweeps.${key}" in stage["do"]["params"]
    make = (ROOT / "Makefile").read_text()
    (loop,) = re.findall(r"^LOOP_STAGES := (.*)$", make, re.M)
    assert loop.split() == list(STEPS)
    repro = re.findall(r"^\t.*/dvc repro(?! --force| --pull)(.*)$", make, re.M)
    assert repro == [" $(LOOP_STAGES)"], repro


def test_quality_merge_keeps_other_rows_and_flags_empty_graphs() -> None:
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
