"""Issue 27's probes, kept as tests: slow clients, nested and non-text bodies, /route_batch
under load and with the database down, /metrics bounded under made-up paths. Each one over
real HTTP against `r2a serve` with one request in flight at most (R2A_MAX_IN_FLIGHT=1) and
short deadlines for the body and the request head, plus the pure parts on their own."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
import typing as t
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.conftest import served_store, serving

BODY_S = 3.0  # R2A_BODY_TIMEOUT_S of the served instance
HEAD_S = 3.0  # R2A_HEADER_TIMEOUT_S
J = {"content-type": "application/json"}
Q = {"query": "Who is the father of the director of the film?"}


@pytest.fixture(scope="module")
def svc(
    mini_indexed: str,
    pg_env: dict[str, str],
    champion_store: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, t.Any]]:
    tmp = tmp_path_factory.mktemp("hard2")
    env = {
        **pg_env,
        "MLFLOW_TRACKING_URI": served_store(champion_store, tmp / "mlflow"),
        "R2A_SERVE_DATASET": "musmini",
        "R2A_MAX_IN_FLIGHT": "1",
        "R2A_BODY_TIMEOUT_S": str(BODY_S),
        "R2A_HEADER_TIMEOUT_S": str(HEAD_S),
        "R2A_LLM_BASE_URL": "http://127.0.0.1:9/v1",  # no LLM: nothing here needs one
        "R2A_LLM_MODEL": "none",
    }
    log = tmp / "serve.log"
    with serving(env, log) as url:
        yield {"url": url, "log": str(log), "env": env, "tmp": str(tmp)}


def post(url: str, path: str, body: object, **kw: object) -> httpx.Response:
    content = body if isinstance(body, bytes | str) else json.dumps(body)
    return httpx.post(f"{url}{path}", content=content, headers=J, timeout=60, **kw)  # type: ignore[arg-type]


def assert_error(r: httpx.Response, status: int) -> dict[str, object]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"error", "field"} and isinstance(body["error"], str), body
    return body


def log_text(svc: dict[str, str]) -> str:
    return Path(svc["log"]).read_text(errors="replace")


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


class Slow(threading.Thread):
    """A client that sends `head`, then one byte of `drip` every `every_s` seconds, reading
    between bytes: the status line it got (or 'no-reply') and when."""

    def __init__(self, url: str, head: bytes, drip: bytes, every_s: float, limit_s: float):
        super().__init__(daemon=True)
        self.args = (_port(url), head, drip, every_s, limit_s)
        self.status = ""
        self.after_s = 0.0
        self.closed = False

    def run(self) -> None:
        port, head, drip, every_s, limit_s = self.args
        s = socket.create_connection(("127.0.0.1", port))
        s.settimeout(every_s)
        t0 = time.perf_counter()
        reply = b""
        try:
            s.sendall(head)
            for i in range(10**6):
                if time.perf_counter() - t0 > limit_s:
                    break
                try:
                    s.sendall(drip[i % len(drip) : i % len(drip) + 1])
                except OSError:
                    break
                try:
                    reply = s.recv(65536)
                    if reply:
                        break
                    self.closed = True  # closed without a word
                    break
                except TimeoutError:
                    continue
                except OSError:
                    break
            self.after_s = time.perf_counter() - t0
            s.settimeout(2.0)
            while reply and b"\r\n\r\n" in reply:  # the rest of the answer, to the close
                try:
                    more = s.recv(65536)
                except OSError:
                    break
                if not more:
                    break
                reply += more
            self.status = reply.split(b"\r\n")[0].decode(errors="replace") or "no-reply"
            self.body = reply.split(b"\r\n\r\n", 1)[-1]
        finally:
            s.close()


# -- 1. slow bodies and slow heads ---------------------------------------------------------


@pytest.mark.integration
def test_slow_body_ends_in_408_and_locks_nobody_out(svc: dict[str, str]) -> None:
    head = (
        b"POST /route HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n"
    )
    slow = Slow(svc["url"], head, b" ", every_s=0.5, limit_s=BODY_S + 10)
    slow.start()
    time.sleep(0.5)
    codes = []
    while slow.is_alive() and len(codes) < 20:
        codes.append(post(svc["url"], "/route", Q).status_code)
        time.sleep(0.1)
    slow.join(BODY_S + 15)
    assert codes and set(codes) == {200}, codes  # R2A_MAX_IN_FLIGHT=1, yet no 429
    assert slow.status.endswith("408 Request Timeout"), slow.status
    assert BODY_S - 0.5 <= slow.after_s <= BODY_S + 2, slow.after_s
    assert json.loads(slow.body)["error"].startswith("the body was not received within")


@pytest.mark.integration
def test_slow_head_ends_in_408_within_the_header_deadline(svc: dict[str, str]) -> None:
    """uvicorn bounds no request head (only the wait between requests, timeout_keep_alive):
    serving.middleware.GuardedH11 does."""
    head = b"POST /route HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    slow = Slow(svc["url"], head, b"X-Slow: aaaaaaaaaaaaaa\r\n", every_s=0.5, limit_s=HEAD_S + 10)
    slow.start()
    slow.join(HEAD_S + 15)
    assert slow.status.endswith("408 Request Timeout"), slow.status
    assert HEAD_S - 0.5 <= slow.after_s <= HEAD_S + 2, slow.after_s
    assert post(svc["url"], "/route", Q).status_code == 200


@pytest.mark.integration
def test_a_keep_alive_connection_is_not_cut_by_the_head_deadline(svc: dict[str, str]) -> None:
    """Requests on one connection, spread over more than the head deadline: all served."""
    with httpx.Client(base_url=svc["url"], timeout=30) as c:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < HEAD_S + 1:
            assert c.post("/route", json=Q).status_code == 200
            time.sleep(0.4)


@pytest.mark.integration
def test_a_huge_header_is_431_not_a_reset(svc: dict[str, str]) -> None:
    r = httpx.post(f"{svc['url']}/route", json=Q, headers={"X-Big": "a" * (1 << 20)}, timeout=30)
    assert assert_error(r, 431)["error"].startswith("the request head is larger than")
    assert post(svc["url"], "/route", Q).status_code == 200


# -- 2. nested bodies, 6. a lone surrogate ---------------------------------------------------


@pytest.mark.integration
def test_deeply_nested_json_is_422_at_once(svc: dict[str, str]) -> None:
    deep = '{"query":"who is","x":' + "[" * 1000 + "]" * 1000 + "}"
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        r = post(svc["url"], "/route", deep)
        times.append(time.perf_counter() - t0)
        body = assert_error(r, 422)
        assert body == {"error": "malformed JSON: nested too deeply", "field": "body"}
    # the target is 50 ms; the margin is for a box that the full suite keeps busy
    assert min(times) < 0.25, times
    # unbalanced and deeper than the recursion limit: json.loads' RecursionError, caught
    r = post(svc["url"], "/route_batch", '{"queries":' + "[" * 100_000)
    assert assert_error(r, 422)["error"] == "malformed JSON: nested too deeply"
    assert "Traceback" not in log_text(svc)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/retrieve", '{"query": "who is \\ud800 the director"}', "query"),
        ("/route", '{"query": "who is \\ud800 the director"}', "query"),
        ("/rewrite", '{"query": "who is \\udfff"}', "query"),
        ("/route_batch", '{"queries": ["fine", "who is \\ud800"]}', "queries[1]"),
    ],
)
def test_a_lone_surrogate_is_422_naming_the_field(
    svc: dict[str, str], path: str, body: str, field: str
) -> None:
    before = len(log_text(svc).splitlines())
    got = assert_error(post(svc["url"], path, body), 422)
    assert got["field"] == field and "lone surrogate" in str(got["error"]), got
    time.sleep(0.3)
    new = log_text(svc).splitlines()[before:]
    assert "Traceback" not in "\n".join(new) and "validation error" not in "\n".join(new)
    # the access log's line, and the front door's one-line reason
    assert len([x for x in new if "422" in x]) <= 2, new


# -- 3, 4. /route_batch: served under load, 503 with the database down -----------------------


@pytest.mark.integration
def test_route_batch_of_32_is_served_beside_route_traffic(svc: dict[str, str]) -> None:
    """With one request in flight allowed, clients that retry after a 429 are all served
    in the end, batches of 32 included; no BentoML 503 and no traceback."""
    batch = {"queries": [f"who directed film number {i}?" for i in range(32)]}

    def client(i: int) -> list[int]:
        codes = []
        for _ in range(4):
            for _attempt in range(200):
                r = post(svc["url"], "/route_batch" if i % 2 else "/route", batch if i % 2 else Q)
                if r.status_code != 429:
                    break
                time.sleep(0.02)
            codes.append(r.status_code)
            if i % 2 and r.status_code == 200:
                assert len(r.json()) == 32 and r.json()[0]["query"] == batch["queries"][0]
        return codes

    with ThreadPoolExecutor(6) as pool:
        codes = [c for cs in pool.map(client, range(6)) for c in cs]
    assert set(codes) == {200}, codes
    log = log_text(svc)
    assert "Traceback" not in log and "process is overloaded" not in log
    # the refusals along the way: a WARNING line now and then, not one each
    assert len([x for x in log.splitlines() if "overloaded:" in x]) <= 3


# -- 5. /metrics -------------------------------------------------------------------------------


@pytest.mark.integration
def test_metrics_stay_bounded_under_made_up_paths(svc: dict[str, str]) -> None:
    url = svc["url"]
    with httpx.Client(base_url=url, timeout=30) as c:
        before = len(c.get("/metrics").content)  # `other`'s series are there from the start
        for i in range(500):
            c.get(f"/nope-{i}-%01%0A%22x")  # control bytes and a quote in the path
        c.post("/also-nope", content=b"{}", headers=J)
        text = c.get("/metrics").text
    assert len(text) <= before * 1.1, (before, len(text))
    assert "nope" not in text and "\x01" not in text
    assert 'endpoint="other"' in text and 'endpoint="/route"' in text


def _routes_counted(text: str) -> float:
    """The sum of the project's r2a_route_total series in one /metrics page."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("r2a_route_total{")
    )


