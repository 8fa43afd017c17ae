"""POST /webhooks/mlflow: the registry tells the service that an alias moved (pushed, not polled).

MLflow (>= 3.3) delivers `model_version_alias.created` to a registered URL (`r2a mlflow
webhook --service-url ...`, r2adapter/registry/server.py) with three headers:
X-MLflow-Delivery-Id, X-MLflow-Timestamp (Unix seconds) and X-MLflow-Signature
(`v1,<base64 HMAC-SHA256>` over `<delivery id>.<timestamp>.<raw body>` with the webhook's
secret: mlflow/webhooks/delivery.py). This receiver, an ASGI middleware mounted outside
serving/middleware.py's Hardening, checks them before it reads anything else:

- the secret is R2A_WEBHOOK_SECRET; unset, the path answers 404 (the receiver is off and
  never takes an unsigned request);
- the signature is compared in constant time (`hmac.compare_digest`) against every `v1,`
  entry of the header (Standard Webhooks allows several, for secret rotation);
- the timestamp must be within R2A_WEBHOOK_TOLERANCE_S (300) of the service's clock, and
  a delivery id already accepted within that window is answered 200 without a second
  reload (a replay of a captured request does nothing);
- a missing header, a bad or stale signature: 401 `{"error", "field"}`, no reload, counted
  in /metrics as `r2a_webhook_total{outcome}` (outcomes: reloaded, ignored, duplicate,
  missing_headers, bad_signature, stale, disabled, not_ready).

A verified alias event for one of the registered routers triggers the reload POST /reload
runs (`ServingState.reload`: the new champion loads and warms while the old one serves),
and the answer carries what is served afterwards. The API key (R2A_API_KEY) stays for
people: this path authenticates by signature, so it sits outside the key check. The
champion poll (R2A_CHAMPION_POLL_S) stays as the fallback for a missed delivery.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import os
import threading
import time
import typing as t
from collections import OrderedDict

import bentoml
from anyio import to_thread
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from serving.errors import error_response
from serving.middleware import body_timeout_s, read_body

log = logging.getLogger("r2a.serving")

PATH = "/webhooks/mlflow"
SIGNATURE = b"x-mlflow-signature"
TIMESTAMP = b"x-mlflow-timestamp"
DELIVERY = b"x-mlflow-delivery-id"
MAX_BODY = 64 * 1024  # an alias event is ~200 bytes
ALIAS_CREATED = ("model_version_alias", "created")

WEBHOOKS = bentoml.metrics.Counter(
    name="r2a_webhook_total",
    documentation="registry webhook deliveries by outcome (reloaded, ignored, duplicate, "
    "missing_headers, bad_signature, stale, disabled, not_ready)",
    labelnames=["outcome"],
)


def sign(secret: str, delivery_id: str, timestamp: str, body: bytes) -> str:
    """MLflow's signature header value for this delivery (mlflow/webhooks/delivery.py)."""
    content = delivery_id.encode() + b"." + timestamp.encode() + b"." + body
    digest = hmac.new(secret.encode(), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def verify(
    secret: str,
    headers: t.Mapping[bytes, bytes],
    body: bytes,
    now: float,
    tolerance_s: float,
) -> str | None:
    """None when the delivery is authentic and fresh, else the reason it is not."""
    sig, ts, delivery = (headers.get(h, b"") for h in (SIGNATURE, TIMESTAMP, DELIVERY))
    if not (sig and ts and delivery):
        return "missing_headers"
    try:
        stamp = int(ts)
        delivery_id, timestamp = delivery.decode("ascii"), ts.decode("ascii")
    except (ValueError, UnicodeDecodeError):
        return "bad_signature"
    expected = sign(secret, delivery_id, timestamp, body).encode()
    # every entry compared, in constant time, whatever the first one gave
    matched = False
    for entry in sig.split():
        matched |= hmac.compare_digest(entry, expected)
    if not matched:
        return "bad_signature"
    if abs(now - stamp) > tolerance_s:  # signed but old (or from the future): a replay
        return "stale"
    return None


class WebhookReceiver:
    """Pure ASGI: answers PATH itself and hands every other request on untouched."""

    def __init__(
        self,
        app: ASGIApp,
        reload: t.Callable[[], dict[str, t.Any] | None] | None = None,
        models: t.Callable[[], set[str]] | None = None,
    ) -> None:
        self.app = app
        self.secret = os.environ.get("R2A_WEBHOOK_SECRET", "")
        self.tolerance_s = float(os.environ.get("R2A_WEBHOOK_TOLERANCE_S", "300"))
        self.body_timeout_s = body_timeout_s()  # R2A_BODY_TIMEOUT_S, as every other body
        self._reload = reload or _reload_served
        self._models = models or _registered_models
        self._seen: OrderedDict[str, float] = OrderedDict()  # accepted delivery id → time
        self._lock = threading.Lock()  # one webhook reload at a time

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH:
            await self.app(scope, receive, send)
            return
        resp = await self._handle(scope, receive)
        await resp(scope, receive, send)

    async def _handle(self, scope: Scope, receive: Receive) -> JSONResponse:
        if not self.secret:
            return self._refuse(
                404, "disabled", "the webhook receiver is off: set R2A_WEBHOOK_SECRET"
            )
        if scope["method"] != "POST":
            resp = error_response(405, f"{PATH} takes POST, not {scope['method']}")
            resp.headers["Allow"] = "POST"
            return resp
        # the path is open to anyone: the body is read under the same deadline as every
        # other body (a slow sender cannot hold a connection; issue 27, item 1)
        try:
            async with asyncio.timeout(self.body_timeout_s):
                body = await read_body(receive, MAX_BODY)
        except TimeoutError:
            resp = error_response(
                408, f"the body was not received within {self.body_timeout_s:g} s", "body"
            )
            resp.headers["Connection"] = "close"
            return resp
        if body is None:
            return error_response(413, f"the body is larger than {MAX_BODY} bytes")
        headers = dict(scope["headers"])
        why = verify(self.secret, headers, body, time.time(), self.tolerance_s)
        if why is not None:
            words = {
                "missing_headers": "missing X-MLflow-Signature, -Timestamp or -Delivery-Id",
                "bad_signature": "the signature does not match",
                "stale": f"the timestamp is more than {self.tolerance_s:.0f} s away",
            }
            return self._refuse(401, why, f"webhook refused: {words[why]}")
        delivery = headers[DELIVERY].decode("ascii")
        if self._duplicate(delivery):
            WEBHOOKS.labels(outcome="duplicate").inc()
            return JSONResponse({"reloaded": False, "duplicate": True})
        try:
            event = json.loads(body)
            entity, action = event.get("entity"), event.get("action")
            name = (event.get("data") or {}).get("name")
        except (ValueError, AttributeError):
            entity = action = name = None
        if (entity, action) != ALIAS_CREATED or name not in self._models():
            WEBHOOKS.labels(outcome="ignored").inc()
            self._remember(delivery)
            return JSONResponse({"reloaded": False, "ignored": f"{entity}.{action} for {name}"})
        info = await to_thread.run_sync(self._locked_reload)
        if info is None:
            # MLflow retries a 503: the state may be up by then
            return self._refuse(503, "not_ready", "the service is starting: retry later")
        self._remember(delivery)
        WEBHOOKS.labels(outcome="reloaded").inc()
        log.info("webhook %s: %s@%s moved: %s", delivery, name, event["data"].get("alias"), info)
        return JSONResponse({"reloaded": True, **info})

    def _refuse(self, status: int, outcome: str, message: str) -> JSONResponse:
        WEBHOOKS.labels(outcome=outcome).inc()
        log.info("%s POST %s: %s", status, PATH, message)
        return error_response(status, message)

    def _locked_reload(self) -> dict[str, t.Any] | None:
        with self._lock:
            return self._reload()

    def _duplicate(self, delivery: str) -> bool:
        cutoff = time.time() - self.tolerance_s
        while self._seen and next(iter(self._seen.values())) < cutoff:
            self._seen.popitem(last=False)
        return delivery in self._seen

    def _remember(self, delivery: str) -> None:
        self._seen[delivery] = time.time()
        while len(self._seen) > 10_000:
            self._seen.popitem(last=False)


def _reload_served() -> dict[str, t.Any] | None:
    """What POST /reload does, on this worker's state (None while it starts)."""
    from serving import state

    st = state._current
    return None if st is None else st.reload()


def _registered_models() -> set[str]:
    """The registry names whose alias moves concern this service: every router kind."""
    from r2adapter.adr.registry import MODEL as ADR
    from r2adapter.kway.model import MODEL as KWAY
    from r2adapter.route.kinds import TRAINED_ROUTERS

    return {kind.model for kind in TRAINED_ROUTERS.values()} | {KWAY, ADR}
