"""LLM OpenIE end to end against the scripted chat-completions server on 127.0.0.1."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from r2adapter.data.schema import Extraction, Passage
from r2adapter.errors import R2AError
from r2adapter.index import openie
from r2adapter.index.openie_llm import LLMOpenIE, parse_entities, parse_triples
from r2adapter.llm import LLMError, OpenAICompatibleLLM
from tests.test_llm_client import LLM_ENV, ChatServer, Reply, Request

pytestmark = pytest.mark.unit  # no Postgres, no server

ALAN = Passage.of("Alan Turing", "Alan Turing was born in Maida Vale, London, in 1912.")
ADA = Passage.of("Ada Lovelace", "Ada Lovelace worked with Charles Babbage on the Engine.")

NER = {
    "Alan Turing": ["Alan Turing", "Maida Vale", "London", "1912"],
    "Ada Lovelace": ["Ada Lovelace", "Charles Babbage", "Engine"],
}
TRIPLES = {
    "Alan Turing": [
        ["Alan Turing", "born in", "Maida Vale"],
        ["Maida Vale", "located in", "London"],
        ["Alan Turing", "born in year", "1912"],
    ],
    "Ada Lovelace": [["Ada Lovelace", "worked with", "Charles Babbage"]],
}


def stage(req: Request) -> str:
    return "triples" if "Named entities:" in req.last_user else "ner"


def title(req: Request) -> str:
    m = re.match(r"Title: (.*)\n", req.last_user)
    assert m, req.last_user
    return m.group(1)


def well_behaved(req: Request, wrap: str = "{}") -> Reply:
    t = title(req)
    obj = {"named_entities": NER[t]} if stage(req) == "ner" else {"triples": TRIPLES[t]}
    return Reply(content=wrap.format(json.dumps(obj)))


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    server = ChatServer().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def llm(chat_server: ChatServer) -> Iterator[OpenAICompatibleLLM]:
    with OpenAICompatibleLLM(chat_server.url, "test-model", backoff=0.01, timeout=5) as client:
        yield client


def expected(t: str) -> Extraction:
    return Extraction(NER[t], [tuple(x) for x in TRIPLES[t]])


def test_registered_as_llm() -> None:
    assert openie.backend_class("llm") is LLMOpenIE
    assert LLMOpenIE.name == "llm"


def test_two_passages_end_to_end(chat_server: ChatServer, llm: OpenAICompatibleLLM) -> None:
    def respond(req: Request) -> Reply:
        reply = well_behaved(req)
        # The first passage answers last: the output must still follow the input order.
        reply.delay = 0.3 if title(req) == ALAN.title else 0.0
        return reply

    chat_server.responder = respond
    ie = LLMOpenIE(llm, progress=False)
    out = ie.extract([ALAN, ADA])
    assert out == [expected("Alan Turing"), expected("Ada Lovelace")]
    assert ie.n_malformed == 0
    assert len(chat_server.requests) == 4
    triple_reqs = {title(r): r for r in chat_server.requests if stage(r) == "triples"}
    # Stage two is conditioned on stage one's entities, and both see the passage itself.
    for p in (ALAN, ADA):
        prompt = triple_reqs[p.title].last_user
        assert p.text in prompt
        assert json.dumps({"named_entities": NER[p.title]}) in prompt
    ner_req = next(r for r in chat_server.requests if stage(r) == "ner")
    assert ner_req.body["messages"][0]["role"] == "system"
    assert "named_entities" in ner_req.body["messages"][0]["content"]
    assert ner_req.body["temperature"] == 0.0


def test_fenced_and_prose_wrapped_json_accepted(
    chat_server: ChatServer, llm: OpenAICompatibleLLM
) -> None:
    def respond(req: Request) -> Reply:
        if stage(req) == "ner":
            return well_behaved(req, "Sure! Here are the entities:\n```json\n{}\n```\n")
        return well_behaved(req, "The triples are {} -- hope this helps.")

    chat_server.responder = respond
    ie = LLMOpenIE(llm, progress=False)
    assert ie.extract([ALAN, ADA]) == [expected("Alan Turing"), expected("Ada Lovelace")]
    assert ie.n_malformed == 0


@pytest.mark.parametrize("bad_stage", ["ner", "triples"])
def test_garbage_reply_gives_empty_extraction(
    chat_server: ChatServer,
    llm: OpenAICompatibleLLM,
    bad_stage: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def respond(req: Request) -> Reply:
        if title(req) == ALAN.title and stage(req) == bad_stage:
            return Reply(content="I'm sorry, I cannot help with [that] {request.")
        return well_behaved(req)

    chat_server.responder = respond
    ie = LLMOpenIE(llm, progress=False)
    out = ie.extract([ALAN, ADA])
    assert out == [Extraction(), expected("Ada Lovelace")]
    assert ie.n_malformed == 1
    assert "1 of 2 passages gave no usable JSON" in caplog.text
    # A failed first stage skips the second one for that passage.
    assert len(chat_server.requests) == (3 if bad_stage == "ner" else 4)
    ie.extract([ALAN])  # counts add up over calls (the index build calls in chunks)
    assert (ie.n_malformed, ie.n_passages) == (2, 3)


def test_bad_entries_are_dropped(chat_server: ChatServer, llm: OpenAICompatibleLLM) -> None:
    def respond(req: Request) -> Reply:
        if stage(req) == "ner":
            ents = ["Ada Lovelace", "", "  ", 7, None, "Ada Lovelace", " Charles Babbage ", "!!"]
            return Reply(content=json.dumps({"named_entities": ents}))
        triples = [
            ["Ada Lovelace", "worked with", "Charles Babbage"],
            ["Ada Lovelace", "worked with", "Charles Babbage"],
            ["Ada Lovelace", "knew"],
            ["Ada Lovelace", "born", 1815],
            ["...", "is", "Charles Babbage"],
            "Ada Lovelace wrote notes",
        ]
        return Reply(content=json.dumps({"triples": triples}))

    chat_server.responder = respond
    [ext] = LLMOpenIE(llm, progress=False).extract([ADA])
    assert ext.entities == ["Ada Lovelace", "Charles Babbage"]
    assert ext.triples == [("Ada Lovelace", "worked with", "Charles Babbage")]


def test_concurrency_is_bounded(chat_server: ChatServer, llm: OpenAICompatibleLLM) -> None:
    passages = [Passage.of(f"P{i}", f"Passage number {i}.") for i in range(8)]

    def respond(req: Request) -> Reply:
        key = "named_entities" if stage(req) == "ner" else "triples"
        return Reply(content=json.dumps({key: []}), delay=0.1)

    chat_server.responder = respond
    out = LLMOpenIE(llm, workers=3, progress=False).extract(passages)
    assert out == [Extraction()] * 8
    assert len(chat_server.requests) == 16
    assert 2 <= chat_server.max_in_flight <= 3


def test_llm_failure_raises(chat_server: ChatServer, llm: OpenAICompatibleLLM) -> None:
    chat_server.responder = lambda req: Reply(status=401, body={"error": "invalid api key"})
    with pytest.raises(LLMError, match="HTTP 401"):
        LLMOpenIE(llm, progress=False).extract([ALAN, ADA])


def test_empty_input_makes_no_calls(chat_server: ChatServer, llm: OpenAICompatibleLLM) -> None:
    assert LLMOpenIE(llm, progress=False).extract([]) == []
    assert chat_server.requests == []


def test_cache_key_names_the_model(chat_server: ChatServer) -> None:
    a = OpenAICompatibleLLM(chat_server.url, "model-a")
    b = OpenAICompatibleLLM(chat_server.url, "model-b")
    key_a, key_b = LLMOpenIE(a).cache_key(), LLMOpenIE(b).cache_key()
    assert key_a.startswith("llm:") and "model-a" in key_a and "model-b" in key_b
    assert key_a != key_b
    assert key_a == LLMOpenIE(a).cache_key()  # stable for the same model and prompts


def test_no_llm_configured() -> None:
    with pytest.raises(R2AError, match="no LLM configured: set R2A_LLM_BASE_URL"):
        LLMOpenIE()


def test_llm_from_env(chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("R2A_LLM_BASE_URL", chat_server.url)
    monkeypatch.setenv("R2A_LLM_MODEL", "env-model")
    chat_server.responder = well_behaved
    ie = LLMOpenIE(progress=False)
    assert "env-model" in ie.cache_key()
    assert ie.extract([ADA]) == [expected("Ada Lovelace")]
    assert {r.body["model"] for r in chat_server.requests} == {"env-model"}


@pytest.mark.parametrize(
    "reply,entities",
    [
        ('{"named_entities": ["A", "B"]}', ["A", "B"]),
        ('{"named_entities": []}', []),
        ('{"entities": ["A"]}', None),
        ('{"named_entities": "A"}', None),
        ("A, B", None),
    ],
)
def test_parse_entities(reply: str, entities: list[str] | None) -> None:
    assert parse_entities(reply) == entities


def test_parse_triples() -> None:
    assert parse_triples('{"triples": [["a", "r", "b"]]}') == [("a", "r", "b")]
    assert parse_triples('{"triples": []}') == []
    assert parse_triples('{"named_entities": ["a"]}') is None
    assert parse_triples("[[a, r, b]]") is None
