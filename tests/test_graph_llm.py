"""The graph search's LLM steps (retrieve/graph_llm.py) against a real HTTP server on
127.0.0.1 that speaks the chat completions protocol with scripted replies: CatRAG's tier
judge and HippoRAG 2's fact filter on good replies, partial and garbage ones, errors and
timeouts (each a counted fallback, never a failed query), and both on the sample index
through `r2a evaluate retrieval`'s counts."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from r2adapter.config import GraphParams, settings
from r2adapter.llm import OpenAICompatibleLLM
from r2adapter.retrieve.catrag_llm import LLMTiers, parse_tiers
from r2adapter.retrieve.catrag_tiers import TierQuery, Transitions, banded
from r2adapter.retrieve.graph_llm import FactFilter, parse_keep
from tests.test_catrag import _tiny_graph
from tests.test_llm_client import ChatServer, Reply


@pytest.fixture
def server() -> Iterator[ChatServer]:
    """The LLM client tests' scripted chat completions server."""
    s = ChatServer().start()
    yield s
    s.stop()


FACTS = ["a born in b", "a child c", "a member of d", "d part of e"]


def _graph() -> Any:
    """The tiny graph with the per-version structures the LLM steps read, in memory."""
    g, maps, op = _tiny_graph()
    extras: dict[str, Any] = {"catrag_maps": maps, "fact_texts": FACTS}
    g.cached = lambda key, build: extras[key] if key in extras else extras.setdefault(key, build())
    g.operator = lambda *a: op
    return g, op


def _query(g: Any, op: Any) -> tuple[TierQuery, Transitions]:
    """Seed 0's three neighbours 1, 2, 3 (facts 0, 1, 2), similarity tiers direct, weak,
    irrelevant."""
    t = Transitions(
        np.zeros(3, np.int64), np.array([1, 2, 3]), np.array([0, 1, 2]), np.array([0.97, 0.6, 0.3])
    )
    q = TierQuery(
        g, op, np.zeros(4), "Where was a born?", np.zeros(3), np.array([0.97, 0.6, 0.3, 1.0])
    )
    return q, t


def _llm(server: ChatServer) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(server.url, "test-model", max_attempts=1)


@pytest.mark.unit
def test_replies_are_parsed_strictly() -> None:
    assert parse_tiers({"1": "Direct", "2": " weak ", "3": "maybe", "9": "high"}, 3).tolist() == [
        3,
        1,
        -1,
    ]
    assert parse_tiers({"x": "direct", "1": "very"}, 2) is None
    assert parse_keep({"keep": [3, "1", 1]}, 3) == [0, 2]
    assert parse_keep({"keep": []}, 3) == []
    for bad in ({"keep": [4]}, {"keep": "1"}, {"facts": [1]}, {"keep": [True]}, {"keep": [1.5]}):
        assert parse_keep(bad, 3) is None


@pytest.mark.unit
def test_the_tier_judge_reads_good_partial_and_garbage_replies(server: ChatServer) -> None:
    g, op = _graph()
    q, t = _query(g, op)
    p = GraphParams(tier_source="llm")
    judge = LLMTiers(p, _llm(server))
    similarity = banded(t.scores, p.similarity_bands).tolist()
    assert similarity == [3, 1, 0]
    server.script = [
        Reply('{"1": "irrelevant", "2": "direct", "3": "high"}'),
        Reply('Sure! {"2": "high"}'),
        Reply("I would say they all matter."),
    ]
    assert judge.tiers(q, t).tolist() == [0, 3, 2]
    asked = server.requests[0].last_user
    assert "Question: Where was a born?" in asked and "From: a" in asked
    assert "1. b | via: a born in b | context: a born in b" in asked
    assert judge.tiers(q, t).tolist() == [3, 2, 0]  # unnamed neighbours keep similarity's
    assert judge.tiers(q, t).tolist() == similarity  # garbage: the query on similarity
    assert judge.multipliers(q, t).tolist() == [p.tier_direct, p.tier_weak, p.tier_irrelevant]
    s = judge.stats()  # the fourth query found nothing scripted: HTTP 500, an error
    assert s["tier_llm_queries"] == 4 and s["tier_llm_calls"] == 4
    assert s["tier_llm_fallbacks"] == 2
    assert s["tier_llm_fallback_reasons"] == {"timeout": 0, "error": 1, "malformed": 1}


@pytest.mark.unit
def test_a_slow_or_failing_judge_falls_back_within_the_budget(server: ChatServer) -> None:
    g, op = _graph()
    q, t = _query(g, op)
    p = GraphParams(tier_source="llm", llm_timeout_s=0.3)
    judge = LLMTiers(p, _llm(server))
    server.script = [Reply('{"1": "irrelevant"}', delay=3.0)]
    t0 = time.monotonic()
    assert judge.tiers(q, t).tolist() == [3, 1, 0]
    assert time.monotonic() - t0 < 1.5
    server.script = [Reply(status=503, body={"error": {"message": "overloaded"}})]
    assert judge.tiers(q, t).tolist() == [3, 1, 0]
    # two seeds: the second's reply is garbage, so the first's answer is not used either
    t2 = Transitions(
        np.array([0, 0, 3]), np.array([1, 2, 4]), np.array([0, 1, 3]), np.array([0.97, 0.6, 1.0])
    )
    server.script = [Reply('{"1": "irrelevant", "2": "irrelevant"}'), Reply("{}")]
    assert judge.tiers(q, t2).tolist() == [3, 1, 3]
    assert "context: d part of e" in server.requests[-1].last_user
    assert judge.stats()["tier_llm_fallback_reasons"] == {"timeout": 1, "error": 1, "malformed": 1}


