"""Where the `adr` strategy reads its champion classifier (r2adapter/adr/retriever.py): from a
source it is given. In the service that is the one champion table (serving/state.py
`ServingState.champion_of`): ADR's row loads, follows the alias and keeps its last good
version as every family's does, and the `adr` retriever reads the row on each query; no
thread of ADR's own polls. Elsewhere the registered champion is loaded once. The registry
is a stand-in here; tests/test_service_hardening.py follows a real promotion in the service."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from r2adapter.adr import registry as adr_registry
from r2adapter.adr import retriever
from r2adapter.adr.router import AdrRouter, SoftmaxHead
from r2adapter.registry import models

pytestmark = pytest.mark.unit


def _router(simple: float) -> AdrRouter:
    """A head over 2-d embeddings: (1, 0) scores `simple` on simple, (0, 1) complex."""
    head = SoftmaxHead(np.array([[simple, 0.0], [0.0, 0.0], [0.0, 9.0]]), np.zeros(3))
    return AdrRouter(head, 0.6, "toy-encoder", "toyset")


class _Registry:
    """The alias's version (None: no alias) and the loads made."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.version: str | None = "1"
        self.loads: list[str] = []
        monkeypatch.setattr(models, "version_by_alias", self.version_by_alias)
        monkeypatch.setattr(adr_registry, "load_adr", self.load_adr)

    def version_by_alias(self, model: str, alias: str) -> Any:
        assert alias == "champion"
        if model != adr_registry.MODEL or self.version is None:
            return None
        return SimpleNamespace(version=self.version, tags={})

    def load_adr(self, alias: str = "champion", version: str | None = None) -> Any:
        from r2adapter.adr import AdrUnavailable

        if self.version is None:
            raise AdrUnavailable(
                "no champion for r2a-router-adr: run `r2a train --dataset D --router adr` "
                "then `r2a promote --router adr`"
            )
        assert version in (None, self.version)
        self.loads.append(self.version)
        return _router(9.0 + int(self.version)), self.version


