"""The router families (r2adapter/route/family.py, the table in r2adapter/families.py): the
one promotion skeleton's decisions over a stand-in family and registry (the first model
becomes champion, an unchanged alias is kept, a family's `replaces` skips the comparison,
the gate decides otherwise and only a pass moves `champion`), and each family's `route`
as the one decision record."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from r2adapter.registry import promote as promote_mod
from r2adapter.route.family import Route, RouterFamily

pytestmark = pytest.mark.unit


@dataclass
class _Family:
    """A family whose figures are a model's own `figures` and whose gate wants recall."""

    replace_reason: str | None = None
    loads: list[str] = field(default_factory=list)
    name: str = "toy"
    model: str = "r2a-router-toy"
    train_command: str = "r2a train --router toy"
    passed: str = "not worse on recall"

    def label(self, dataset: str) -> Any:
        return None

    def fit(self, dataset: str, params: Any = None) -> Any:
        return None

    def load(self, alias: str = "champion", version: str | None = None) -> tuple[Any, str]:
        self.loads.append(alias)
        return {"candidate": {"recall": 0.7}, "champion": {"recall": 0.6}}[alias], version or "?"

    def test_split(self, dataset: str, candidate: Any, tags: Mapping[str, str]) -> Any:
        return dataset

    def figures(self, model: Any, split: Any) -> dict[str, float]:
        return dict(model)

    def replaces(self, candidate: Any, champion: Any) -> str | None:
        return self.replace_reason

    def gate(
        self, candidate: Mapping[str, float], champion: Mapping[str, float]
    ) -> tuple[bool, list[str]]:
        ok = candidate["recall"] >= champion["recall"]
        return ok, [] if ok else ["recall fell"]

    def route(self, model: Any, queries: Any, qvecs: Any = None, version: str = "") -> list[Route]:
        return []


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """Candidate v2; champion `reg.champion` (None: none); the aliases set are recorded."""
    reg = SimpleNamespace(champion="1", moved=[])
    cand = SimpleNamespace(version="2", tags={"dataset": "toyset"})
    monkeypatch.setattr(
        promote_mod, "candidate_of", lambda model, dataset, train: (cand, dataset or "toyset")
    )

    def version_by_alias(model: str, alias: str) -> Any:
        assert alias == "champion"
        return None if reg.champion is None else SimpleNamespace(version=reg.champion)

    class _Client:
        def set_registered_model_alias(self, model: str, alias: str, version: str) -> None:
            reg.moved.append((model, alias, version))

    monkeypatch.setattr(promote_mod, "version_by_alias", version_by_alias)
    monkeypatch.setattr(promote_mod, "client", _Client)
    monkeypatch.setattr(promote_mod, "promotion_lock", lambda model: contextlib.nullcontext())
    return reg


def test_the_first_model_becomes_champion(registry: SimpleNamespace) -> None:
    registry.champion = None
    fam = _Family()
    r = promote_mod.promote(fam)
    assert r.promoted and "first model" in r.reasons[0] and r.champion_metrics is None
    assert registry.moved == [("r2a-router-toy", "champion", "2")] and fam.loads == ["candidate"]
    assert list(r.to_report()) == [
        "router",
        "promoted",
        "candidate",
        "champion_before",
        "reasons",
        "candidate_metrics",
        "champion_metrics",
    ]


def test_a_candidate_already_champion_is_kept(registry: SimpleNamespace) -> None:
    registry.champion = "2"
    r = promote_mod.promote(_Family())
    assert not r.promoted and r.reasons == ["the candidate is already champion"]
    assert r.champion_metrics == r.candidate_metrics and registry.moved == []


def test_the_gate_decides_and_a_pass_moves_champion(registry: SimpleNamespace) -> None:
    r = promote_mod.promote(_Family(), "other")
    assert r.promoted and r.reasons == ["not worse on recall"] and r.champion_before == "1"
    assert r.champion_metrics == {"recall": 0.6} and registry.moved

    class _Strict(_Family):
        def gate(self, c: Mapping[str, float], ch: Mapping[str, float]) -> tuple[bool, list[str]]:
            return False, ["recall fell"]

    registry.moved.clear()
    r = promote_mod.promote(_Strict())
    assert not r.promoted and r.reasons == ["recall fell"] and registry.moved == []