@pytest.mark.unit
def test_many_facts_are_summarised_by_the_closest(server: ChatServer) -> None:
    from r2adapter.retrieve.catrag_llm import neighbour_context

    g, _ = _graph()
    scores = np.array([0.1, 0.9, 0.5, 0.2])
    assert neighbour_context(g, np.array([0, 1, 2]), scores, 2) == (
        "a child c; a member of d; (and 1 more facts)"
    )
    assert neighbour_context(g, np.array([0, 1]), scores, 2) == "a born in b; a child c"


@pytest.mark.unit
def test_the_fact_filter_keeps_drops_and_falls_back(server: ChatServer) -> None:
    g, _ = _graph()
    f = FactFilter(GraphParams(fact_filter="llm", llm_timeout_s=0.3), _llm(server))
    top = np.array([3, 0, 2])
    server.script = [
        Reply('{"keep": [1, 3]}'),
        Reply('{"keep": []}'),
        Reply('{"keep": [7]}'),
        Reply('{"keep": [1]}', delay=3.0),
    ]
    assert f.keep(g, "q?", top).tolist() == [3, 2]
    assert "1. d part of e\n2. a born in b\n3. a member of d" in server.requests[0].last_user
    assert f.keep(g, "q?", top).tolist() == []
    assert f.keep(g, "q?", top).tolist() == [3, 0, 2]  # out of range: every fact
    assert f.keep(g, "q?", top).tolist() == [3, 0, 2]  # timeout: every fact
    s = f.stats()
    assert (s["fact_filter_queries"], s["fact_filter_fallbacks"], s["fact_filter_empty"]) == (
        4,
        2,
        1,
    )
    assert s["fact_filter_fallback_reasons"] == {"timeout": 1, "error": 0, "malformed": 1}


# ---- on the sample index, through the configured client ----------------------------------


@pytest.fixture
def sample_index(sample_dataset: str) -> str:
    return sample_dataset


@pytest.fixture
def llm_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: ChatServer) -> Iterator[Path]:
    monkeypatch.setenv("R2A_HOME", str(tmp_path))
    monkeypatch.setenv("R2A_LLM_BASE_URL", server.url)
    monkeypatch.setenv("R2A_LLM_MODEL", "test-model")
    monkeypatch.setenv("R2A_LLM_MAX_ATTEMPTS", "1")
    monkeypatch.delenv("R2A_LLM_BACKEND", raising=False)
    settings.cache_clear()
    yield tmp_path
    monkeypatch.undo()
    settings.cache_clear()


@pytest.mark.integration
def test_the_fact_filter_sends_an_emptied_query_to_dense(
    sample_index: str, llm_home: Path, server: ChatServer
) -> None:
    from r2adapter.retrieve.dense import DenseRetriever
    from r2adapter.retrieve.graph import GraphRetriever

    r = GraphRetriever(sample_index, params=GraphParams(fact_filter="llm"))
    q = "Who founded BrainCheck?"
    server.script = [Reply('{"keep": []}')]
    hits = r.retrieve(q, 3)
    dense = DenseRetriever(sample_index).retrieve(q, 3)
    assert [h.passage_id for h in hits] == [h.passage_id for h in dense]
    assert r.fallbacks == 1 and r.stats()["fact_filter_empty"] == 1
    server.script = [Reply('{"keep": [1]}')]
    assert r.retrieve(q, 3)[0].title == "David Eagleman" and r.fallbacks == 1


@pytest.mark.integration
def test_evaluate_counts_the_llm_steps(
    sample_index: str, llm_home: Path, server: ChatServer
) -> None:
    from r2adapter.evaluate.retrieval import evaluate_retrieval

    (llm_home / "params.yaml").write_text(
        "graph:\n  tier_source: llm\n  fact_filter: llm\n  llm_timeout_s: 5\n"
    )

    def reply(req: Any) -> Reply:
        text = req.last_user
        if "From:" in text:  # the tier judge: garbage, so every query falls back
            return Reply("no idea")
        return Reply('{"keep": [1, 2]}')

    server.responder = reply
    report = evaluate_retrieval(sample_index, modes=["graph", "catrag"])
    graph, catrag = report["modes"]["graph"], report["modes"]["catrag"]  # type: ignore[index]
    n = report["n_queries"]
    assert graph["fact_filter_queries"] == n and graph["fact_filter_fallbacks"] == 0
    assert catrag["tier_llm_queries"] == n and catrag["tier_llm_fallbacks"] == n
    assert catrag["tier_llm_fallback_reasons"]["malformed"] == n