@pytest.mark.integration
def test_a_second_server_leaves_the_first_ones_metrics(svc: dict[str, t.Any]) -> None:
    """Item 7: a second `r2a serve` on the same host (the same BENTOML_HOME) used to empty
    the first one's /metrics; each now counts in a folder of its own (serving/launch.py)."""
    url = svc["url"]
    for _ in range(3):
        assert post(url, "/route", Q).status_code == 200
    before = _routes_counted(httpx.get(f"{url}/metrics", timeout=30).text)
    assert before >= 3
    with serving(svc["env"], Path(svc["tmp"]) / "serve2.log") as second:
        assert post(second, "/route", Q).status_code == 200
        mine = _routes_counted(httpx.get(f"{second}/metrics", timeout=30).text)
        after = _routes_counted(httpx.get(f"{url}/metrics", timeout=30).text)
    assert after >= before, (before, after)
    assert mine == 1, mine  # the second counts only its own


@pytest.mark.integration
def test_routing_with_the_database_down_answers_from_memory(svc: dict[str, str]) -> None:
    """Runs last in this module: stops the session's Postgres and starts it again. /retrieve
    answers 503 with Retry-After; this two-way champion decides in memory, so /route and
    /route_batch keep answering 200 (a router that reads the database, the k-way one's
    index-version check, fails into @answers_errors' 503: /route_batch had been the one
    endpoint without it, the 500). No traceback either way."""
    from r2adapter.store import embedded

    url = svc["url"]
    embedded.down()
    try:
        r = post(url, "/retrieve", {**Q, "mode": "dense"})
        assert_error(r, 503)
        assert int(r.headers["retry-after"]) > 0
        for path, body in (("/route_batch", {"queries": ["who is x"]}), ("/route", Q)):
            assert post(url, path, body).status_code == 200
    finally:
        embedded.up()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 30:
        r = post(url, "/retrieve", {**Q, "mode": "dense"})
        if r.status_code == 200:
            break
        time.sleep(0.5)
    assert r.status_code == 200, r.text
    assert "Traceback" not in log_text(svc)


