"""serving/webhook.py on its own (no server): MLflow's own signing code against the receiver,
a bad, stale or missing signature refused with 401 and no reload, a replay and an unrelated
event without one, the receiver off without a secret, every other path passed on."""

from __future__ import annotations

import json
import time
import typing as t
import uuid

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from serving import webhook

pytestmark = pytest.mark.unit

SECRET = "s3cret-for-the-webhook-test"


def mlflow_delivery(
    secret: str = SECRET, name: str = "r2a-router", ts: int | None = None
) -> tuple[bytes, dict[str, str]]:
    """A delivery exactly as mlflow/webhooks/delivery.py builds it."""
    from mlflow.webhooks.delivery import _generate_hmac_signature

    payload = json.dumps(
        {
            "entity": "model_version_alias",
            "action": "created",
            "timestamp": "2026-12-02T06:00:00+00:00",
            "data": {"name": name, "alias": "champion", "version": "2"},
        }
    )
    delivery, stamp = str(uuid.uuid4()), str(int(time.time()) if ts is None else ts)
    headers = {
        "Content-Type": "application/json",
        "X-MLflow-Delivery-Id": delivery,
        "X-MLflow-Timestamp": stamp,
        "X-MLflow-Signature": _generate_hmac_signature(secret, delivery, stamp, payload),
    }
    return payload.encode(), headers


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> t.Iterator[tuple[TestClient, list[int]]]:
    monkeypatch.setenv("R2A_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("R2A_WEBHOOK_TOLERANCE_S", "300")
    reloads: list[int] = []

    def reload() -> dict[str, t.Any]:
        reloads.append(1)
        return {"router": "r2a", "router_version": "2"}

    inner = Starlette(
        routes=[Route("/info", lambda r: PlainTextResponse("inner"), methods=["POST"])]
    )
    app = webhook.WebhookReceiver(inner, reload=reload, models=lambda: {"r2a-router"})
    with TestClient(app) as c:
        yield c, reloads


def test_mlflow_signature_accepted_and_reloads(client: tuple[TestClient, list[int]]) -> None:
    c, reloads = client
    body, headers = mlflow_delivery()
    r = c.post(webhook.PATH, content=body, headers=headers)
    assert r.status_code == 200, r.text
    assert r.json() == {"reloaded": True, "router": "r2a", "router_version": "2"}
    assert reloads == [1]
    # the same delivery again (a replay inside the window): 200, no second reload
    r = c.post(webhook.PATH, content=body, headers=headers)
    assert r.status_code == 200 and r.json()["duplicate"] is True
    assert reloads == [1]


@pytest.mark.parametrize(
    "tamper",
    ["wrong_secret", "body_changed", "id_changed", "no_signature", "garbage", "stale", "future"],
)
def test_bad_or_stale_signature_401_no_reload(
    client: tuple[TestClient, list[int]], tamper: str
) -> None:
    c, reloads = client
    now = int(time.time())
    ts = {"stale": now - 301, "future": now + 301}.get(tamper)
    body, headers = mlflow_delivery(
        secret="not-the-secret" if tamper == "wrong_secret" else SECRET, ts=ts
    )
    if tamper == "body_changed":
        body = body.replace(b'"2"', b'"3"')
    elif tamper == "id_changed":
        headers["X-MLflow-Delivery-Id"] = str(uuid.uuid4())
    elif tamper == "no_signature":
        del headers["X-MLflow-Signature"]
    elif tamper == "garbage":
        headers["X-MLflow-Signature"] = "v1,AAAA"
    r = c.post(webhook.PATH, content=body, headers=headers)
    assert r.status_code == 401, r.text
    assert set(r.json()) == {"error", "field"} and r.json()["error"].startswith("webhook refused")
    assert reloads == []


def test_rotation_any_listed_signature(client: tuple[TestClient, list[int]]) -> None:
    c, reloads = client
    body, headers = mlflow_delivery()
    headers["X-MLflow-Signature"] = "v1,AAAA " + headers["X-MLflow-Signature"]
    assert c.post(webhook.PATH, content=body, headers=headers).status_code == 200
    assert reloads == [1]


def test_other_model_or_event_ignored(client: tuple[TestClient, list[int]]) -> None:
    c, reloads = client
    body, headers = mlflow_delivery(name="someone-elses-model")
    r = c.post(webhook.PATH, content=body, headers=headers)
    assert r.status_code == 200 and r.json()["reloaded"] is False
    assert reloads == []


def test_other_paths_pass_and_get_refused(client: tuple[TestClient, list[int]]) -> None:
    c, _ = client
    assert c.post("/info").text == "inner"
    assert c.get(webhook.PATH).status_code == 405


def test_off_without_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("R2A_WEBHOOK_SECRET", raising=False)
    reloads: list[int] = []
    app = webhook.WebhookReceiver(
        Starlette(), reload=lambda: reloads.append(1) or {}, models=lambda: {"r2a-router"}
    )
    body, headers = mlflow_delivery()
    with TestClient(app) as c:
        r = c.post(webhook.PATH, content=body, headers=headers)
    assert r.status_code == 404 and "R2A_WEBHOOK_SECRET" in r.json()["error"]
    assert reloads == []


def test_verify_is_mlflow_format() -> None:
    from mlflow.webhooks.delivery import _generate_hmac_signature

    assert webhook.sign("k", "id", "1", b'{"a": 1}') == _generate_hmac_signature(
        "k", "id", "1", '{"a": 1}'
    )


def test_a_slow_body_is_408_within_the_body_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The receiver's path is open to anyone: a body that does not arrive ends in 408 after
    R2A_BODY_TIMEOUT_S (the deadline every other body has), with no reload."""
    import asyncio

    monkeypatch.setenv("R2A_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("R2A_BODY_TIMEOUT_S", "0.3")
    reloads: list[int] = []
    app = webhook.WebhookReceiver(
        PlainTextResponse("inner"), reload=lambda: reloads.append(1) or {}, models=set
    )
    sent: list[dict[str, t.Any]] = []

    async def receive() -> dict[str, t.Any]:  # one byte, then nothing more ever
        if not sent and not getattr(receive, "once", False):
            receive.once = True  # type: ignore[attr-defined]
            return {"type": "http.request", "body": b"{", "more_body": True}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(msg: dict[str, t.Any]) -> None:
        sent.append(msg)

    scope = {"type": "http", "method": "POST", "path": webhook.PATH, "headers": []}
    t0 = time.perf_counter()
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 5))
    assert time.perf_counter() - t0 < 2.0
    assert sent[0]["status"] == 408 and not reloads
    assert json.loads(sent[1]["body"])["field"] == "body"
