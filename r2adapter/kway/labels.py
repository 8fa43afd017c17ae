"""Labels per strategy (`r2a label` writes `labels/<dataset>.strategies.jsonl`).

For every stored query with complete gold: each base retriever's ranking to `kway.depth`
(one pass each: every `@k` strategy is a prefix) and its milliseconds, the query embedding's
milliseconds, and each delivered passage's token count. The strategies' figures (passages,
recall of the gold, full chain, tokens, ms, and suitability: reaching the best recall any
strategy of the table reaches for that query) are derived from those, so a strategy added
to params.yaml over a retriever already labelled needs no new retrieval; one over a new
retriever asks for a relabel.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from r2adapter.config import KwayParams, graph_params, kway_params, label_params, settings
from r2adapter.data.metrics import full_chain, recall_at_k
from r2adapter.errors import R2AError
from r2adapter.kway.costs import price, reader_prices, strategy_llm_calls
from r2adapter.kway.strategies import (
    Strategy,
    base_retrievers,
    delivered,
    split_rewritten,
    strategy_ms,
    strategy_table,
)
from r2adapter.label.jsonl import read_label_lines, write_label_lines
from r2adapter.label.outcome import Outcome
from r2adapter.store.cpu_time import CpuMeter
from r2adapter.threads import thread_limit

FORMAT = 1  # bumped when a record's fields change: an older file asks for a relabel


@dataclass
class StrategyLabel:
    """One query: the base rankings and costs, and each strategy's outcome."""

    query_id: str
    question: str
    qtype: str
    split: str
    gold: list[str]
    rankings: dict[str, list[str]]
    ms: dict[str, float]  # "embed" and each base retriever, timed once for this query
    tokens: dict[str, int]  # passage id → tokens, for every ranked passage
    # the same steps' CPU milliseconds, this process's plus the database backend's
    # (r2adapter/store/cpu_time.py); empty in a file from before they were recorded
    cpu_ms: dict[str, float] = field(default_factory=dict)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    suitable: list[str] = field(default_factory=list)
    # kway.cost calibrated: "embed" and each base retriever's calibrated ms (the same for
    # every query of the file); empty: the strategies cost their measured `ms`
    cost_ms: dict[str, float] = field(default_factory=dict)
    # kway.cost cpu_median: each step's median CPU ms over the file (`median_cpu_prices`),
    # the same for every query; not stored (the file's cpu_ms give it again)
    median_cpu_ms: dict[str, float] = field(default_factory=dict)
    # the reader's prompt (r2adapter/kway/costs.py `reader_prices`): the tokens of the
    # instructions and the question, and each ranked passage's; not stored (the passages'
    # texts in Postgres give them again, in whatever reader's tokenizer is configured)
    overhead_tokens: int = 0
    reader_tokens: dict[str, int] = field(default_factory=dict)

    def prices(self, cost: str) -> dict[str, float]:
        """Each step's ms as `kway.cost` prices it: wall (`measured`), CPU (`cpu`), the
        calibration pass's (`calibrated`) or the file's median CPU ms (`cpu_median`)."""
        return {
            "measured": self.ms,
            "cpu": self.cpu_ms,
            "calibrated": self.cost_ms,
            "cpu_median": self.median_cpu_ms,
        }[cost]

    def to_json(self, table: Sequence[Strategy]) -> dict[str, Any]:
        calibrated = {"cost_ms": self.cost_ms} if self.cost_ms else {}
        return {
            "format": FORMAT,
            "query_id": self.query_id,
            "question": self.question,
            "qtype": self.qtype,
            "split": self.split,
            "gold": self.gold,
            "rankings": self.rankings,
            "ms": self.ms,
            **({"cpu_ms": self.cpu_ms} if self.cpu_ms else {}),
            "tokens": self.tokens,
            "strategies": {
                s.name: {
                    "passages": o.passages,
                    "recall": o.recall,
                    "full": o.full,
                    "tokens": o.tokens,
                    "ms": o.ms,
                }
                for s in table
                for o in [self.outcomes[s.name]]
            },
            "suitable": self.suitable,
            **calibrated,
        }


