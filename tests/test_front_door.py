"""Issue 44, items 12 and 15, at the service's front door (serving/middleware.py in front of a
Starlette app, in process): a header that must come once sent twice is refused, every error
body is written in one JSON style whichever layer wrote it, a null batch item says what is
wrong; and the label statistics of a folder dataset stay out of the checkout's reports/, the
retrieval modes are warmed before the service is ready."""

from __future__ import annotations

import json
import logging
import typing as t
from pathlib import Path

import pytest

from serving.requests import BadRequest, validate_body

pytestmark = pytest.mark.unit


def _front(monkeypatch: pytest.MonkeyPatch, **env: str) -> t.Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from serving.middleware import Hardening

    monkeypatch.delenv("R2A_API_KEY", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)

    async def echo(request: Request) -> JSONResponse:
        return JSONResponse(await request.json())

    app = Starlette(routes=[Route("/retrieve", echo, methods=["POST"])])
    return TestClient(Hardening(app, readiness=lambda answer: (True, {"ready": True})))


def _compact(raw: bytes) -> bool:
    return raw == json.dumps(json.loads(raw), ensure_ascii=False, separators=(",", ":")).encode()


def test_two_content_types_are_refused_not_the_last_one_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = _front(monkeypatch)
    body = b'{"query": "q"}'
    ok = c.post("/retrieve", content=body, headers={"content-type": "application/json"})
    assert ok.status_code == 200
    twice = [("content-type", "text/plain"), ("content-type", "application/json")]
    r = c.post("/retrieve", content=body, headers=twice)
    assert r.status_code == 400, r.text
    assert r.json() == {"error": "two Content-Type headers: send one", "field": None}


def test_two_authorizations_are_401_even_when_one_is_right(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = _front(monkeypatch, R2A_API_KEY="sesame", R2A_API_KEY_ALL="1")
    right = {"authorization": "Bearer sesame"}
    assert c.post("/retrieve", json={"query": "q"}, headers=right).status_code == 200
    twice = [("authorization", "Bearer wrong"), ("authorization", "Bearer sesame")]
    r = c.post("/retrieve", json={"query": "q"}, headers=twice)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert r.json() == {"error": "two Authorization headers: send one", "field": None}


def test_every_error_body_is_written_in_one_json_style(monkeypatch: pytest.MonkeyPatch) -> None:
    c = _front(monkeypatch)
    for r, status in [
        (c.get("/nowhere"), 404),  # Starlette's, reshaped
        (c.get("/retrieve"), 405),
        (c.post("/retrieve", content=b"{", headers={"content-type": "application/json"}), 422),
        (c.post("/retrieve", content=b"{}", headers={"content-type": "text/plain"}), 415),
    ]:
        assert r.status_code == status
        assert set(r.json()) == {"error", "field"} and _compact(r.content), r.content


def test_the_connections_own_errors_are_compact_too() -> None:
    from serving.connection import _raw_error

    raw = _raw_error(400, "Bad Request", "malformed request head: x")
    assert _compact(raw.partition(b"\r\n\r\n")[2])


def test_a_null_batch_item_says_it_is_null() -> None:
    with pytest.raises(BadRequest) as e:
        validate_body("route_batch", {"queries": ["Who?", None]})
    assert e.value.field == "queries[1]"
    assert e.value.message == "queries[1] is null: each item must be a string"
    with pytest.raises(BadRequest, match="^query is required$"):  # a field left out
        validate_body("route", {})


def test_a_folder_datasets_label_statistics_stay_out_of_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from r2adapter.config import settings
    from r2adapter.label.step import label_paths

    data = tmp_path / "data"
    (data / "shipped").mkdir(parents=True)
    monkeypatch.setenv("R2A_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("R2A_DATA_DIR", str(data))
    settings.cache_clear()
    try:
        home = (tmp_path / "home").resolve()
        assert label_paths("shipped") == (
            home / "labels" / "shipped.jsonl",
            home / "reports" / "labels" / "shipped.json",
        )
        assert label_paths("musmini") == (
            home / "labels" / "musmini.jsonl",
            home / "labels" / "musmini.stats.json",  # /labels/ is git-ignored
        )
    finally:
        settings.cache_clear()


class _Retriever:
    def __init__(self, fails: bool = False) -> None:
        self.calls: list[tuple[str, int]] = []
        self.fails = fails

    def retrieve(self, query: str, k: int = 5, qvec: t.Any = None) -> list[t.Any]:
        self.calls.append((query, k))
        if self.fails:
            raise RuntimeError("no adr champion")
        return []


def test_each_retrieval_mode_is_warmed_before_the_service_is_ready(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from serving.state import ServingState

    retrievers = {"dense": _Retriever(), "catrag": _Retriever(), "adr": _Retriever(fails=True)}
    state = object.__new__(ServingState)
    state.encoder = t.cast(t.Any, type("E", (), {"encode_query": lambda self, q: None})())
    state.adapter = lambda: t.cast(t.Any, type("A", (), {"retrievers": retrievers})())  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, logger="r2a.serving"):
        state.warm_modes()
    assert all(len(r.calls) == 1 for r in retrievers.values())
    text = caplog.text
    assert "retrieval mode adr not warmed: no adr champion" in text
    assert "retrieval modes warmed up: dense" in text and "catrag" in text
