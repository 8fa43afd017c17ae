"""The LLM protocol and its settings from the environment.

The backends (`openai`, `local`) live in modules beside this one and import it; the table of
them by name, and `get_llm()` that picks one, are the package's (r2adapter/llm/__init__.py).
A backend factory gets the settings and returns a client, or None when it is not configured.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from r2adapter.errors import R2AError

Message = dict[str, str]
_N = TypeVar("_N", int, float)


class LLMError(R2AError):
    """An LLM call failed: timeout, HTTP error, malformed reply, or bad configuration."""


class LLMUnreachable(LLMError):
    """No connection to the LLM's server after the client's tries (refused, reset, no
    route): a caller may stop asking it for a while (the rewriter does)."""


class LLM(ABC):
    """Chat completion: messages in (`{"role": ..., "content": ...}`), reply text out."""

    backend: str = ""  # registry name, e.g. "openai"
    model: str = ""  # model name; part of any cache key built on this client's output

    @abstractmethod
    def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        timeout: float | None = None,
    ) -> str: ...

    @property
    def identity(self) -> str:
        """`backend:model`, for cache keys: different models give different output."""
        return f"{self.backend}:{self.model}"

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release connections or model memory; the default holds nothing."""


@dataclass(frozen=True)
class LLMSettings:
    backend: str | None  # R2A_LLM_BACKEND; None: "openai" if base_url is set, else no LLM
    base_url: str | None  # R2A_LLM_BASE_URL, e.g. http://localhost:8000/v1
    model: str | None  # R2A_LLM_MODEL
    api_key: str | None  # R2A_LLM_API_KEY, sent as a Bearer token when set
    timeout: float  # R2A_LLM_TIMEOUT: seconds per call
    max_attempts: int  # R2A_LLM_MAX_ATTEMPTS: tries on connect errors, 5xx and 429

    @classmethod
    def from_env(cls) -> LLMSettings:
        return cls(
            backend=os.environ.get("R2A_LLM_BACKEND") or None,
            base_url=os.environ.get("R2A_LLM_BASE_URL") or None,
            model=os.environ.get("R2A_LLM_MODEL") or None,
            api_key=os.environ.get("R2A_LLM_API_KEY") or None,
            timeout=_env_number("R2A_LLM_TIMEOUT", 60.0, float),
            max_attempts=_env_number("R2A_LLM_MAX_ATTEMPTS", 3, int),
        )


def _env_number(name: str, default: _N, kind: type[_N]) -> _N:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise LLMError(f"{name}={raw!r} is not a number") from None
    if value <= 0:
        raise LLMError(f"{name}={raw!r} must be positive")
    return value


LLMFactory = Callable[[LLMSettings], "LLM | None"]  # settings → a client, or None when the
# backend is not configured; r2adapter/llm/__init__.py holds the table of them by name
