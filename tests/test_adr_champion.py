"""The `adr` strategy's champion classifier follows promotions as the service's R²Adapter
champion does (r2adapter/adr/retriever.py): read on the first query, re-read when the
alias moves (by the poll thread every R2A_CHAMPION_POLL_S seconds, or refresh_champion()),
kept when the registry fails or the alias disappears. The registry is a stand-in here;
tests/test_adr_integration.py follows a real promotion in MLflow."""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from r2adapter.adr import registry as adr_registry
from r2adapter.adr import retriever
from r2adapter.registry import models

pytestmark = pytest.mark.unit


class _Registry:
    """The alias's version (None: no alias), what a read of it raises, the loads made."""

    def __init__(self) -> None:
        self.version: str | None = "1"
        self.error: Exception | None = None
        self.load_error: Exception | None = None
        self.loads: list[str] = []

    def version_by_alias(self, model: str, alias: str) -> Any:
        assert (model, alias) == (adr_registry.MODEL, "champion")
        if self.error:
            raise self.error
        return None if self.version is None else SimpleNamespace(version=self.version)

    def load_adr(self, alias: str = "champion", version: str | None = None) -> tuple[str, str]:
        if self.load_error:
            raise self.load_error
        assert self.version is not None and version in (None, self.version)
        self.loads.append(self.version)
        return f"router v{self.version}", self.version


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Registry]:
    reg = _Registry()
    monkeypatch.setattr(models, "version_by_alias", reg.version_by_alias)
    monkeypatch.setattr(adr_registry, "load_adr", reg.load_adr)
    monkeypatch.setenv("R2A_CHAMPION_POLL_S", "0")  # no thread unless a test asks for one
    retriever.stop_poll()
    retriever._ROUTER.clear()
    retriever._BACKOFF.pop("adr")
    yield reg
    retriever.stop_poll()
    retriever._ROUTER.clear()
    retriever._BACKOFF.pop("adr")


def test_the_champion_is_read_once_then_follows_the_alias(registry: _Registry) -> None:
    assert retriever.champion() == ("router v1", "1")
    assert retriever.champion() == ("router v1", "1") and registry.loads == ["1"]
    registry.version = "2"  # promoted: served only once the alias is re-read
    assert retriever.champion()[1] == "1"
    assert retriever.refresh_champion() == "2"
    assert retriever.champion() == ("router v2", "2") and registry.loads == ["1", "2"]
    assert retriever.refresh_champion() == "2" and registry.loads == ["1", "2"]  # unchanged


def test_a_registry_failure_or_a_lost_alias_keeps_the_champion(registry: _Registry) -> None:
    retriever.champion()
    registry.error = RuntimeError("registry down")
    assert retriever.refresh_champion() == "1"
    registry.error, registry.version = None, None  # the alias removed
    assert retriever.refresh_champion() == "1"
    registry.version, registry.load_error = "3", OSError("artifact missing")
    assert retriever.refresh_champion() == "1"
    assert retriever.champion() == ("router v1", "1") and registry.loads == ["1"]
    # the version that failed waits out its backoff (issue 44): not loaded on the next poll
    registry.load_error = None
    assert retriever.refresh_champion() == "1" and registry.loads == ["1"]
    assert retriever._BACKOFF.report()["adr"]["version"] == "3"


def test_the_poll_thread_serves_a_promotion(
    registry: _Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("R2A_CHAMPION_POLL_S", "0.02")
    assert retriever.champion()[1] == "1"
    assert "champion" in retriever._POLL
    registry.version = "2"
    deadline = time.monotonic() + 5
    while retriever.champion()[1] != "2" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert retriever.champion() == ("router v2", "2")
    retriever.stop_poll()
    assert "champion" not in retriever._POLL
    registry.version = "3"
    time.sleep(0.1)
    assert retriever.champion()[1] == "2"  # stopped: no further reads


def test_no_champion_is_a_clear_error_and_starts_no_poll(
    registry: _Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from r2adapter.adr import AdrUnavailable

    def none(alias: str = "champion", version: str | None = None) -> tuple[str, str]:
        raise AdrUnavailable("no champion for r2a-router-adr: run `r2a train --router adr`")

    monkeypatch.setattr(adr_registry, "load_adr", none)
    monkeypatch.setenv("R2A_CHAMPION_POLL_S", "0.02")
    with pytest.raises(AdrUnavailable, match="r2a train"):
        retriever.champion()
    assert "champion" not in retriever._POLL and retriever._ROUTER == {}


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
