"""One retrieval strategy's outcome on one query, the record every family's labels hold
(the k-way strategy labels, r2adapter/kway/labels.py; ADR's operator labels,
r2adapter/adr/labels.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    """One strategy on one query: `tokens` its passages' tokens in the retrieval encoder's
    tokenizer (context size), `prompt_tokens` the whole prompt the reader is sent in the
    reader's tokenizer (r2adapter/kway/costs.py), `llm_calls` the calls the strategy makes
    itself."""

    passages: list[str]
    recall: float
    full: float
    tokens: int
    ms: float
    prompt_tokens: int = 0
    llm_calls: int = 0