def median_cpu_prices(labels: Sequence[StrategyLabel]) -> None:
    """kway.cost cpu_median: give every label each step's median CPU ms over `labels` (one
    corpus's file). A query's own CPU ms still vary by a few per cent from run to run, and
    the threshold search moves on that; the median over hundreds of queries does not."""
    keys = sorted({k for lab in labels for k in lab.cpu_ms})
    med = {
        k: round(float(np.median([lab.cpu_ms[k] for lab in labels if k in lab.cpu_ms])), 3)
        for k in keys
    }
    for lab in labels:
        lab.median_cpu_ms = med


def table_llm_calls(table: Sequence[Strategy]) -> dict[str, int]:
    """Each strategy's own LLM calls per query under today's graph parameters (read once:
    a label file's thousands of queries would otherwise parse params.yaml per strategy)."""
    g = graph_params()
    return {s.name: strategy_llm_calls(s, g) for s in table}


def evaluate_outcomes(
    lab: StrategyLabel,
    table: Sequence[Strategy],
    rrf_k: int,
    cost: str = "measured",
    llm_calls: Mapping[str, int] | None = None,
) -> None:
    """Fill each strategy's outcome (its ms priced by `cost`, `kway.cost`) and the suitable
    set (best recall reached, ties all). `llm_calls`: each strategy's own LLM calls
    (`table_llm_calls`; computed here when not given)."""
    calls = table_llm_calls(table) if llm_calls is None else llm_calls
    for s in table:
        missing = [b for b in s.bases if b not in lab.rankings]
        if missing:
            raise R2AError(
                f"the strategy labels have no {', '.join(missing)} rankings (needed by {s.name}):"
                " relabel with `r2a label`"
            )
        got = delivered(s, lab.rankings, rrf_k)
        lab.outcomes[s.name] = Outcome(
            got,
            recall_at_k(got, lab.gold, s.k),
            full_chain(got, lab.gold, s.k),
            int(sum(lab.tokens.get(p, 0) for p in got)),
            strategy_ms(s, lab.prices(cost)),
            lab.overhead_tokens + int(sum(lab.reader_tokens.get(p, 0) for p in got)),
            calls[s.name],
        )
    best = max(o.recall for o in lab.outcomes.values())
    lab.suitable = [s.name for s in table if lab.outcomes[s.name].recall >= best - 1e-9]


def passage_tokens(dataset: str) -> dict[str, int]:
    """Tokens of each passage as a reader gets it (title, newline, text), in the retrieval
    encoder's tokenizer (MiniLM's WordPiece by default), untruncated."""
    from r2adapter.index.encoder import get_encoder
    from r2adapter.store.db import connection

    with connection() as conn:
        rows = conn.execute(
            "SELECT id, title, text FROM passages WHERE dataset = %s ORDER BY id", (dataset,)
        ).fetchall()
    tok = get_encoder().model.tokenizer
    texts = [f"{t}\n{x}" for _, t, x in rows]
    counts = tok(texts, add_special_tokens=False, truncation=False)["input_ids"]
    return {r[0]: len(c) for r, c in zip(rows, counts, strict=True)}


def rank_strategies(
    dataset: str, p: KwayParams | None = None, limit: int | None = None
) -> list[StrategyLabel]:
    """Every base retriever of the table run once per query (to `p.depth`), timed, as a
    service worker would run it: one query at a time, on one thread, on the query
    embedding computed first (`limit`: the first that many queries only, for a quick
    look)."""
    from r2adapter.evaluate.retrieval import stored_queries
    from r2adapter.store.graph_store import require_version

    p = p or kway_params()
    require_version(dataset)
    queries = stored_queries(dataset, complete_only=True)[:limit]
    if not queries:
        raise R2AError(f"dataset '{dataset}' has no queries with complete gold to label")
    with thread_limit(1):  # as one serving worker runs, and CPU times that hold under load
        out = _rank(dataset, queries, p)
    if p.cost == "cpu_median":
        median_cpu_prices(out)
    table = strategy_table(p.strategies)
    calls = table_llm_calls(table)
    for lab in out:
        evaluate_outcomes(lab, table, p.rrf_k, p.cost, calls)
    return out


