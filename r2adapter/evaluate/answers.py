"""Answers (`r2a evaluate answers`, issue 40 item 3): a reader answers each query from each
row's passages, scored by HotpotQA's exact match and token F1 (data/metrics.py).

A row is a name and, per query id, the passage ids it hands the reader, best first: a fixed
strategy of the k-way table (r2adapter/kway/answers.py reads them from the strategy labels)
or a router's per-query choice. For each query and row: the reader's prompt
(r2adapter/llm/reader.py) over those passages, its token count in the reader's tokenizer
(r2adapter/llm/reader_tokens.py), the reader's answer and its milliseconds, EM and F1 against
the gold answer and its aliases, and the reader-free measures beside them: answer-in-context
(the full chain among the passages and a gold answer in their text, as the retrieval report
counts it) and answer-in-passages (the answer in their text alone).

The report gives each row's means, its figures per query type, and its paired difference
from the best fixed strategy (by F1) with a 95% paired bootstrap interval
(r2adapter/evaluate/stats.py). Answers are cached per reader identity and prompt under
`.cache/answers/`, so a rerun asks the reader only what it has not answered; a run that stops
(the reader down or timing out) writes no report, and its finished answers stay in the cache.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from r2adapter.config import settings
from r2adapter.data.metrics import answer_in_context, answer_in_text, answer_scores
from r2adapter.data.schema import Passage, Query
from r2adapter.errors import R2AError
from r2adapter.evaluate.stats import paired_bootstrap
from r2adapter.llm.base import LLM
from r2adapter.llm.reader import ANSWER_PROMPT, answer_prompt, format_passages, passage_text
from r2adapter.llm.reader import passages_sent as n_sent

MAX_TOKENS = 32  # an answer is a few words; a small reader restates the question first
CACHE_FORMAT = 1
PAIRED = ("em", "f1", "contains")  # each paired against the best fixed strategy

Rows = Mapping[str, Mapping[str, Sequence[str]]]  # row name → query id → passage ids


class Reader:
    """An LLM as the reader: greedy, short answers, each cached by (identity, prompt)."""

    def __init__(
        self,
        llm: LLM,
        *,
        max_tokens: int = MAX_TOKENS,
        timeout: float | None = None,
        cache: bool = True,
    ):
        self.llm = llm
        self.max_tokens = max_tokens
        self.timeout = timeout
        self._lock = threading.Lock()
        self._cache: dict[str, dict[str, Any]] = {}
        self._path: Path | None = None
        if cache:
            key = json.dumps(self._answer_identity(), sort_keys=True)
            digest = hashlib.sha1(key.encode()).hexdigest()[:16]
            self._path = settings().root / ".cache" / "answers" / f"{digest}.jsonl"
            self._cache = _read_cache(self._path)

    def _answer_identity(self) -> dict[str, Any]:
        """What an answer depends on besides the prompt."""
        return {
            "format": CACHE_FORMAT,
            "llm": self.llm.identity,
            "max_tokens": self.max_tokens,
            "temperature": 0.0,
        }

    @property
    def identity(self) -> dict[str, Any]:
        """The reader as the report names it (its tokenizer: reader_tokens)."""
        from r2adapter.llm.reader_tokens import reader_tokenizer

        return {
            **self._answer_identity(),
            "prompt": hashlib.sha1(ANSWER_PROMPT.encode()).hexdigest()[:12],
            "tokenizer": reader_tokenizer().name,
        }

    def answer(self, message: str) -> tuple[str, float, bool]:
        """(answer, reader ms, from the cache): the first line of the reply."""
        key = hashlib.sha1(message.encode()).hexdigest()
        hit = self._cache.get(key)
        if hit is not None:
            return str(hit["answer"]), float(hit["ms"]), True
        t0 = time.perf_counter()
        reply = self.llm.complete(
            [{"role": "user", "content": message}],
            max_tokens=self.max_tokens,
            temperature=0.0,
            timeout=self.timeout,
        )
        ms = round((time.perf_counter() - t0) * 1000, 3)
        text = first_line(reply)
        entry = {"key": key, "answer": text, "ms": ms}
        with self._lock:
            self._cache[key] = entry
            if self._path is not None:
                self._path.parent.mkdir(parents=True, exist_ok=True)
                with self._path.open("a") as f:
                    f.write(json.dumps(entry) + "\n")
        return text, ms, False

    @property
    def cached(self) -> int:
        return len(self._cache)


def _read_cache(path: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by a stopped run
            continue
        if isinstance(entry, dict) and {"key", "answer", "ms"} <= entry.keys():
            out[entry["key"]] = entry
    return out


def first_line(reply: str) -> str:
    """The reader's answer: the first non-empty line of its reply, an "Answer:" dropped."""
    for line in reply.strip().splitlines():
        line = line.strip()
        if line:
            return line.removeprefix("Answer:").strip()
    return ""


