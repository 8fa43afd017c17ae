"""What a strategy costs the user (issue 40): the reader's prompt and the LLM calls.

A strategy's cost for a query is its retrieval time (priced by `kway.cost`, as before) plus
the reader: the prompt it is sent (instructions, the question and the k passages, in the
reader's tokenizer: r2adapter/llm/reader_tokens.py) and its answer, plus every LLM call the
strategy makes itself. The profiles that price these (`retrieval`, `tokens`, `gpu`,
`local`) are params.yaml's `cost:` (r2adapter/config.py `CostParams`); the outcome matrix
(kway/labels.py `outcome_matrix`) prices every query × strategy under one of them.

The reader's token counts are not stored in the label files: they are counted again from
the passages' texts in Postgres (a few seconds for a corpus; each passage once, cached per
tokenizer under .cache/ by its content id), so a change of reader needs no relabel.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from r2adapter.config import GraphParams, graph_params, settings

if TYPE_CHECKING:
    from r2adapter.kway.labels import StrategyLabel
    from r2adapter.kway.strategies import Strategy

_MEMO: dict[str, dict[str, int]] = {}  # tokenizer identity → passage id → tokens


def strategy_llm_calls(s: Strategy, g: GraphParams | None = None) -> int:
    """LLM calls a strategy makes itself for one query: HippoRAG 2's fact filter
    (graph.fact_filter llm) on a graph walk, CatRAG's LLM tiers (graph.tier_source llm).
    The +rw strategies rewrite structurally (no LLM); the reader's own call is priced
    apart. `g`: the graph parameters (default: params.yaml's, read on each call)."""
    if not s.graph_side:
        return 0
    g = g or graph_params()
    calls = int(g.fact_filter == "llm")
    if s.mode == "catrag" or "catrag" in s.bases:
        calls += int(g.tier_source == "llm")
    return calls


def _cache_path(identity: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in identity)
    return settings().root / ".cache" / "reader_tokens" / f"{safe}.json"


def _passage_counts(dataset: str, ids: set[str]) -> dict[str, int]:
    """Each passage's tokens as the reader's prompt holds it, for `ids` of `dataset`."""
    from r2adapter.llm.reader import passage_text
    from r2adapter.llm.reader_tokens import passage_token_counts, reader_tokenizer
    from r2adapter.store.db import connection

    identity = Path(reader_tokenizer().name).name
    memo = _MEMO.get(identity)
    path = _cache_path(identity)
    if memo is None:
        memo = {}
        if path.is_file():
            try:
                memo = {str(k): int(v) for k, v in json.loads(path.read_text()).items()}
            except (OSError, ValueError, AttributeError):
                memo = {}  # a damaged cache is only a cache: counted again
        _MEMO[identity] = memo
    todo = sorted(ids - memo.keys())
    if todo:
        with connection() as conn:
            rows = conn.execute(
                "SELECT id, title, text FROM passages WHERE dataset = %s AND id = ANY(%s)",
                (dataset, todo),
            ).fetchall()
        counts = passage_token_counts([passage_text(t, x) for _, t, x in rows])
        memo.update({r[0]: int(c) for r, c in zip(rows, counts, strict=True)})
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(memo))
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old or the new file
    return {i: memo[i] for i in ids if i in memo}


def reader_prices(dataset: str, labels: Sequence[StrategyLabel]) -> None:
    """Give every label the reader's token counts: the prompt's own tokens (instructions
    and question) and each ranked passage's."""
    from r2adapter.llm.reader_tokens import prompt_overhead_tokens

    ids = {pid for lab in labels for ranking in lab.rankings.values() for pid in ranking}
    counts = _passage_counts(dataset, ids)
    for lab in labels:
        lab.overhead_tokens = prompt_overhead_tokens(lab.question)
        lab.reader_tokens = {p: counts.get(p, 0) for r in lab.rankings.values() for p in r}


def price(profile: str | None, ms: Any, prompt_tokens: Any, llm_calls: Any) -> Any:
    """What queries cost under `profile` (default params.yaml cost.profile), from their
    retrieval ms, the reader's prompt tokens and the strategies' own LLM calls (floats or
    arrays of one shape): each call one more prompt and answer, the answer `answer_tokens`."""
    from r2adapter.config import cost_params

    cp = cost_params()
    prompt = prompt_tokens + llm_calls * cp.llm_call_prompt_tokens
    answer = cp.answer_tokens + llm_calls * cp.llm_call_answer_tokens
    return cp.priced(profile).price(ms, prompt, answer)