def _rank(dataset: str, queries: Sequence[Any], p: KwayParams) -> list[StrategyLabel]:
    """`rank_strategies`' timed pass (and the calibration pass, under kway.cost calibrated);
    the outcomes are left to the caller."""
    from r2adapter.data.splits import split_of
    from r2adapter.index.encoder import get_encoder
    from r2adapter.retrieve.strategies import make_retriever

    table = strategy_table(p.strategies)
    enc = get_encoder()
    bases = base_retrievers(table)
    retrievers = {r: make_retriever(split_rewritten(r)[0], dataset, enc) for r in bases}
    rewriter = None
    if any(split_rewritten(r)[1] for r in bases):
        from r2adapter.rewrite import Rewriter

        rewriter = Rewriter(backend="structural")
        rewriter.warmup()  # the parser's load is not a query's cost
    tokens = passage_tokens(dataset)
    lp = label_params()
    enc.encode([queries[0].question])  # warm-up: lazy loads are not a query's cost
    for r in retrievers.values():
        r.retrieve(queries[0].question, p.depth)
    known = labelled_elsewhere(dataset, bases, min(p.depth, len(tokens)))
    out = []
    reused = 0
    for q in tqdm(queries, desc="label: strategies", unit="query"):
        again = known.get((q.id, q.question))
        if again is not None:  # the same question over the same passages: its label
            ms, rankings, cpu = again
            reused += 1
        else:
            ms, rankings, cpu = _time_query(q.question, enc, retrievers, rewriter, p.depth)
        ranked = {pid for ids in rankings.values() for pid in ids}
        lab = StrategyLabel(
            q.id,
            q.question,
            q.type,
            split_of(q.id, lp.split),
            list(q.gold_passage_ids),
            rankings,
            ms,
            {pid: tokens.get(pid, 0) for pid in sorted(ranked)},
            cpu,
        )
        out.append(lab)
    if reused:
        print(
            f"label: strategies: {reused} of {len(queries)} queries taken from a label file "
            "of a query set over the same passages (labelled_elsewhere)"
        )
    if p.cost == "calibrated":
        cost = calibrate_costs([q.question for q in queries], enc, retrievers, p)
        for lab in out:
            lab.cost_ms = cost
    return out


def labelled_elsewhere(
    dataset: str, bases: Sequence[str], depth: int
) -> dict[tuple[str, str], tuple[dict[str, float], dict[str, list[str]], dict[str, float]]]:
    """(query id, question) → (ms, rankings, CPU ms) from the strategy label files of the
    other datasets over the same passages (`graph_store.corpus_key`: 2wiki_mixed holds
    2Wiki's 1,000 questions), where they rank every base retriever of today's table to
    today's depth (`depth`: or the whole corpus, when smaller): a question asked again
    over the same index is not ranked again."""
    from r2adapter.data.adapters import SHIPPED_DATASETS
    from r2adapter.store.graph_store import corpus_key

    mine = corpus_key(dataset)
    if mine is None:
        return {}
    out: dict[tuple[str, str], tuple[dict[str, float], dict[str, list[str]], dict[str, float]]] = {}
    for other in SHIPPED_DATASETS:
        path = strategy_label_path(other)
        if other == dataset or not path.is_file() or corpus_key(other) != mine:
            continue
        try:
            rows = read_label_lines(path, FORMAT, "strategy labels", "a strategy label", "")
        except R2AError:
            continue  # an older or damaged file: ranked again
        for _, raw in rows:
            rk = raw.get("rankings", {})
            if "cpu_ms" not in raw or any(len(rk.get(b, [])) < depth for b in bases):
                continue
            out[(str(raw["query_id"]), str(raw["question"]))] = (
                {k: float(v) for k, v in raw["ms"].items()},
                {b: list(rk[b][:depth]) for b in bases},
                {k: float(v) for k, v in raw["cpu_ms"].items()},
            )
    return out


