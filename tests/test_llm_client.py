"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1 that speaks the chat
completions protocol with scripted replies."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from r2adapter.errors import R2AError
from r2adapter.llm import (
    LLMError,
    LLMSettings,
    OpenAICompatibleLLM,
    extract_json_object,
    get_llm,
    openai_compat,
)
from tests.conftest import LLM_ENV

pytestmark = pytest.mark.unit  # no Postgres, no server


@dataclass
class Reply:
    """One scripted answer: `content` makes a chat completion; else `body` is sent as is."""

    content: str | None = None
    status: int = 200
    body: Any = None
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)

    def payload(self) -> bytes:
        if self.content is not None:
            body: Any = {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": self.content},
                        "finish_reason": "stop",
                    }
                ],
            }
        else:
            body = self.body
        return body if isinstance(body, bytes) else json.dumps(body).encode()


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def last_user(self) -> str:
        return self.body["messages"][-1]["content"]


class ChatServer:
    """Replies from `script` (first in, first out), else from `responder(request)`."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.responder: Callable[[Request], Reply] | None = None
        self.requests: list[Request] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> ChatServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # wakes handlers sleeping on a delay
        self._httpd.shutdown()
        self._httpd.server_close()

    def _reply(self, req: Request) -> Reply:
        with self._lock:
            self.requests.append(req)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if self.script:
                return self.script.pop(0)
        if self.responder is None:
            return Reply(status=500, body={"error": {"message": "test server: nothing scripted"}})
        return self.responder(req)

    def _done(self) -> None:
        with self._lock:
            self.in_flight -= 1


def _handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            req = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, {})
            counted = self.path == "/v1/chat/completions"
            try:
                req.body = json.loads(raw)
                reply = (
                    server._reply(req)
                    if self.path == "/v1/chat/completions"
                    else Reply(status=404, body={"error": "not found"})
                )
                if reply.delay:
                    server.stopping.wait(reply.delay)
                data = reply.payload()
                if counted:  # done before the reply leaves: the client's next request may
                    counted = False  # arrive before this thread runs again
                    server._done()
                self.send_response(reply.status)
                for k, v in {"Content-Type": "application/json", **reply.headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)
            finally:
                if counted:
                    server._done()

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    server = ChatServer().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)


def client(server: ChatServer, **kwargs: Any) -> OpenAICompatibleLLM:
    kwargs.setdefault("backoff", 0.01)
    kwargs.setdefault("timeout", 5.0)
    return OpenAICompatibleLLM(server.url, "test-model", **kwargs)


def one_line_llm_error(exc: pytest.ExceptionInfo[LLMError]) -> str:
    assert isinstance(exc.value, R2AError)
    msg = str(exc.value)
    assert msg and "\n" not in msg
    return msg


HELLO = [{"role": "user", "content": "Say hello."}]


# -- success ------------------------------------------------------------------------------


def test_complete_sends_chat_completion_and_returns_content(chat_server: ChatServer) -> None:
    chat_server.script = [Reply(content="Hello there.")]
    with client(chat_server) as llm:
        out = llm.complete(HELLO, max_tokens=17, temperature=0.3)
    assert out == "Hello there."
    [req] = chat_server.requests
    assert req.path == "/v1/chat/completions"
    assert req.body == {
        "model": "test-model",
        "messages": HELLO,
        "max_tokens": 17,
        "temperature": 0.3,
    }
    assert "authorization" not in req.headers  # no key configured: none sent


def test_api_key_sent_as_bearer(chat_server: ChatServer) -> None:
    chat_server.script = [Reply(content="ok")]
    with client(chat_server, api_key="sk-test-123") as llm:
        assert llm.complete(HELLO) == "ok"
    assert chat_server.requests[0].headers["authorization"] == "Bearer sk-test-123"


def test_base_url_trailing_slash(chat_server: ChatServer) -> None:
    chat_server.script = [Reply(content="ok")]
    with OpenAICompatibleLLM(chat_server.url + "/", "m", backoff=0.01) as llm:
        assert llm.complete(HELLO) == "ok"
    assert chat_server.requests[0].path == "/v1/chat/completions"


# -- retries ------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [500, 503, 429])
def test_retry_after_server_error_then_success(chat_server: ChatServer, status: int) -> None:
    chat_server.script = [Reply(status=status, body={"error": "busy"}), Reply(content="second")]
    with client(chat_server) as llm:
        assert llm.complete(HELLO) == "second"
    assert len(chat_server.requests) == 2


def test_retries_are_bounded(chat_server: ChatServer) -> None:
    chat_server.script = [Reply(status=500, body={"error": {"message": "boom"}})] * 3 + [
        Reply(content="too late")
    ]
    with client(chat_server, max_attempts=3) as llm, pytest.raises(LLMError) as exc:
        llm.complete(HELLO)
    msg = one_line_llm_error(exc)
    assert "HTTP 500 after 3 attempts" in msg and "boom" in msg
    assert len(chat_server.requests) == 3


def test_backoff_is_exponential_and_honours_retry_after(
    chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(openai_compat, "_sleep", slept.append)
    chat_server.script = [
        Reply(status=502, body={}),
        Reply(status=502, body={}),
        Reply(status=429, body={}, headers={"Retry-After": "3"}),
        Reply(content="ok"),
    ]
    with client(chat_server, max_attempts=4, backoff=0.25) as llm:
        assert llm.complete(HELLO) == "ok"
    assert slept == [0.25, 0.5, 3.0]


def test_client_error_is_not_retried(chat_server: ChatServer) -> None:
    chat_server.script = [
        Reply(status=400, body={"error": {"message": "model 'x' not found"}}),
        Reply(content="unused"),
    ]
    with client(chat_server) as llm, pytest.raises(LLMError) as exc:
        llm.complete(HELLO)
    msg = one_line_llm_error(exc)
    assert "HTTP 400" in msg and "model 'x' not found" in msg
    assert len(chat_server.requests) == 1


def test_wrong_path_hints_at_v1(chat_server: ChatServer) -> None:
    base = chat_server.url.removesuffix("/v1")
    with OpenAICompatibleLLM(base, "m", backoff=0.01) as llm, pytest.raises(LLMError) as exc:
        llm.complete(HELLO)
    msg = one_line_llm_error(exc)
    assert "HTTP 404" in msg and "/v1" in msg


def test_unreachable_server_fails_after_attempts() -> None:
    server = ChatServer()  # bound to a port, never serving: then closed
    url = server.url
    server._httpd.server_close()
    t0 = time.monotonic()
    with OpenAICompatibleLLM(url, "m", max_attempts=3, backoff=0.01) as llm:
        with pytest.raises(LLMError) as exc:
            llm.complete(HELLO)
    assert "unreachable after 3 attempts" in one_line_llm_error(exc)
    assert time.monotonic() - t0 < 5


# -- timeouts and malformed bodies -------------------------------------------------------


def test_timeout_raises_within_bounded_time(chat_server: ChatServer) -> None:
    chat_server.script = [Reply(content="late", delay=10.0)] + [Reply(content="fast")] * 3
    t0 = time.monotonic()
    with client(chat_server, timeout=5.0) as llm, pytest.raises(LLMError) as exc:
        llm.complete(HELLO, timeout=0.3)  # the per-call timeout wins over the client's
    elapsed = time.monotonic() - t0
    assert "timed out after 0.3s" in one_line_llm_error(exc)
    assert elapsed < 2.0
    assert len(chat_server.requests) == 1  # a read timeout is not retried


@pytest.mark.parametrize(
    "body",
    [
        b"<html>502 Bad Gateway</html>",
        {"object": "chat.completion"},
        {"choices": []},
        {"choices": [{"message": {"role": "assistant"}}]},
        {"choices": [{"message": {"role": "assistant", "content": None}}]},
        ["not", "an", "object"],
    ],
)
def test_malformed_body_raises(chat_server: ChatServer, body: Any) -> None:
    chat_server.script = [Reply(body=body)]
    with client(chat_server) as llm, pytest.raises(LLMError) as exc:
        llm.complete(HELLO)
    msg = one_line_llm_error(exc)
    assert chat_server.url in msg
    assert len(chat_server.requests) == 1


# -- configuration ------------------------------------------------------------------------


def test_get_llm_none_when_unconfigured() -> None:
    assert get_llm() is None
    assert get_llm("openai") is None


def test_get_llm_from_env(chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("R2A_LLM_BASE_URL", chat_server.url)
    monkeypatch.setenv("R2A_LLM_MODEL", "env-model")
    monkeypatch.setenv("R2A_LLM_API_KEY", "env-key")
    monkeypatch.setenv("R2A_LLM_TIMEOUT", "7.5")
    monkeypatch.setenv("R2A_LLM_MAX_ATTEMPTS", "2")
    llm = get_llm()
    assert isinstance(llm, OpenAICompatibleLLM)
    assert (llm.model, llm.timeout, llm.max_attempts) == ("env-model", 7.5, 2)
    assert llm.identity == "openai:env-model"
    chat_server.script = [Reply(content="from env")]
    try:
        assert llm.complete(HELLO) == "from env"
    finally:
        llm.close()
    req = chat_server.requests[0]
    assert req.body["model"] == "env-model"
    assert req.headers["authorization"] == "Bearer env-key"


def test_base_url_without_model_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("R2A_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(LLMError) as exc:
        get_llm()
    assert "R2A_LLM_MODEL" in one_line_llm_error(exc)


def test_unknown_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(LLMError) as exc:
        get_llm("nonesuch")
    msg = one_line_llm_error(exc)
    assert "nonesuch" in msg and "openai" in msg
    monkeypatch.setenv("R2A_LLM_BACKEND", "other")
    with pytest.raises(LLMError, match="'other'"):
        get_llm()


@pytest.mark.parametrize("name,value", [("R2A_LLM_TIMEOUT", "soon"), ("R2A_LLM_MAX_ATTEMPTS", "0")])
def test_bad_numbers_in_env(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(LLMError) as exc:
        LLMSettings.from_env()
    assert name in one_line_llm_error(exc)


# -- JSON in replies ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ('{"a": 1}', {"a": 1}),
        ('Sure! Here it is:\n```json\n{"a": [1, 2]}\n```\nAnything else?', {"a": [1, 2]}),
        ('```\n{"a": "x"}\n```', {"a": "x"}),
        ('Format: {"a": []}. Answer:\n```json\n{"a": ["x"]}\n```', {"a": ["x"]}),  # fence first
        ('The answer is {"a": "has } and { inside"} as asked.', {"a": "has } and { inside"}),
        ('{not json} then {"b": {"c": 2}} and {"d": 3}', {"b": {"c": 2}}),
        ("no json here at all", None),
        ('["a", "list"]', None),
        ('{"truncated": ["a", "b"', None),
        ("", None),
    ],
)
def test_extract_json_object(text: str, expected: dict[str, Any] | None) -> None:
    assert extract_json_object(text) == expected