@dataclass(frozen=True)
class AnswerRow:
    """One query answered from one row's passages."""

    query_id: str
    qtype: str
    row: str
    passages: list[str]  # handed to the prompt builder
    sent: int  # of them, the passages the context holds (MAX_CONTEXT_CHARS)
    prompt_tokens: int
    answer: str
    em: float
    f1: float
    contains: float  # the gold answer (or an alias) inside the answer
    reader_ms: float
    answer_in_context: float
    answer_in_passages: float
    cached: bool


def sample(queries: Sequence[Query], limit: int | None) -> list[Query]:
    """The queries with gold answers; with `limit`, the `limit` whose ids hash lowest: a
    stable sample across query types (a larger limit keeps a smaller one's queries)."""
    have = [q for q in queries if q.answers]
    if limit is None:
        return have
    if limit < 1:
        raise R2AError(f"--limit must be at least 1, not {limit}")
    key = {q.id: hashlib.sha1(q.id.encode()).hexdigest() for q in have}
    return sorted(have, key=lambda q: key[q.id])[:limit]


def answer_rows(
    queries: Sequence[Query],
    rows: Rows,
    passages: Mapping[str, Passage],
    reader: Reader,
    *,
    count_tokens: Any = None,
    workers: int = 1,
    progress: bool = True,
) -> list[AnswerRow]:
    """Every query answered from every row's passages, in (query, row) order.
    `count_tokens(question, texts) -> int`: the prompt's tokens (reader_tokens.prompt_tokens)."""
    if count_tokens is None:
        from r2adapter.llm.reader_tokens import prompt_tokens

        count_tokens = prompt_tokens
    tasks = [(q, name) for q in queries for name in rows]

    def one(task: tuple[Query, str]) -> AnswerRow:
        q, name = task
        ids = list(rows[name][q.id])
        texts = [passage_text(passages[p].title, passages[p].text) for p in ids]
        context = format_passages(texts)
        answer, ms, cached = reader.answer(answer_prompt(q.question, context))
        em, f1, contains = answer_scores(answer, q.answers)
        sent = n_sent(texts) if texts else 0
        plain = "\n".join(texts[:sent])
        return AnswerRow(
            q.id,
            q.type,
            name,
            ids,
            sent,
            int(count_tokens(q.question, texts)),
            answer,
            em,
            f1,
            contains,
            ms,
            answer_in_context(plain, q.answers, ids[:sent], q.gold_passage_ids, max(sent, 1)),
            answer_in_text(plain, q.answers) if sent else 0.0,
            cached,
        )

    out: list[AnswerRow] = []
    bar = tqdm(total=len(tasks), desc="answers", unit="answer", disable=not progress)
    try:
        if workers <= 1:
            for t in tasks:
                out.append(one(t))
                bar.update(1)
        else:
            with ThreadPoolExecutor(workers) as pool:
                for r in pool.map(one, tasks):
                    out.append(r)
                    bar.update(1)
    finally:
        bar.close()
    return out


def _means(rs: Sequence[AnswerRow]) -> dict[str, float]:
    return {
        "em": float(np.mean([r.em for r in rs])),
        "f1": float(np.mean([r.f1 for r in rs])),
        "contains": float(np.mean([r.contains for r in rs])),
        "n": len(rs),
    }


