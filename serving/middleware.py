"""The service's front door, an ASGI middleware mounted on the BentoML service: everything a
request must pass before an endpoint runs, and the one error shape on the way out.

In order: the readiness probes (answered here, as JSON); the API key (R2A_API_KEY; 401);
a header that must come once sent twice (Content-Type: 400, Authorization: 401); POST only
(405); `application/json` only (415, so that no web page can send a no-preflight
POST); the body bounded before it is read (413) and read under a deadline
(R2A_BODY_TIMEOUT_S; 408); the body parsed and validated (422 naming the field; nesting
checked before it is parsed); only then the in-flight limit (429 with Retry-After), so a
client that sends its body slowly holds no slot; then the body is handed on normalised.
On the way out every error body becomes `{"error", "field"}` without connection strings,
503/429 get Retry-After and are counted in /metrics, and client errors are logged as one
line without a traceback.

Below the ASGI app, `serving/connection.py`: uvicorn's HTTP/1.1 protocol with the edges
closed. Beside it: the OpenAPI document's additions (`serving/openapi.py`) and the bound on
BentoML's own request-metric labels (`serving/metric_labels.py`).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import typing as t

import bentoml
from anyio import to_thread
from starlette.responses import JSONResponse
from starlette.types import ASGIApp as App
from starlette.types import Message, Receive, Scope, Send

from serving.admission import refused
from serving.errors import document_errors, error_bytes, error_response
from serving.openapi import SPEC_INFO, document_auth, document_batch_bounds, swagger_page
from serving.requests import BadRequest, too_deep, validate_body
from serving.state import probe

log = logging.getLogger("r2a.serving")


API_PATHS = ("route", "route_batch", "rewrite", "retrieve", "answer", "reload", "info")
PROBES = ("/healthz", "/livez", "/readyz", "/readyz/answer")
UNAVAILABLE = bentoml.metrics.Counter(
    name="r2a_unavailable_total",
    documentation="503/429 answers by endpoint and reason (overload, upstream_timeout, dependency)",
    labelnames=["endpoint", "reason"],
)
CLIENT_ERRORS = bentoml.metrics.Counter(
    name="r2a_client_error_total",
    documentation="4xx answers by endpoint and status",
    labelnames=["endpoint", "status"],
)


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, str(default)))


def _env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, str(default)))


class Hardening:
    """Pure ASGI (no BaseHTTPMiddleware: it would buffer every response)."""

    def __init__(
        self,
        app: App,
        readiness: t.Callable[[bool], tuple[bool, dict[str, t.Any]]] = probe,
    ) -> None:
        self.app = app
        self.readiness = readiness  # (answer path?) -> (ready, body)
        self.max_body = _env_int("R2A_MAX_BODY_BYTES", 1 << 20)
        self.max_in_flight = _env_int("R2A_MAX_IN_FLIGHT", 64)
        self.body_timeout_s = body_timeout_s()
        self.in_flight = 0
        key = os.environ.get("R2A_API_KEY") or ""
        self.key = key.encode()
        self.key_everywhere = bool(key) and os.environ.get("R2A_API_KEY_ALL", "0") == "1"
        self.hosts = allowed_hosts(os.environ.get("R2A_ALLOWED_HOSTS", ""))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if self.hosts and path not in PROBES and not host_allowed(scope, self.hosts):
            # a DNS-rebinding page reaches us under its own name: only the configured ones
            resp = error_response(400, "this host name is not served here (R2A_ALLOWED_HOSTS)")
            await self._reject(resp, path.strip("/"), scope, receive, send)
            return
        if path not in PROBES and (twice := repeated(scope["headers"])):
            await self._repeated(twice, path.strip("/"), scope, receive, send)
            return
        if path in ("/readyz", "/readyz/answer"):
            if scope["method"] in ("GET", "HEAD"):
                await self._probe(scope, receive, send, answer=path.endswith("answer"))
                return
            resp = error_response(405, f"{path} takes GET, not {scope['method']}")
            resp.headers["Allow"] = "GET, HEAD"
            await self._reject(resp, path.strip("/"), scope, receive, send)
            return
        if path in PROBES:
            await self.app(scope, receive, _ErrorShaper(send, "other"))
            return
        endpoint = path.strip("/")
        if endpoint in API_PATHS:  # the slot is taken once the body is in (_api)
            await self._api(scope, receive, send, endpoint)
            return
        if not await self._admit(endpoint, scope, receive, send):
            return
        try:
            await self._other(scope, receive, send, endpoint)
        finally:
            self.in_flight -= 1

    async def _admit(self, endpoint: str, scope: Scope, receive: Receive, send: Send) -> bool:
        """Take an in-flight slot, or answer 429 (one WARNING line now and then, counted)."""
        if self.in_flight >= self.max_in_flight:
            refused(f"{self.max_in_flight} requests in flight (R2A_MAX_IN_FLIGHT)")
            resp = error_response(429, "too many requests in flight: retry later", None, "overload")
            await self._send_counted(resp, endpoint, scope, receive, send)
            return False
        self.in_flight += 1
        return True

    async def _other(self, scope: Scope, receive: Receive, send: Send, endpoint: str) -> None:
        """Everything but the API: /docs.json, /metrics, the Swagger page, 404s."""
        if not self._authorised(scope, endpoint):
            await self._unauthorised(endpoint, scope, receive, send)
            return
        if scope["path"] == "/docs.json":
            await self._docs(scope, receive, send)
            return
        if scope["path"] == "/" and scope["method"] in ("GET", "HEAD"):
            await swagger_page()(scope, receive, send)
            return
        await self.app(scope, receive, _ErrorShaper(send, endpoint))

    async def _repeated(
        self, name: str, endpoint: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Two of a header that must come once: which one a proxy in front read and which
        one this server would read may differ (the last won), so neither is taken."""
        msg = f"two {name} headers: send one"
        if name == "Authorization" and self.key:
            resp = error_response(401, msg)
            resp.headers["WWW-Authenticate"] = "Bearer"
        else:
            resp = error_response(400, msg)
        await self._reject(resp, endpoint, scope, receive, send)

    async def _unauthorised(
        self, endpoint: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        resp = error_response(401, "missing or wrong API key: send `Authorization: Bearer <key>`")
        resp.headers["WWW-Authenticate"] = "Bearer"
        await self._reject(resp, endpoint, scope, receive, send)

    async def _api(self, scope: Scope, receive: Receive, send: Send, endpoint: str) -> None:
        if not self._authorised(scope, endpoint):
            await self._unauthorised(endpoint, scope, receive, send)
            return
        if scope["method"] != "POST":
            resp = error_response(405, f"/{endpoint} takes POST, not {scope['method']}")
            resp.headers["Allow"] = "POST"
            await self._reject(resp, endpoint, scope, receive, send)
            return
        headers = dict(scope["headers"])
        ctype = headers.get(b"content-type", b"").decode("latin-1").split(";")[0].strip()
        if ctype.lower() != "application/json":
            msg = f"the body must be application/json, not {ctype or 'untyped'}"
            await self._reject(error_response(415, msg), endpoint, scope, receive, send)
            return
        try:
            async with asyncio.timeout(self.body_timeout_s):
                body = await self._read(scope, receive, headers)
        except TimeoutError:
            msg = f"the body was not received within {self.body_timeout_s:g} s"
            resp = error_response(408, msg, "body")
            resp.headers["Connection"] = "close"  # what is left of the body is not read
            await self._reject(resp, endpoint, scope, receive, send)
            return
        if body is None:
            msg = f"the body is larger than {self.max_body} bytes"
            await self._reject(error_response(413, msg), endpoint, scope, receive, send)
            return
        try:
            clean = self._parse(endpoint, body)
        except BadRequest as e:
            resp = error_response(422, e.message, e.field)
            await self._reject(resp, endpoint, scope, receive, send)
            return
        if not await self._admit(endpoint, scope, receive, send):
            return
        try:
            await self.app(_with_length(scope, clean), _replay(clean), _ErrorShaper(send, endpoint))
        finally:
            self.in_flight -= 1

    @staticmethod
    def _parse(endpoint: str, body: bytes) -> dict[str, t.Any]:
        """The body validated and normalised, or BadRequest (a 422)."""
        if too_deep(body):  # before json.loads, whose recursion a deep body exhausts
            raise BadRequest("body", "malformed JSON: nested too deeply")
        try:
            data = json.loads(body)  # an empty body is malformed too: the schema requires one
        except RecursionError:  # nesting the scan above did not see (never expected)
            raise BadRequest("body", "malformed JSON: nested too deeply") from None
        except ValueError as e:  # json's decode errors (and bad UTF-8) are ValueErrors
            raise BadRequest("body", f"malformed JSON: {e}") from None
        return validate_body(endpoint, data)

    def _authorised(self, scope: Scope, endpoint: str) -> bool:
        if not self.key or (endpoint != "reload" and not self.key_everywhere):
            return True
        auth = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, token = auth.partition(b" ")
        # constant time: the comparison does not tell how much of a guess was right
        return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self.key)

    async def _read(
        self, scope: Scope, receive: Receive, headers: dict[bytes, bytes]
    ) -> bytes | None:
        """The body, or None as soon as it passes the limit (without reading the rest)."""
        try:
            declared = int(headers.get(b"content-length", b"0"))
        except ValueError:
            declared = 0
        if declared > self.max_body:
            return None
        return await read_body(receive, self.max_body)

    async def _reject(
        self, resp: JSONResponse, endpoint: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        body = json.loads(bytes(resp.body))
        # a client's mistake: one line, no traceback (the server is fine)
        log.info("%s %s /%s: %s", resp.status_code, scope["method"], endpoint, body["error"])
        CLIENT_ERRORS.labels(endpoint=_label(endpoint), status=str(resp.status_code)).inc()
        await resp(scope, receive, send)

    async def _send_counted(
        self, resp: JSONResponse, endpoint: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        UNAVAILABLE.labels(endpoint=_label(endpoint), reason="overload").inc()
        await resp(scope, receive, send)

    async def _probe(self, scope: Scope, receive: Receive, send: Send, answer: bool) -> None:
        ok, body = await to_thread.run_sync(self.readiness, answer)
        if ok:
            await JSONResponse(body)(scope, receive, send)
            return
        resp = error_response(503, body.get("error") or "not ready")
        await resp(scope, receive, send)

    async def _docs(self, scope: Scope, receive: Receive, send: Send) -> None:
        sink = _Buffer()
        await self.app(scope, receive, sink.send)
        try:
            spec = document_errors(json.loads(sink.body), [f"/{p}" for p in API_PATHS])
            spec["info"] = SPEC_INFO  # BentoML's says its version and links its Slack
            document_batch_bounds(spec)
            if self.key:
                document_auth(spec, API_PATHS if self.key_everywhere else ("reload",))
        except ValueError:
            await error_response(500, "cannot build the OpenAPI document")(scope, receive, send)
            return
        await JSONResponse(spec)(scope, receive, send)


def allowed_hosts(setting: str) -> tuple[str, ...]:
    """R2A_ALLOWED_HOSTS: comma-separated host names (`*.example.com` for a domain's
    subdomains); unset or empty, every Host is served."""
    return tuple(h.strip().lower() for h in setting.split(",") if h.strip())


def host_allowed(scope: Scope, hosts: tuple[str, ...]) -> bool:
    raw = dict(scope["headers"]).get(b"host", b"").decode("latin-1").strip().lower()
    host = raw.rsplit(":", 1)[0] if not raw.endswith("]") else raw  # the port is not the name
    if host.startswith("[") and "]" in host:
        host = host[: host.index("]") + 1]
    for h in hosts:
        if h == "*" or host == h or (h.startswith("*.") and host.endswith(h[1:])):
            return True
    return False


SINGLE = {b"content-type": "Content-Type", b"authorization": "Authorization"}


def repeated(headers: t.Iterable[tuple[bytes, bytes]]) -> str | None:
    """The name of the first header of SINGLE sent more than once, or None."""
    seen: set[bytes] = set()
    for name, _ in headers:
        key = name.lower()
        if key in SINGLE:
            if key in seen:
                return SINGLE[key]
            seen.add(key)
    return None


def _label(endpoint: str) -> str:
    return endpoint if endpoint in API_PATHS else "other"  # bounded label values


def _with_length(scope: Scope, clean: dict[str, t.Any]) -> Scope:
    n = len(json.dumps(clean).encode())
    headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
    return {**scope, "headers": [*headers, (b"content-length", str(n).encode())]}


def _replay(clean: dict[str, t.Any]) -> Receive:
    """The validated body, handed on as the request's only message."""
    sent = False
    body = json.dumps(clean).encode()

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


class _Buffer:
    def __init__(self) -> None:
        self.body = b""

    async def send(self, msg: Message) -> None:
        if msg["type"] == "http.response.body":
            self.body += msg.get("body", b"")


class _ErrorShaper:
    """Passes 2xx through untouched; buffers an error response (small) and re-emits it in
    the one shape, with Retry-After on 503/429, counted."""

    def __init__(self, send: Send, endpoint: str) -> None:
        self.send = send
        self.endpoint = endpoint
        self.start: Message | None = None
        self.body = b""

    async def __call__(self, msg: Message) -> None:
        if msg["type"] == "http.response.start":
            if msg["status"] < 400:
                await self.send(msg)
                return
            self.start = msg
            return
        if self.start is None or msg["type"] != "http.response.body":
            await self.send(msg)
            return
        self.body += msg.get("body", b"")
        if msg.get("more_body", False):
            return
        await self._emit()

    async def _emit(self) -> None:
        assert self.start is not None
        status = int(self.start["status"])
        headers = {k.lower(): v for k, v in self.start.get("headers", [])}
        ctype = headers.get(b"content-type", b"").decode("latin-1")
        body = error_bytes(status, self.body, ctype)
        keep = [
            (k, v)
            for k, v in self.start.get("headers", [])
            if k.lower() not in (b"content-length", b"content-type", b"x-r2a-reason")
        ]
        keep += [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        if status in (429, 503):
            if b"retry-after" not in headers:
                from serving.errors import retry_after_s

                keep.append((b"retry-after", str(retry_after_s()).encode()))
            reason = headers.get(b"x-r2a-reason", b"overload").decode("latin-1")
            UNAVAILABLE.labels(endpoint=_label(self.endpoint), reason=reason).inc()
        elif 400 <= status < 500:
            CLIENT_ERRORS.labels(endpoint=_label(self.endpoint), status=str(status)).inc()
        await self.send({**self.start, "headers": keep})
        await self.send({"type": "http.response.body", "body": body, "more_body": False})


# -- below the ASGI app: the request head, and BentoML's own request metrics -------------------


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """An ASGI request's body, or None as soon as it passes `limit` bytes (the rest is not
    read). The caller bounds the time (`asyncio.timeout`: R2A_BODY_TIMEOUT_S)."""
    chunks, size = [], 0
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            break
        chunk = msg.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not msg.get("more_body", False):
            break
    return b"".join(chunks)


def body_timeout_s() -> float:
    """R2A_BODY_TIMEOUT_S: how long a request's body may take to arrive (408 after)."""
    return _env_float("R2A_BODY_TIMEOUT_S", 10.0)