def _time_query(
    question: str, enc: Any, retrievers: dict[str, Any], rewriter: Any, depth: int,
    order: Sequence[str] | None = None,
) -> tuple[dict[str, float], dict[str, list[str]], dict[str, float]]:  # fmt: skip
    """One query as a service runs it: its embedding, then each base retriever (`order`,
    default the table's) on it, each timed on the wall clock and in CPU time (this
    process's and the database backend's); (wall ms, rankings, CPU ms)."""
    with CpuMeter() as m:
        t = time.perf_counter()
        v = enc.encode([question])[0]
        ms = {"embed": (time.perf_counter() - t) * 1000}
    cpu = {"embed": m.ms}
    rankings = {}
    for name in order or list(retrievers):
        with CpuMeter() as m:
            t = time.perf_counter()
            rankings[name] = _retrieve(name, question, v, retrievers, rewriter, depth)
            ms[name] = (time.perf_counter() - t) * 1000
        cpu[name] = m.ms
    return ms, rankings, {k: round(v, 3) for k, v in cpu.items()}


def _retrieve(
    name: str, question: str, v: np.ndarray, retrievers: dict[str, Any], rewriter: Any,
    depth: int,
) -> list[str]:  # fmt: skip
    """One base retriever's ranking, as the adapter serves it: a rewriting one rewrites, then
    retrieves q′ on q's embedding (its triplets seed the walk)."""
    text = question
    if split_rewritten(name)[1] and rewriter is not None:
        res = rewriter.rewrite(question)
        if res.rewritten_ok:
            text = res.rewritten
    return [h.passage_id for h in retrievers[name].retrieve(text, depth, qvec=v)]


def calibrate_costs(
    questions: Sequence[str], enc: Any, retrievers: dict[str, Any], p: KwayParams
) -> dict[str, float]:
    """Each base retriever's (and the embedding's) calibrated ms: `p.calibration_queries`
    questions spread evenly over `questions`, each timed `p.calibration_repeats` times with
    the retrievers in a rotating order (so none always runs first, or right after another);
    per question the minimum of its repeats (the run least disturbed by whatever else the
    machine did), then the median over the questions. A rewriting retriever rewrites
    without a cache, so every repeat pays for its rewrite."""
    rewriter = None
    if any(split_rewritten(r)[1] for r in retrievers):
        from r2adapter.rewrite import Rewriter

        rewriter = Rewriter(backend="structural", cache_size=0)
        rewriter.warmup()
    n = min(p.calibration_queries, len(questions))
    picked = [questions[int(i)] for i in np.linspace(0, len(questions) - 1, n)]
    names = list(retrievers)
    best: dict[str, np.ndarray] = {k: np.full(n, np.inf) for k in ["embed", *names]}
    bar = tqdm(total=n * p.calibration_repeats, desc="label: cost calibration", unit="query")
    with bar:
        for rep in range(p.calibration_repeats):
            for i, question in enumerate(picked):
                shift = (rep + i) % len(names)
                order = names[shift:] + names[:shift]
                ms, _, _ = _time_query(question, enc, retrievers, rewriter, p.depth, order)
                for k, v in ms.items():
                    best[k][i] = min(best[k][i], v)
                bar.update(1)
    return {k: round(float(np.median(v)), 3) for k, v in best.items()}


def strategy_label_path(dataset: str) -> Path:
    return settings().root / "labels" / f"{dataset}.strategies.jsonl"


def export_strategy_labels(
    path: Path, labels: Sequence[StrategyLabel], table: Sequence[Strategy]
) -> str:
    """JSON lines, written atomically; returns the file's md5."""
    return write_label_lines(path, (lab.to_json(table) for lab in labels))


