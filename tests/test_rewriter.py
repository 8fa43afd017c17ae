"""The rewriter with a scripted LLM: parsing, fallbacks and their counts, the time budget,
the cache. (The real local model is exercised in test_llm_local.py.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from r2adapter.llm import LLM, LLMError, Message
from r2adapter.llm.local import LLMTimeoutError
from r2adapter.rewrite import (
    FALLBACK_REASONS,
    MalformedRewrite,
    Rewriter,
    parse_triplets,
    rewritten_query,
)

pytestmark = pytest.mark.unit  # no Postgres, no server

Q = "Where was the director of film Blood Street born?"
GOOD = (
    '[["Blood Street", "director", "<director of Blood Street>"], '
    '["<director of Blood Street>", "place of birth", "?"]]'
)
GOOD_TRIPLETS = [
    ("Blood Street", "director", "<director of Blood Street>"),
    ("<director of Blood Street>", "place of birth", "?"),
]


class ScriptedLLM(LLM):
    """Answers every call with `reply(query)`: a string, or an exception to raise."""

    backend = "scripted"
    model = "test"

    def __init__(self, reply: str | Callable[[str], str] = GOOD, delay: float = 0.0):
        self.reply = reply
        self.delay = delay
        self.calls: list[tuple[list[Message], float | None]] = []
        self.release = threading.Event()  # set to free a hanging call

    def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        timeout: float | None = None,
    ) -> str:
        self.calls.append((messages, timeout))
        if self.delay:
            self.release.wait(self.delay)
        reply = self.reply(messages[-1]["content"]) if callable(self.reply) else self.reply
        return reply


@pytest.fixture
def hanging() -> Iterator[ScriptedLLM]:
    llm = ScriptedLLM(delay=3600)  # "never" returns
    yield llm
    llm.release.set()


def raising(exc: BaseException) -> Callable[[str], str]:
    def reply(_: str) -> str:
        raise exc

    return reply


# ---- parsing ---------------------------------------------------------------------------


def test_good_reply_is_rewritten() -> None:
    llm = ScriptedLLM()
    t0 = time.perf_counter()
    res = Rewriter(llm).rewrite(Q)
    wall_ms = (time.perf_counter() - t0) * 1000
    assert res.rewritten_ok and res.fallback is None and not res.cached
    assert res.query == Q
    assert res.triplets == GOOD_TRIPLETS
    assert res.rewritten == (
        f"{Q}\n[Blood Street, director, <director of Blood Street>]\n"
        "[<director of Blood Street>, place of birth, ?]"
    )
    assert 0 < res.ms <= wall_ms  # the rewrite's own time, inside the call's
    # the prompt: the query is the last user message, after the instructions and example
    messages, timeout = llm.calls[0]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert Q in messages[-1]["content"] and "{query}" not in messages[-1]["content"]
    assert timeout is not None and 0 < timeout <= 5.0


@pytest.mark.parametrize(
    "reply",
    [
        f"Here are the facts:\n```json\n{GOOD}\n```",
        f'{{"triplets": {GOOD}}}',
        GOOD.replace('"Blood Street"', '"  Blood   Street "'),  # whitespace normalised
        GOOD[:-1] + ", " + GOOD[1:],  # the same triplets twice: repeats dropped
    ],
)
def test_tolerated_reply_shapes(reply: str) -> None:
    assert parse_triplets(reply, query=Q) == GOOD_TRIPLETS


def test_two_relation_path_is_read_as_a_chain() -> None:
    reply = '[["Blood Street", "director", "place of birth", "?"]]'
    assert parse_triplets(reply, query=Q) == [
        ("Blood Street", "director", "<director of Blood Street>"),
        ("<director of Blood Street>", "place of birth", "?"),
    ]


def test_single_bare_triplet() -> None:
    assert parse_triplets('["Blood Street", "director", "?"]', query=Q) == [
        ("Blood Street", "director", "?")
    ]


def test_comparison_with_two_targets() -> None:
    q = "Which film came out first, Blue Lantern or Paper Moons?"
    reply = '[["Blue Lantern", "release date", "?"], ["Paper Moons", "release date", "?"]]'
    assert len(parse_triplets(reply, query=q)) == 2


SEVEN = "[" + ", ".join(f'["Blood Street", "r{i}", "?"]' for i in range(7)) + "]"


@pytest.mark.parametrize(
    "reply,why",
    [
        ("Blood Street was directed by someone born in Paris.", "no complete JSON"),
        ('[["Blood Street", "director", "?"], ["<director', "no complete JSON"),  # cut off
        ('{"answer": "Paris"}', "not a list"),
        ('"Blood Street"', "no complete JSON"),
        ("[]", "no triplets"),
        ('[["Blood Street", "director"]]', "three items"),
        ('[["Blood Street", "director", "<d>", "?"]]', "three items"),
        ('[["Blood Street", 7, "?"]]', "not a string"),
        ('[["Blood Street", "director", ""]]', "empty part"),
        ('[["Blood Street", "   ", "?"]]', "empty part"),
        ('[["Blood Street", "director", "<director of Blood Street>"]]', "'?'"),
        ('[["Blood Street", "?", "<director>"]]', "relation"),
        ('[["Blood Street", "director", "Blood Street"], ["Blood Street", "x", "?"]]', "itself"),
        (SEVEN, "more than 6"),
        ('[["Blood Street", "director", "Ridley Scott"], ["Ridley Scott", "born", "?"]]', "named"),
    ],
)
def test_malformed_replies_fall_back(reply: str, why: str) -> None:
    with pytest.raises(MalformedRewrite, match=why):
        parse_triplets(reply, query=Q)
    rw = Rewriter(ScriptedLLM(reply))
    res = rw.rewrite(Q)
    assert not res.rewritten_ok and res.fallback == "malformed"
    assert res.rewritten == Q and res.triplets == []
    assert rw.stats()["fallbacks"]["malformed"] == 1


def test_rewritten_query_is_a_concatenation() -> None:
    assert rewritten_query("q?", [("a", "r", "?")]) == "q?\n[a, r, ?]"
    assert rewritten_query("q?", []) == "q?"


# ---- failures and the time budget ------------------------------------------------------


def test_hanging_llm_falls_back_within_budget(hanging: ScriptedLLM) -> None:
    rw = Rewriter(hanging, budget_s=0.3)
    t0 = time.monotonic()
    res = rw.rewrite(Q)
    elapsed = time.monotonic() - t0
    assert res.fallback == "timeout" and res.rewritten == Q and not res.rewritten_ok
    assert 0.25 <= elapsed < 0.3 + 0.2
    assert res.ms < (0.3 + 0.2) * 1000
    assert rw.stats()["fallbacks"]["timeout"] == 1


def test_timeouts_are_not_cached(hanging: ScriptedLLM) -> None:
    rw = Rewriter(hanging, budget_s=0.1)
    assert rw.rewrite(Q).fallback == "timeout"
    assert rw.rewrite(Q).fallback == "timeout"
    assert len(hanging.calls) == 2 and rw.stats()["cache_hits"] == 0


@pytest.mark.parametrize(
    "exc,reason",
    [
        (LLMError("LLM at http://x: HTTP 500: boom"), "error"),
        (LLMError("LLM at http://x timed out after 5s"), "timeout"),
        (LLMTimeoutError("local LLM timed out after 5s (3 tokens generated)"), "timeout"),
        (RuntimeError("a bug in a client"), "error"),
    ],
)
def test_llm_failures_fall_back(exc: BaseException, reason: str) -> None:
    rw = Rewriter(ScriptedLLM(raising(exc)))
    res = rw.rewrite(Q)
    assert res.fallback == reason and res.rewritten == Q
    stats = rw.stats()
    assert stats["fallbacks"][reason] == 1 and stats["cache_size"] == 0


def test_empty_query_needs_no_llm() -> None:
    llm = ScriptedLLM()
    res = Rewriter(llm).rewrite("   ")
    assert res.fallback == "empty" and res.rewritten == "   " and not llm.calls


def test_bad_budget() -> None:
    with pytest.raises(ValueError, match="budget_s"):
        Rewriter(ScriptedLLM(), budget_s=0)


# ---- cache and stats -------------------------------------------------------------------


def test_cache_hits_skip_the_llm() -> None:
    llm = ScriptedLLM()
    rw = Rewriter(llm)
    first = rw.rewrite(Q)
    again = rw.rewrite("  " + Q.replace(" ", "  "))  # same query, other spacing
    assert len(llm.calls) == 1
    assert again.cached and again.rewritten_ok and again.triplets == first.triplets
    assert again.rewritten.startswith("  " + Q.replace(" ", "  ") + "\n")


def test_malformed_replies_are_cached() -> None:
    llm = ScriptedLLM("no idea")
    rw = Rewriter(llm)
    assert rw.rewrite(Q).fallback == "malformed"
    res = rw.rewrite(Q)
    assert res.fallback == "malformed" and res.cached and len(llm.calls) == 1


def test_cache_is_a_bounded_lru() -> None:
    llm = ScriptedLLM(lambda q: '[["a", "r", "?"]]')
    rw = Rewriter(llm, cache_size=2)
    for q in ["q1 a", "q2 a", "q1 a", "q3 a", "q1 a", "q2 a"]:
        rw.rewrite(q)
    # q1 stays (recently used); q2 was evicted by q3 and asked again
    assert [m[-1]["content"].split(": ", 1)[1] for m, _ in llm.calls] == [
        "q1 a",
        "q2 a",
        "q3 a",
        "q2 a",
    ]
    assert rw.stats()["cache_size"] == 2


def test_no_cache() -> None:
    llm = ScriptedLLM()
    rw = Rewriter(llm, cache_size=0)
    rw.rewrite(Q)
    rw.rewrite(Q)
    assert len(llm.calls) == 2


def test_stats_count_every_call() -> None:
    replies = {"good": GOOD.replace("Blood Street", "good"), "bad": "nonsense"}
    llm = ScriptedLLM(lambda q: replies[q.split(": ", 1)[1]])
    rw = Rewriter(llm)
    for q in ["good", "bad", "good", "bad", "", "good"]:
        rw.rewrite(q)
    s = rw.stats()
    assert s["calls"] == 6 and s["llm_calls"] == 2 and s["cache_hits"] == 3
    assert s["rewritten"] == 3
    assert s["fallbacks"] == {**dict.fromkeys(FALLBACK_REASONS, 0), "malformed": 2, "empty": 1}
    assert s["calls"] == s["rewritten"] + sum(s["fallbacks"].values())
    assert s["fallback_rate"] == pytest.approx(3 / 6)


def test_concurrent_rewrites_keep_counts() -> None:
    rw = Rewriter(ScriptedLLM(lambda q: f'[["{q.split(": ", 1)[1]}", "r", "?"]]'))
    threads = [
        threading.Thread(target=lambda i=i: [rw.rewrite(f"q{i % 4} x") for _ in range(5)])
        for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    s = rw.stats()
    assert s["calls"] == 40 and s["rewritten"] == 40
    assert s["llm_calls"] + s["cache_hits"] == 40 and s["cache_size"] == 4


# ---- wiring ----------------------------------------------------------------------------


def test_the_rewrite_trigger_follows_the_backend() -> None:
    """A structural rewrite costs 0.3 ms, so eq. 7's ε is router.structural_epsilon (1.0 in
    params.yaml: every graph-bound query); the LLM rewriter keeps the router's own ε."""
    from r2adapter.config import router_params
    from r2adapter.rewrite.rewriter import trigger_epsilon

    assert trigger_epsilon("llm", 0.6) == 0.6
    assert trigger_epsilon("structural", 0.6) == router_params().structural_epsilon == 1.0