# -- the parts on their own ------------------------------------------------------------------


@pytest.mark.unit
def test_too_deep() -> None:
    from serving.requests import MAX_DEPTH, too_deep

    assert not too_deep(b'{"query": "x", "mode": "auto"}')
    assert not too_deep(b'{"queries": ["[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["]}')
    assert not too_deep(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH)
    assert not too_deep(b"[[]]" * 1000)  # many brackets, shallow
    assert too_deep(b"[{" * MAX_DEPTH + b"}]" * MAX_DEPTH)
    assert too_deep(('{"q":"a","x":' + "[" * 1000 + "]" * 1000 + "}").encode())
    assert too_deep(b"[" * 5000)  # unbalanced and deep: deep is what it is
    for big in (b"[" * 500_000 + b"]" * 500_000, b'["' + b"[" * (1 << 20) + b'"]'):
        t0 = time.perf_counter()
        assert too_deep(big) is (big[1] != ord('"'))  # inside a string brackets are text
        assert time.perf_counter() - t0 < 0.25


@pytest.mark.unit
def test_parse_query_refuses_a_lone_surrogate() -> None:
    from serving.requests import BadRequest, parse_query

    with pytest.raises(BadRequest, match=r"lone surrogate \(U\+D800\)") as e:
        parse_query("who is \ud800 x", "queries[2]")
    assert e.value.field == "queries[2]"
    assert parse_query(" who is 🦉 ") == "who is 🦉"


