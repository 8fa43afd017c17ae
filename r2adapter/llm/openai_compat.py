"""A client for any server speaking OpenAI's chat completions protocol (vLLM, Ollama, OpenAI).

POST `{base_url}/chat/completions`; connect errors, 5xx and 429 are retried with exponential
backoff up to `max_attempts` tries; a read timeout is not retried (the server is busy, and a
retry would multiply the wait). Every failure is one-line `LLMError`.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from r2adapter.llm.base import LLM, LLMError, LLMSettings, LLMUnreachable, Message

_RETRY_STATUS = {429, 500, 502, 503, 504}
_RETRY_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError)
MAX_BACKOFF = 20.0  # seconds; also caps a server's Retry-After
_sleep = time.sleep  # tests swap this to see the backoff


class OpenAICompatibleLLM(LLM):
    backend = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        max_attempts: int = 3,
        backoff: float = 1.0,
        transport: httpx.BaseTransport | None = None,
    ):
        if not base_url or not model:
            raise LLMError("an OpenAI-compatible LLM needs a base URL and a model name")
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.model = model
        self.timeout = timeout
        self.max_attempts = max(1, max_attempts)
        self.backoff = backoff
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(headers=headers, transport=transport)

    def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        timeout: float | None = None,
    ) -> str:
        payload = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        return _content(self._post(payload, self.timeout if timeout is None else timeout))

    def _post(self, payload: dict[str, Any], timeout: float) -> httpx.Response:
        where = f"LLM at {self.url}"
        for attempt in range(1, self.max_attempts + 1):
            last = attempt == self.max_attempts
            retry_after: float | None = None
            try:
                resp = self._client.post(self.url, json=payload, timeout=timeout)
            except _RETRY_ERRORS as e:
                if last:
                    raise LLMUnreachable(
                        f"{where} unreachable after {attempt} attempts: {_one_line(e)}"
                    ) from None
            except httpx.TimeoutException:
                raise LLMError(f"{where} timed out after {timeout:g}s") from None
            except httpx.HTTPError as e:
                raise LLMError(f"{where} failed: {_one_line(e)}") from None
            else:
                if resp.is_success:
                    return resp
                if resp.status_code not in _RETRY_STATUS or last:
                    tries = f" after {attempt} attempts" if attempt > 1 else ""
                    raise LLMError(f"{where}: HTTP {resp.status_code}{tries}: {_reason(resp)}")
                retry_after = _retry_after(resp)
            delay = self.backoff * 2 ** (attempt - 1)
            _sleep(min(MAX_BACKOFF, max(delay, retry_after or 0.0)))
        raise AssertionError("unreachable")  # the last attempt returns or raises

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAICompatibleLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _content(resp: httpx.Response) -> str:
    try:
        body = resp.json()
        content = body["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise LLMError(
            f"malformed reply from LLM at {resp.request.url}: "
            f"no choices[0].message.content in {_snippet(resp.text)!r}"
        ) from None
    if not isinstance(content, str):
        raise LLMError(f"LLM at {resp.request.url} returned no text (content={content!r})")
    return content


def _reason(resp: httpx.Response) -> str:
    """The server's error message if it sent one in OpenAI's shape, else the body's start."""
    try:
        err = resp.json().get("error")
        msg = err.get("message") if isinstance(err, dict) else err
    except (ValueError, AttributeError):
        msg = None
    text = _snippet(str(msg) if msg else resp.text) or resp.reason_phrase
    if resp.status_code == 404 and not resp.request.url.path.rstrip("/").endswith(
        "/v1/chat/completions"
    ):
        text += " (does R2A_LLM_BASE_URL end in /v1?)"
    return text


def _retry_after(resp: httpx.Response) -> float | None:
    try:
        return float(resp.headers.get("retry-after", ""))
    except ValueError:
        return None


def _snippet(text: str, n: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _one_line(e: Exception) -> str:
    return _snippet(str(e) or type(e).__name__)


def served_model(base_url: str, timeout: float = 10.0, api_key: str | None = None) -> str:
    """The first model `GET {base_url}/models` lists (for a server started with one model,
    as vLLM and llama.cpp's are); a server that does not answer or lists none: one line."""
    url = f"{base_url.rstrip('/')}/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        resp = httpx.get(url, headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        raise LLMError(f"LLM at {url} timed out after {timeout:g}s") from None
    except httpx.HTTPError as e:
        raise LLMUnreachable(f"LLM at {url} unreachable: {_one_line(e)}") from None
    if not resp.is_success:
        raise LLMError(f"LLM at {url}: HTTP {resp.status_code}: {_reason(resp)}")
    try:
        return str(resp.json()["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        raise LLMError(
            f"LLM at {url} lists no model ({_snippet(resp.text)!r}): set R2A_LLM_MODEL"
        ) from None


def from_settings(cfg: LLMSettings) -> OpenAICompatibleLLM | None:
    if not cfg.base_url:
        return None
    if not cfg.model:
        raise LLMError(
            "R2A_LLM_BASE_URL is set but R2A_LLM_MODEL is not: name the model the server serves"
        )
    return OpenAICompatibleLLM(
        cfg.base_url, cfg.model, cfg.api_key, timeout=cfg.timeout, max_attempts=cfg.max_attempts
    )