def test_default_llm_is_the_configured_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from r2adapter.llm import OpenAICompatibleLLM

    monkeypatch.delenv("R2A_LLM_BACKEND", raising=False)
    monkeypatch.setenv("R2A_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("R2A_LLM_MODEL", "m")
    rw = Rewriter()
    assert isinstance(rw.llm, OpenAICompatibleLLM)
    rw.llm.close()


def test_default_llm_is_local_without_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    from r2adapter.llm.local import LocalLLM, default_model_path

    if default_model_path() is None:
        pytest.skip("the local model is not installed")
    for name in ["R2A_LLM_BACKEND", "R2A_LLM_BASE_URL", "R2A_LLM_MODEL_PATH"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("R2A_REWRITE_BACKEND", "llm")  # else the structural backend, no LLM
    assert isinstance(Rewriter().llm, LocalLLM)  # lazy: constructing it loads nothing
    # handed the local model, without an endpoint configured, the default is structural
    monkeypatch.delenv("R2A_REWRITE_BACKEND")
    local = Rewriter(backend="llm").llm
    assert Rewriter(local).backend == "structural" and Rewriter(local).llm is None
    assert Rewriter(ScriptedLLM()).backend == "llm"  # any other LLM handed in is used


def test_abandoned_calls_are_awaited_at_exit() -> None:
    from r2adapter.rewrite import rewriter

    slow = ScriptedLLM(delay=0.5)
    assert Rewriter(slow, budget_s=0.05).rewrite(Q).fallback == "timeout"
    assert rewriter._INFLIGHT  # the call goes on after the rewriter has given up
    t0 = time.monotonic()
    rewriter._wait_for_inflight()  # what runs at interpreter exit
    assert not rewriter._INFLIGHT and time.monotonic() - t0 < 1.0


@pytest.mark.unit
def test_a_slot_holding_a_comma_stays_one_slot() -> None:
    """Issue 44, item 14: `r2a demo` showed `[Sir William Brereton, 1St Baronet, date of
    death, ?]`, four slots to a reader. A slot with a comma (or a bracket or a quote) is
    written as a JSON string; a `<placeholder>` keeps its own brackets; each line reads
    back as the three slots written, and as the same fact query."""
    from r2adapter.rewrite.parse import format_triplets, triplet_queries, triplet_slots

    trips = [
        ("Sir William Brereton, 1St Baronet", "date of death", "?"),
        ("<the director of X, Y>", "father", "<person>"),
        ("Ann", "born in", "Paris, France"),
        ('The "Blue" [1990]', "genre", "?"),
    ]
    text = format_triplets(trips)
    assert text.splitlines()[0] == '["Sir William Brereton, 1St Baronet", date of death, ?]'
    assert text.splitlines()[1] == "[<the director of X, Y>, father, <person>]"
    assert [triplet_slots(line[1:-1]) for line in text.splitlines()] == trips
    assert triplet_queries(f"q\n{text}") == [
        "Sir William Brereton, 1St Baronet date of death",
        "Ann born in",
        'The "Blue" [1990] genre',
    ]


def test_an_unreachable_llm_is_not_asked_again_for_a_while() -> None:
    """A real client at a closed port (connection refused, two tries with backoff): the first
    rewrite pays the retries and falls back as `error`; the next ones fall back at once
    without a call until `down_s` has passed, then the LLM is asked again."""
    import socket

    from r2adapter.llm.openai_compat import OpenAICompatibleLLM

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = OpenAICompatibleLLM(f"http://127.0.0.1:{port}/v1", "none", max_attempts=2, backoff=0.2)
    rw = Rewriter(llm, backend="llm", budget_s=5, down_s=0.5)
    first = rw.rewrite("Who directed the film that won?")
    assert first.fallback == "error" and first.ms >= 200  # one backoff
    t0 = time.perf_counter()
    again = [rw.rewrite(f"Who wrote book {i}?") for i in range(5)]
    assert all(r.fallback == "error" and not r.rewritten_ok for r in again)
    assert time.perf_counter() - t0 < 0.1  # no call, no backoff
    assert rw.stats()["llm_calls"] == 1
    time.sleep(0.6)
    assert rw.rewrite("Who painted it?").fallback == "error"
    assert rw.stats()["llm_calls"] == 2  # asked again once the interval passed