def summarise(
    dataset: str, rows: Sequence[AnswerRow], fixed: Sequence[str], reader: dict[str, Any]
) -> dict[str, Any]:
    """The report: each row's means, per query type, and paired against the best fixed
    strategy by F1 (`fixed`: the rows that are fixed strategies, not routers)."""
    names = list(dict.fromkeys(r.row for r in rows))
    by_row = {n: [r for r in rows if r.row == n] for n in names}
    if not names or not by_row[names[0]]:
        raise R2AError(f"no queries of {dataset} to answer")
    candidates = [n for n in names if n in fixed] or names
    best = max(candidates, key=lambda n: (np.mean([r.f1 for r in by_row[n]]), -names.index(n)))
    ref = {k: np.array([getattr(r, k) for r in by_row[best]]) for k in PAIRED}
    out: dict[str, Any] = {}
    for n in names:
        rs = by_row[n]
        if [r.query_id for r in rs] != [r.query_id for r in by_row[best]]:
            raise R2AError(f"row {n} did not answer the same queries as {best}")
        paired = {k: paired_bootstrap([getattr(r, k) for r in rs], ref[k]) for k in PAIRED}
        types = sorted({r.qtype for r in rs})
        out[n] = {
            **{k: v for k, v in _means(rs).items() if k != "n"},
            "prompt_tokens": float(np.mean([r.prompt_tokens for r in rs])),
            "passages": float(np.mean([r.sent for r in rs])),
            "reader_ms": float(np.mean([r.reader_ms for r in rs])),
            "answer_in_context": float(np.mean([r.answer_in_context for r in rs])),
            "answer_in_passages": float(np.mean([r.answer_in_passages for r in rs])),
            "by_type": {t: _means([r for r in rs if r.qtype == t]) for t in types},
            "paired_best": {
                "best": best,
                **{f"{k}_diff": v["diff"] for k, v in paired.items()},
                **{f"{k}_ci95": v["ci95"] for k, v in paired.items()},
            },
        }
    return {
        "dataset": dataset,
        "reader": reader,
        "n_queries": len(by_row[best]),
        "strategies": out,
        "fixed": [n for n in names if n in fixed],
        "best_fixed": best,
        "answers_cached": sum(r.cached for r in rows),
        "complete": True,
    }


def report_paths(dataset: str) -> tuple[Path, Path]:
    """reports/answers/<dataset>.json and the per-query rows beside it (.jsonl)."""
    folder = settings().root / "reports" / "answers"
    return folder / f"{dataset}.json", folder / f"{dataset}.jsonl"


def save(dataset: str, report: dict[str, Any], rows: Sequence[AnswerRow]) -> dict[str, str]:
    """The rows, then the report, each written atomically (a temporary file, a rename)."""
    report_path, rows_path = report_paths(dataset)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    for path, body in (
        (rows_path, "".join(json.dumps(asdict(r), sort_keys=True) + "\n" for r in rows)),
        (report_path, json.dumps(report, indent=1, sort_keys=True) + "\n"),
    ):
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(body)
        tmp.replace(path)
    return {"report": str(report_path), "rows": str(rows_path)}


def evaluate_answers(
    dataset: str,
    queries: Sequence[Query],
    rows: Rows,
    fixed: Sequence[str],
    reader: Reader,
    *,
    workers: int = 1,
    progress: bool = True,
    save_report: bool = True,
) -> dict[str, Any]:
    """Answer `queries` from every row, summarise, save. Every query must have passages in
    every row (a router row included); the passages must be in the store."""
    from r2adapter.store.graph_store import passages_by_id

    for name, per_query in rows.items():
        missing = [q.id for q in queries if q.id not in per_query]
        if missing:
            raise R2AError(
                f"row {name} has no passages for {len(missing)} of {len(queries)} queries "
                f"(e.g. {missing[0]})"
            )
    ids = sorted({p for per_query in rows.values() for q in queries for p in per_query[q.id]})
    passages = passages_by_id(dataset, ids)
    absent = [p for p in ids if p not in passages]
    if absent:
        raise R2AError(
            f"{len(absent)} passages the rows hand the reader are not in {dataset}'s store "
            f"(e.g. {absent[0]}): re-run `r2a index --dataset {dataset}` and `r2a label`"
        )
    got = answer_rows(queries, rows, passages, reader, workers=workers, progress=progress)
    report = summarise(dataset, got, fixed, reader.identity)
    if save_report:
        report["saved"] = save(dataset, report, got)
    return report