@pytest.mark.unit
def test_route_labels_are_bounded() -> None:
    from serving.metric_labels import route_label

    assert route_label("/route") == "/route" and route_label("/metrics") == "/metrics"
    assert route_label("/static_content/index.css") == "/static_content"
    assert route_label("/nope-\x01") == "other" and route_label("/route/x") == "other"


@pytest.mark.unit
def test_batcher_serves_a_list_in_one_call() -> None:
    from serving.service import RouteBatcher

    calls: list[int] = []

    def score(qs: list[str]) -> list[str]:
        calls.append(len(qs))
        return [q.upper() for q in qs]

    async def go() -> tuple[list[str], str]:
        b = RouteBatcher(score, max_batch=32, parallel=2)
        return await asyncio.gather(b.many([f"q{i}" for i in range(32)]), b("one"))  # type: ignore[return-value]

    many, one = asyncio.run(go())
    assert many == [f"Q{i}" for i in range(32)] and one == "ONE"
    assert sorted(calls) == [1, 32], calls


def _front(monkeypatch: pytest.MonkeyPatch, **env: str) -> object:
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


@pytest.mark.unit
def test_only_the_allowed_host_names_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    c: t.Any = _front(monkeypatch, R2A_ALLOWED_HOSTS="r2a.example.com, *.internal")
    for host, ok in [
        ("r2a.example.com", True),
        ("r2a.example.com:8443", True),
        ("svc.ns.internal", True),
        ("evil.example", False),
        ("127.0.0.1:3000", False),
    ]:
        r = c.post("/retrieve", json={"query": "q"}, headers={"host": host})
        assert (r.status_code == 200) is ok, (host, r.text)
        if not ok:
            assert r.status_code == 400 and "R2A_ALLOWED_HOSTS" in r.json()["error"]
    # the kubelet's probes name the pod's address: they stay open
    assert c.get("/readyz", headers={"host": "10.0.0.7:3000"}).status_code == 200
    c = _front(monkeypatch, R2A_ALLOWED_HOSTS="")
    assert c.post("/retrieve", json={"query": "q"}, headers={"host": "any"}).status_code == 200


@pytest.mark.unit
def test_the_swagger_page_loads_nothing_from_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    c: t.Any = _front(monkeypatch)
    r = c.get("/")
    assert r.status_code == 200 and "swagger-ui-bundle.js" in r.text
    assert "googletagmanager" not in r.text and "https://" not in r.text
    assert "script-src 'self'" in r.headers["content-security-policy"]


