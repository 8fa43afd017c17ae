"""Issue 44, item 3: promotion as a compare-and-set, over a real MLflow store and the real
Postgres lock. Two overlapping `promote` runs: the one paused while the other moved the
champion to a newer version stops in one line and leaves the newer one; one that finds the
champion moved to an older version gates again against it. Each run loads, gates and
moves the candidate version it read once, whatever the alias says meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from r2adapter.errors import R2AError
from r2adapter.registry import promote as promote_mod
from r2adapter.registry.models import client, version_by_alias

pytestmark = pytest.mark.integration  # the embedded Postgres holds the promotion lock

RECALL = {"1": 0.5, "2": 0.6, "3": 0.7}  # each version's figure: newer is better


@dataclass
class _Family:
    """A router family whose models are their version's recall; `pause`, when set, holds
    the run inside the champion's figures until `go` is set."""

    model: str
    loads: list[tuple[str, str | None]] = field(default_factory=list)
    pause: threading.Event | None = None
    go: threading.Event = field(default_factory=threading.Event)
    name: str = "toy"
    train_command: str = "r2a train --router toy"
    passed: str = "not worse on recall"

    def load(self, alias: str = "champion", version: str | None = None) -> tuple[Any, str]:
        self.loads.append((alias, version))
        v = version or str(version_by_alias(self.model, alias).version)
        return {"recall": RECALL[v], "alias": alias}, v

    def test_split(self, dataset: str, candidate: Any, tags: Mapping[str, str]) -> Any:
        return dataset

    def figures(self, model: Any, split: Any) -> dict[str, float]:
        if model["alias"] == "champion" and self.pause is not None:
            self.pause.set()
            assert self.go.wait(60)
        return {"recall": model["recall"]}

    def replaces(self, candidate: Any, champion: Any) -> str | None:
        return None

    def gate(
        self, candidate: Mapping[str, float], champion: Mapping[str, float]
    ) -> tuple[bool, list[str]]:
        ok = candidate["recall"] >= champion["recall"]
        return ok, [] if ok else ["recall fell"]


def _registry(model: str, tmp_path: Path) -> None:
    """Versions 1-3 of `model` (no files: the family above never reads them); v1 champion."""
    c = client()
    c.create_registered_model(model)
    for _ in RECALL:
        c.create_model_version(model, source=str(tmp_path), tags={"dataset": "toyset"})
    c.set_registered_model_alias(model, "champion", "1")


def _alias(model: str, alias: str) -> str:
    return str(version_by_alias(model, alias).version)


def _paused_run(fam: _Family) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = promote_mod.promote(fam)
        except R2AError as e:
            out["error"] = str(e)

    fam.pause = threading.Event()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert fam.pause.wait(60), "the run never reached the gate"
    return t, out


def test_a_paused_run_never_moves_champion_back(pg_env: dict[str, str], tmp_path: Path) -> None:
    model = "r2a-race-back"
    _registry(model, tmp_path)
    c = client()
    c.set_registered_model_alias(model, "candidate", "2")
    a = _Family(model)
    thread, out = _paused_run(a)  # run A gates v2 against v1 and waits
    c.set_registered_model_alias(model, "candidate", "3")  # another training run
    b = promote_mod.promote(_Family(model))  # run B: v3 against v1
    assert b.promoted and _alias(model, "champion") == "3"
    a.go.set()
    thread.join(60)
    assert "error" in out, out.get("result")
    assert "moved from v1 to the newer v3" in out["error"] and "\n" not in out["error"]
    assert _alias(model, "champion") == "3"
    # A loaded the candidate it read (v2), not what the alias said later (v3)
    assert a.loads == [("candidate", "2"), ("champion", "1")]


def test_a_run_that_finds_an_older_champion_gates_again(
    pg_env: dict[str, str], tmp_path: Path
) -> None:
    model = "r2a-race-again"
    _registry(model, tmp_path)
    c = client()
    c.set_registered_model_alias(model, "candidate", "3")
    a = _Family(model)
    thread, out = _paused_run(a)  # run A gates v3 against v1 and waits
    c.set_registered_model_alias(model, "candidate", "2")
    assert promote_mod.promote(_Family(model)).promoted  # run B moves champion to v2
    a.pause = None  # the second comparison runs through
    a.go.set()
    thread.join(60)
    r = out["result"]
    assert r.promoted and r.candidate == "3" and r.champion_before == "2"
    assert r.champion_metrics == {"recall": RECALL["2"]}
    assert _alias(model, "champion") == "3"
    assert a.loads == [("candidate", "3"), ("champion", "1"), ("champion", "2")]