def read_strategy_labels(
    dataset: str,
    p: KwayParams | None = None,
    path: Path | None = None,
    reader: bool | None = None,
) -> list[StrategyLabel]:
    """The labels with every strategy of today's table evaluated (a strategy over a retriever
    the file does not rank, or a file from before the table: a one-line relabel request);
    `reader` (default: for the dataset's own file, not for one read from `path`): each
    strategy's reader prompt counted too, from the passages' texts in Postgres
    (kway/costs.py), so that `outcome_matrix` prices the reader."""
    reader = path is None if reader is None else reader
    p = p or kway_params()
    table = strategy_table(p.strategies)
    path = path or strategy_label_path(dataset)
    relabel = f"run `r2a label --dataset {dataset}`"
    out = []
    one = "a strategy label (a file from before the strategy table?)"
    for _, raw in read_label_lines(path, FORMAT, "strategy labels", one, relabel, ["rankings"]):
        lab = StrategyLabel(
            raw["query_id"],
            raw["question"],
            raw["qtype"],
            raw["split"],
            list(raw["gold"]),
            {k: list(v) for k, v in raw["rankings"].items()},
            {k: float(v) for k, v in raw["ms"].items()},
            {k: int(v) for k, v in raw["tokens"].items()},
        )
        if p.cost == "calibrated":
            if "cost_ms" not in raw:
                raise R2AError(
                    f"{path}: strategy labels without calibrated costs (kway.cost: calibrated"
                    f" in params.yaml): {relabel}"
                )
            lab.cost_ms = {k: float(v) for k, v in raw["cost_ms"].items()}
        lab.cpu_ms = {k: float(v) for k, v in raw.get("cpu_ms", {}).items()}
        if p.cost in ("cpu", "cpu_median") and not lab.cpu_ms:
            raise R2AError(
                f"{path}: strategy labels without CPU times (kway.cost: {p.cost} in"
                f" params.yaml; a file from before they were recorded): {relabel}"
            )
        out.append(lab)
    if p.cost == "cpu_median":
        median_cpu_prices(out)
    if reader:
        reader_prices(dataset, out)
    calls = table_llm_calls(table)
    for lab in out:
        evaluate_outcomes(lab, table, p.rrf_k, p.cost, calls)
    return out


def outcome_matrix(
    labels: Sequence[StrategyLabel], table: Sequence[Strategy], profile: str | None = None
) -> dict[str, np.ndarray]:
    """(n, S) arrays of recall, full chain, passages, tokens, ms, the reader's prompt
    tokens, LLM calls, `cost` (what the query costs under the cost profile `profile`,
    default params.yaml cost.profile: r2adapter/kway/costs.py) and suitable (bool); and
    `ms_price` (n,): what one ms of routing costs in that profile, per query."""
    from r2adapter.config import cost_params

    names = [s.name for s in table]

    def grid(attr: str) -> np.ndarray:
        return np.array(
            [[getattr(lab.outcomes[n], attr) for n in names] for lab in labels], dtype=np.float64
        )

    prof = cost_params().priced(profile)
    ms, prompt, calls = grid("ms"), grid("prompt_tokens"), grid("llm_calls")
    return {
        "recall": grid("recall"),
        "full": grid("full"),
        "tokens": grid("tokens"),
        "ms": ms,
        "prompt_tokens": prompt,
        "llm_calls": calls,
        "cost": price(prof.name, ms, prompt, calls),
        "ms_price": np.full(len(labels), float(prof.per_ms)),
        "passages": np.array([[len(lab.outcomes[n].passages) for n in names] for lab in labels]),
        "suitable": np.array([[n in lab.suitable for n in names] for lab in labels], dtype=bool),
    }


def summary(labels: Sequence[StrategyLabel], table: Sequence[Strategy]) -> dict[str, Any]:
    """Per strategy: mean recall, FCR, tokens, ms and share of queries it suits; the oracle."""
    m = outcome_matrix(labels, table)
    per = {
        s.name: {
            "recall": float(m["recall"][:, j].mean()),
            "fcr": float(m["full"][:, j].mean()),
            "mean_tokens": float(m["tokens"][:, j].mean()),
            "mean_ms": float(m["ms"][:, j].mean()),
            "suitable": float(m["suitable"][:, j].mean()),
        }
        for j, s in enumerate(table)
    }
    return {"n_queries": len(labels), "strategies": per}


def label_strategies(dataset: str) -> dict[str, object]:
    """The k-way router's labels (`r2a label`, after the two-way ones): each strategy's
    passages, recall, full chain, tokens and ms per query, exported atomically; returns the
    per-strategy summary and the file."""
    p = kway_params()
    table = strategy_table(p.strategies)
    labels = rank_strategies(dataset, p)
    path = strategy_label_path(dataset)
    md5 = export_strategy_labels(path, labels, table)
    return {"path": str(path.relative_to(settings().root)), "md5": md5, **summary(labels, table)}