@pytest.mark.unit
def test_validate_and_load_refuse_a_nul_alike() -> None:
    from r2adapter.data.schema import Dataset, Passage, Query
    from r2adapter.data.validate import corpus_problems, validate

    good = Passage.of("Paris", "Paris is the capital of France.")
    bad = Passage.of("Bad\x00title", "A passage with a NUL \x00 in it.")
    q = Query("q1", "Where is Paris?", ["France"], [good.id], "bridge", "t")
    ds = Dataset("nul", "json", "json", [good, bad], [q])
    assert any("NUL" in p for p in corpus_problems(ds)), corpus_problems(ds)
    report = validate(ds)
    assert not report.success
    failed = {(c.table, c.column) for c in report.checks if not c.success}
    assert {("corpus", "title"), ("corpus", "text")} <= failed, failed


@pytest.mark.unit
def test_the_cli_reads_a_file_with_a_utf8_bom_as_the_service_does(tmp_path: Path) -> None:
    from r2adapter.data.adapters import read_json

    f = tmp_path / "q.json"
    f.write_bytes(b"\xef\xbb\xbf" + json.dumps([{"question": "who?"}]).encode())
    assert read_json(f) == [{"question": "who?"}]
    assert json.loads(f.read_bytes()) == [{"question": "who?"}]  # what the service does


@pytest.mark.unit
def test_the_query_pattern_admits_what_the_service_serves() -> None:
    """The published pattern (what schemathesis generates positive data from; pydantic
    checks it too) and the service's rule agree, so positive data is served (issue 27: 51
    schemathesis failures for text of only invisible characters)."""
    import random
    import re

    import jsonschema_rs
    from pydantic import TypeAdapter, ValidationError

    from serving.requests import QUERY_PATTERN, BadRequest, Query, parse_query

    assert jsonschema_rs.validator_for(
        {"type": "string", "format": "regex"}, validate_formats=True
    ).is_valid(QUERY_PATTERN)  # an ECMA regex, as OpenAPI asks
    rx, ta = re.compile(QUERY_PATTERN), TypeAdapter(Query)
    rng = random.Random(27)
    picks = [0x20, 0x41, 0xAD, 0x301, 0x200B, 0xFEFF, 0x3000, 0x1F989, 0xE0001, 0x1D173]
    cases = ["\u200b", "\u0301", " \t", "a", "\u200bx", "\x00a", "🦉", "\U000e0001", "\u00ad"]
    for _ in range(3000):
        cps = [
            rng.choice([rng.randint(1, 0x3000), rng.randint(0x10000, 0x10FFFF), rng.choice(picks)])
            for _ in range(rng.randint(1, 3))
        ]
        if not any(0xD800 <= c <= 0xDFFF for c in cps):
            cases.append("".join(map(chr, cps)))
    for s in cases:
        try:
            served = bool(parse_query(s))
        except BadRequest:
            served = False
        try:
            ta.validate_python(s)
            valid = True
        except ValidationError:
            valid = False
        assert served == bool(rx.match(s)) == valid, repr(s)


@pytest.mark.unit
def test_each_server_has_its_own_metrics_folder(tmp_path: Path) -> None:
    """BentoML empties one shared folder when any server starts (a second `r2a serve`
    emptied the first one's /metrics): each server gets `<home>/r2a-metrics/<pid>`, made
    empty; a dead server's folder goes, a live one's stays."""
    from serving.launch import FOLDER, instance_metrics_dir

    base = tmp_path / FOLDER
    dead, alive = base / "999999999", base / str(os.getppid())
    for d in (dead, alive):
        d.mkdir(parents=True)
        (d / "counter_1.db").write_bytes(b"x")
    own = instance_metrics_dir(tmp_path, os.getpid())
    assert own == base / str(os.getpid()) and own.is_dir() and not any(own.iterdir())
    assert not dead.exists() and (alive / "counter_1.db").exists()
    (own / "counter_2.db").write_bytes(b"x")
    assert not any(instance_metrics_dir(tmp_path, os.getpid()).iterdir())  # a restart: empty