def test_outside_the_service_the_champion_is_loaded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`r2a retrieve`, `r2a evaluate`, the benchmarks: one plain load on the first `adr`
    query, kept for the run (a promotion meanwhile is the next run's), no thread."""
    from r2adapter.adr import AdrUnavailable
    from r2adapter.adr.strategies import register
    from r2adapter.retrieve.strategies import make_retriever

    register()  # ADR's modes join the strategy table (as the CLI's and the steps' import does)
    before = set(threading.enumerate())
    registry = _Registry(monkeypatch)
    registry.version = None
    r = make_retriever("adr", "toyset")
    assert isinstance(r, retriever.AdrRetriever) and registry.loads == []  # none yet
    with pytest.raises(AdrUnavailable, match="r2a train --dataset D --router adr"):
        r.champion()
    registry.version = "1"  # registered since: the next query loads it
    assert r.champion().version == "1" and r.champion().name == "adr"
    registry.version = "2"
    assert r.champion().version == "1" and registry.loads == ["1"]
    assert make_retriever("adr", "toyset").champion().version == "2"  # the next run's
    assert set(threading.enumerate()) <= before  # no thread of its own (adr-champion-poll)


def test_the_service_serves_adr_from_its_one_champion_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADR is a row of the service's champion table: loaded by the table's reload, and the
    `adr` retriever the service builds reads that row on each query, so a promotion is
    served after the next poll or /reload, with no poll thread of ADR's own. Without a
    champion the mode's error names the commands (a 503 from the service)."""
    from r2adapter.registry import backoff
    from r2adapter.retrieve.strategies import make_retriever
    from serving.state import ServingState, Unavailable

    before = set(threading.enumerate())
    registry = _Registry(monkeypatch)
    registry.version = None
    st = object.__new__(ServingState)
    st.kind, st.dataset_env, st.champions, st.errors = "r2a", "toyset", {}, {}
    st.unreachable, st.backoff, st._lock = set(), backoff.LoadBackoff(), threading.Lock()
    st.encoder = SimpleNamespace(encode=lambda qs: np.tile([1.0, 0.0], (len(qs), 1)))
    r = make_retriever("adr", "toyset", champions=st.champion_of)
    assert isinstance(r, retriever.AdrRetriever)
    st._reload("adr")
    with pytest.raises(Unavailable) as e:
        r.champion()
    assert str(e.value) == (
        "no adr champion in the registry: run `r2a train --dataset D --router adr` and "
        "`r2a promote --router adr`"
    )
    registry.version = "1"
    st._reload("adr")
    assert r.champion() is st.champions["adr"] and r.champion().version == "1"
    (route,) = r.champion().route(["q"], np.array([[1.0, 0.0]]))
    assert (route.strategy, route.version, route.router) == ("simple", "1", "adr")
    registry.version = "2"  # promoted: served once the table re-reads the alias
    assert r.champion().version == "1"
    st._reload("adr")
    assert r.champion().version == "2" and registry.loads == ["1", "2"]
    st.champions["r2a"] = st.champions["adr"]  # info() reads the two-way row too
    assert st.info()["adr_version"] == "2" and st.info()["adr_note"] is None
    registry.version = None  # the alias removed: the last good one serves, and says so
    st._reload("adr")
    assert r.champion().version == "2" and "gone" in st.info()["adr_note"]
    assert set(threading.enumerate()) <= before  # no thread of its own (adr-champion-poll)


class _Encoder:
    """Questions ending in an even digit embed as (1, 0), odd ones as (0, 1)."""

    name = "toy-encoder"

    def encode(self, texts: list[str]) -> Any:
        import numpy as np

        return np.array([[1.0, 0.0] if int(t[-1]) % 2 == 0 else [0.0, 1.0] for t in texts])


def test_protocol_all_routes_with_the_registered_champion(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--protocol all`: the champion trained on another corpus decides at its own γ (a
    confident one here: (1, 0) → simple, (0, 1) → complex); without a champion, or with one
    reading another encoder's embedding, the frozen operators only, and a note says why."""
    import numpy as np

    from r2adapter.adr import AdrUnavailable
    from r2adapter.adr.evaluate import adr_routers
    from r2adapter.adr.labels import AdrLabel, OperatorOutcome
    from r2adapter.adr.router import AdrRouter, SoftmaxHead
    from r2adapter.config import adr_params
    from r2adapter.index import encoder as encoder_mod

    def out(recall: float, tokens: int) -> OperatorOutcome:
        return OperatorOutcome(["p"], recall, recall, tokens, 10.0)

    labels = [
        AdrLabel(f"q{i}", f"question {i}", "t", "test", ["p"],
                 {"simple": out(1.0, 100), "moderate": out(1.0, 300), "complex": out(0.0, 200)})
        for i in range(4)
    ]  # fmt: skip
    head = SoftmaxHead(np.array([[9.0, 0.0], [0.0, 0.0], [0.0, 9.0]]), np.zeros(3))
    served: list[Any] = [(AdrRouter(head, 0.6, "toy-encoder", "2wikimultihopqa"), "7")]

    def load_adr(alias: str = "champion") -> Any:
        if isinstance(served[0], Exception):
            raise served[0]
        return served[0]

    from r2adapter.adr import evaluate as adr_evaluate

    monkeypatch.setattr(encoder_mod, "get_encoder", lambda *a, **k: _Encoder())
    monkeypatch.setattr(adr_registry, "load_adr", load_adr)
    # the reader prompt's instructions + question: 50 tokens a query (the stand-in encoder
    # has no tokenizer)
    monkeypatch.setattr(adr_evaluate, "prompt_overhead", lambda qs, p: np.full(len(qs), 50.0))
    ids = [lab.query_id for lab in labels]
    p = adr_params(gamma=0.99)  # the champion's own γ (0.6) decides, not this one
    rows, notes = adr_routers("musique", "all", ids, p, labels)
    a = rows["adr"]
    assert a["share"] == {"simple": 0.5, "complex": 0.5} and a["gamma"] == 0.6
    assert a["recall"] == 0.5 and a["mean_tokens"] == 150.0
    # prompt tokens: the context plus the prompt around it; the ratio to always-complex
    # (200 + 50) on the same queries, and its interval (every query alike here: no spread
    # within a pair, but the mix of simple and complex varies under resampling)
    assert (
        a["mean_prompt_tokens"] == 200.0
        and rows["always_adr_complex"]["mean_prompt_tokens"] == 250.0
    )
    r = a["prompt_tokens_vs_complex"]
    assert r["ratio"] == pytest.approx(0.8) and r["n"] == 4
    assert 0.6 <= r["ci95"][0] <= 0.8 <= r["ci95"][1] <= 1.0
    assert any("champion v7, trained on 2wikimultihopqa" in n for n in notes)
    served[0] = (AdrRouter(head, 0.6, "another-encoder", "2wikimultihopqa"), "8")
    rows, notes = adr_routers("musique", "all", ids, p, labels)
    assert "adr" not in rows and "always_adr_simple" in rows
    assert any("another-encoder" in n and "frozen operators only" in n for n in notes)
    served[0] = AdrUnavailable("no champion for r2a-router-adr: run `r2a train`")
    rows, notes = adr_routers("musique", "all", ids, p, labels)
    assert "adr" not in rows and any("no champion" in n for n in notes)
