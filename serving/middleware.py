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
closed. Here too: `bound_metric_labels`, which makes BentoML's own request metrics label a
request by its route (or `other`) instead of its raw path.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import re
import typing as t

import bentoml
from anyio import to_thread
from starlette.responses import JSONResponse
from starlette.types import ASGIApp as App
from starlette.types import Message, Receive, Scope, Send

from serving.admission import refused
from serving.errors import document_errors, error_bytes, error_response
from serving.requests import MAX_BATCH, BadRequest, too_deep, validate_body
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
            await _swagger_page()(scope, receive, send)
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


SPEC_INFO = {
    "title": "R²Adapter",
    "version": "1",
    "description": "Routing, rewriting, retrieval and answers over HTTP: the endpoints, "
    "their bodies and the one error shape `{error, field}`.",
}
# BentoML's Swagger page (_bentoml_impl/server/main-openapi.html) loads Google Tag Manager
# from googletagmanager.com; this one loads only the service's own files, and says so
SWAGGER_PAGE = b"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<title>R2Adapter API</title>
<link rel="stylesheet" type="text/css" href="./static_content/swagger-ui.css">
<link rel="stylesheet" type="text/css" href="./static_content/index.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="./static_content/swagger-ui-bundle.js" charset="UTF-8"></script>
<script src="./static_content/swagger-ui-standalone-preset.js" charset="UTF-8"></script>
<script src="./static_content/swagger-initializer.js" charset="UTF-8"></script>
</body>
</html>
"""
SWAGGER_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)


def _swagger_page() -> t.Any:
    from starlette.responses import Response

    headers = {
        "Content-Security-Policy": SWAGGER_CSP,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
    return Response(SWAGGER_PAGE, media_type="text/html; charset=utf-8", headers=headers)


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


def document_batch_bounds(spec: dict[str, t.Any]) -> None:
    """BentoML batches /route_batch across requests, so its signature cannot carry the
    per-request bound that the middleware enforces: declare it here."""
    body = spec.get("paths", {}).get("/route_batch", {}).get("post", {}).get("requestBody", {})
    schema = body.get("content", {}).get("application/json", {}).get("schema", {})
    if "queries" in schema.get("properties", {}):
        schema["properties"]["queries"].update(minItems=1, maxItems=MAX_BATCH)


def document_auth(spec: dict[str, t.Any], endpoints: t.Iterable[str]) -> None:
    """The bearer key, on the endpoints that need it (with the key set at start)."""
    schemes = spec.setdefault("components", {}).setdefault("securitySchemes", {})
    schemes["bearer"] = {"type": "http", "scheme": "bearer"}
    for endpoint in endpoints:
        for op in spec.get("paths", {}).get(f"/{endpoint}", {}).values():
            if isinstance(op, dict):
                op["security"] = [{"bearer": []}]


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

INFRA_PATHS = ("/", "/docs.json", "/schema.json", "/metrics", *PROBES)


def route_label(path: str) -> str:
    """A request's metric label: its route, or `other` (bounded, and no byte of a client's
    path reaches the exposition)."""
    if path in INFRA_PATHS or path.strip("/") in API_PATHS:
        return path
    from bentoml._internal.context import server_context

    if path in (server_context.service_routes or ()):  # an endpoint added later (a webhook)
        return path
    if path.startswith(("/static_content/", "/assets/")):
        return "/" + path.split("/", 2)[1]  # the Swagger page's files: one label a folder
    return "other"


def bound_metric_labels() -> None:
    """BentoML's request metrics (`r2a_request_total`, `_duration_seconds`, `_in_progress`)
    label each request with `scope["path"]`, so requests to made-up paths grew /metrics
    without bound (2,000 of them: 175 KB to 8.4 MB). Its middleware is the outermost and is
    looked up by name when the app is built (`_bentoml_impl/server/app.py`): replace it,
    before that, with one that sees the route label as the path and hands the real path on."""
    from bentoml._internal.server.http import instruments

    base = instruments.RunnerTrafficMetricsMiddleware
    if getattr(base, "r2a_bounded", False):
        return

    class BoundedTrafficMetrics(base):  # type: ignore[misc,valid-type]
        r2a_bounded = True

        def __init__(self, app: App, **kw: t.Any) -> None:
            super().__init__(_RealPath(app), **kw)

        def _setup(self, *args: t.Any, **kwargs: t.Any) -> None:
            """BentoML's series, and `other`'s for a 404 and a 401 made now: the first
            request to a made-up path then adds nothing to /metrics (its histogram added
            ~3.5 KB, the one step left)."""
            super()._setup(*args, **kwargs)
            from bentoml._internal.context import server_context as ctx

            names = {
                "service_name": ctx.bento_name,
                "service_version": ctx.bento_version,
                "runner_name": ctx.service_name,
            }
            self.metrics_request_in_progress.labels(endpoint="other", **names)
            for code in (404, 401):
                labels = {"endpoint": "other", "http_response_code": code, **names}
                self.metrics_request_total.labels(**labels)
                self.metrics_request_duration.labels(**labels)

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and scope["path"] != "/metrics":
                scope = {**scope, "path": route_label(scope["path"]), "r2a.path": scope["path"]}
            await super().__call__(scope, receive, send)

    instruments.RunnerTrafficMetricsMiddleware = BoundedTrafficMetrics  # type: ignore[misc,assignment]


class _RealPath:
    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if "r2a.path" in scope:
            # control bytes escaped: BentoML's access log writes the path as is, so a `%0A`
            # in it began a forged log line (no route has one: such a path is a 404 still)
            path = _CONTROL.sub(lambda m: f"%{ord(m[0]):02X}", scope["r2a.path"])
            scope = {**scope, "path": path}
            del scope["r2a.path"]
        await self.app(scope, receive, send)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


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