def test_a_replacing_candidate_skips_the_comparison(registry: SimpleNamespace) -> None:
    fam = _Family(replace_reason="γ changed: the candidate replaces")
    r = promote_mod.promote(fam)
    assert r.promoted and r.reasons == ["γ changed: the candidate replaces"]
    assert r.champion_metrics is None and fam.loads == ["candidate", "champion"]


def test_the_table_holds_every_family_under_its_registered_model() -> None:
    from r2adapter.adr.registry import MODEL as ADR
    from r2adapter.families import FAMILIES, family
    from r2adapter.kway.model import MODEL as KWAY
    from r2adapter.route.kinds import TRAINED_ROUTERS

    assert {n: f.model for n, f in FAMILIES.items()} == {
        **{k.name: k.model for k in TRAINED_ROUTERS.values()},
        "kway": KWAY,
        "adr": ADR,
    }
    assert all(family(n).name == n for n in FAMILIES)
    from r2adapter.errors import R2AError

    with pytest.raises(R2AError, match="unknown router 'gpt'"):
        family("gpt")
    fam: RouterFamily = _Family()  # the stand-in has every operation of the protocol
    assert fam.name == "toy"


def test_each_family_routes_into_the_one_record() -> None:
    from r2adapter.adr.registry import AdrFamily
    from r2adapter.adr.router import AdrRouter, SoftmaxHead
    from r2adapter.kway.model import KwayConfig, KwayRouter
    from r2adapter.kway.registry import KwayFamily
    from r2adapter.route.base import Router
    from r2adapter.route.kinds import TRAINED_ROUTERS
    from r2adapter.twoway.family import TwoWayFamily

    x = np.array([[5.0, 0.0], [0.1, 0.0]])
    adr = AdrRouter(SoftmaxHead(np.array([[1.0, 0], [0, 1.0], [0, 0]]), np.zeros(3)), 0.75, "m")
    a = AdrFamily().route(adr, ["q1", "q2"], x, version="3")
    assert [(r.strategy, r.mode, r.fallback) for r in a] == [
        ("simple", "adr_simple", False),
        ("moderate", "adr_moderate", True),  # eq. 1's fallback
    ]
    assert a[0].threshold == 0.75 and a[0].router == "adr" and a[0].version == "3"
    assert set(a[0].scores) == {"simple", "moderate", "complex"}

    cfg = KwayConfig(
        strategies=("dense@5", "graph+rw@3"),
        mean_ms=(10.0, 50.0),
        mean_passages=(5.0, 3.0),
        mean_recall=(0.6, 0.8),
        thresholds=(0.9, 0.5),
        fallback="graph+rw@3",
        features=("query_embedding",),
        budget=0.5,
        max_passages=5.0,
        confidence=0.75,
    )
    heads = {"w": np.array([[4.0, 0.0], [0.0, 0.0]]), "b": np.zeros(2)}
    kway = KwayRouter(cfg, {**heads, "mean": np.zeros(2), "std": np.ones(2)})
    kway._features = lambda questions, qvecs: qvecs  # type: ignore[assignment]
    k = KwayFamily().route(kway, ["q1", "q2"], x)
    assert (k[0].strategy, k[0].mode, k[0].k, k[0].rewrite, k[0].threshold) == (
        "dense@5",
        "dense",
        5,
        False,
        0.9,
    )
    assert (k[1].strategy, k[1].mode, k[1].k, k[1].rewrite) == ("graph+rw@3", "graph", 3, True)

    class _Two(Router):
        tau, epsilon = 0.0, 0.6

        def score(self, queries: Any, qvecs: Any = None) -> tuple[np.ndarray, np.ndarray]:
            return np.array([0.8, 0.3]), np.array([0.2, 0.5])

    t = TwoWayFamily(TRAINED_ROUTERS["r2a"]).route(_Two(), ["q1", "q2"])
    assert [(r.strategy, r.mode, r.rewrite) for r in t] == [
        ("dense", "dense", False),
        ("graph", "graph", True),  # eq. 7: graph-bound with p_graph < ε
    ]
    assert t[1].scores == {"dense": 0.3, "graph": 0.5} and t[1].router == "r2a"
