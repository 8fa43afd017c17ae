"""The service's one error contract: every error is JSON `{"error": str, "field": str|null}`
with a status from the table below, declared in the OpenAPI document. 503 and 429 carry
`Retry-After`; none names a connection string, user or host."""

from __future__ import annotations

import json
import os
import re
import typing as t

from pydantic import BaseModel
from starlette.responses import JSONResponse

# status → what it means for this service (the OpenAPI descriptions)
ERRORS: dict[int, str] = {
    400: "Host header not among R2A_ALLOWED_HOSTS (when that is set), a malformed request "
    "head, or two Content-Type headers",
    401: "Missing or wrong API key (`Authorization: Bearer <key>`), or two Authorization headers",
    405: "Method not allowed (the endpoints take POST)",
    408: "Body (or request head) not received within R2A_BODY_TIMEOUT_S "
    "(R2A_HEADER_TIMEOUT_S); the connection is closed",
    413: "Body larger than the limit (R2A_MAX_BODY_BYTES)",
    415: "Body is not application/json",
    422: "Bad input: malformed JSON (or nested deeper than 32), a field out of range or not "
    "text (`field` names it)",
    429: "Too many requests in flight: retry after `Retry-After` seconds",
    431: "Request head larger than 16 KiB; the connection is closed",
    503: "Overloaded, or a dependency (database, champion, index, LLM) is unavailable: "
    "retry after `Retry-After` seconds",
}
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
# what names a host without a scheme (issue 44, item 8): urllib3's `host='…', port=…`,
# `host:port` and a bare IP address
HOST_ARG = re.compile(r"\b(host|port)=('[^']*'|\"[^\"]*\"|[^\s,)]+)", re.IGNORECASE)
HOST_PORT = re.compile(
    r"(?<![\w.-])(?:(?:\[[0-9a-f:]+\]|\d{1,3}(?:\.\d{1,3}){3}|localhost)(?::\d{1,5})?"
    r"|[a-z][a-z0-9-]*(?:\.[a-z0-9-]+)*:\d{2,5})(?![\w-])",
    re.IGNORECASE,
)


def dumps(data: t.Any) -> str:
    """JSON as Starlette's JSONResponse writes it (compact): one style for every body,
    whichever layer wrote it (issue 44, item 15)."""
    return json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class ErrorBody(BaseModel):
    error: str
    field: str | None = None


def retry_after_s() -> int:
    return int(os.environ.get("R2A_RETRY_AFTER_S", "5"))


def scrub(text: str) -> str:
    """No connection string, user, host or port reaches a client (issue 13, item 5; issue
    44, item 8)."""
    text = URL.sub("<url>", text)
    text = HOST_ARG.sub(lambda m: f"{m.group(1)}=<{m.group(1).lower()}>", text)
    return HOST_PORT.sub("<host>", text)


def error_response(
    status: int, error: str, field: str | None = None, reason: str | None = None
) -> JSONResponse:
    """The error as a response; 503/429 tell the client when to come back, and `reason`
    (overload, upstream_timeout, dependency, resources) labels the 503 in /metrics."""
    headers = {}
    if status in (429, 503):
        headers["Retry-After"] = str(retry_after_s())
    if reason:
        headers["X-R2A-Reason"] = reason
    line = error.strip().splitlines()[0] if error.strip() else error
    body = ErrorBody(error=scrub(line), field=field)
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


def error_bytes(status: int, raw: bytes, content_type: str) -> bytes:
    """Any error body from below (BentoML, Starlette) in the one shape."""
    if "json" in content_type:
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("error"), str):
            if status >= 500 and data["error"].startswith("An unexpected error"):
                data = {"error": _generic(status)}  # BentoML's words, which blame nobody
            out = {"error": scrub(data["error"]), "field": data.get("field")}
            return dumps(out).encode()
    text = raw.decode(errors="replace").strip().splitlines()
    message = text[0] if text and status < 500 else _generic(status)
    return dumps({"error": scrub(message), "field": None}).encode()


def _generic(status: int) -> str:
    if status in (429, 503):
        return "the service is overloaded: retry after Retry-After seconds"
    return "internal error: see the server log"


# -- the OpenAPI document ----------------------------------------------------------------

ERROR_SCHEMA = "ErrorBody"


def document_errors(spec: dict[str, t.Any], api_paths: t.Iterable[str]) -> dict[str, t.Any]:
    """Declare the error contract in BentoML's generated document: each endpoint's 4xx/503
    with the ErrorBody schema (BentoML's own 400/404/500 entries are replaced)."""
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    schemas[ERROR_SCHEMA] = ErrorBody.model_json_schema()
    ref = {"$ref": f"#/components/schemas/{ERROR_SCHEMA}"}

    def response(code: int) -> dict[str, t.Any]:
        out: dict[str, t.Any] = {
            "description": ERRORS[code],
            "content": {"application/json": {"schema": ref}},
        }
        if code in (429, 503):
            out["headers"] = {"Retry-After": {"schema": {"type": "integer"}}}
        return out

    for path in api_paths:
        for op in (spec.get("paths", {}).get(path) or {}).values():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            ok = op["responses"].get("200") or op["responses"].get(200)
            _ref_inlined(ok, schemas)
            if "requestBody" in op:  # a JSON object, even `{}`, is required (else 415)
                op["requestBody"]["required"] = True
            op["responses"] = {"200": ok, **{str(c): response(c) for c in ERRORS}}
    for path in ("/readyz", "/readyz/answer"):
        spec.setdefault("paths", {})[path] = {
            "get": {
                "summary": "Readiness: 200 when the service (or the answer path) can serve",
                "tags": ["Infrastructure"],
                "responses": {
                    "200": {
                        "description": "Ready",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    "503": response(503),
                },
            }
        }
    return spec


def _ref_inlined(ok: dict[str, t.Any] | None, schemas: dict[str, t.Any]) -> None:
    """BentoML inlines the response schema without its nullable fields (`anyOf` with null
    becomes a plain type); the copy in components keeps them: point at it."""
    content = ((ok or {}).get("content") or {}).get("application/json") or {}
    title = (content.get("schema") or {}).get("title")
    if title in schemas:
        content["schema"] = {"$ref": f"#/components/schemas/{title}"}
