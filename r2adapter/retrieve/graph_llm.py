"""The graph search's LLM steps, through the project's LLM client (r2adapter/llm) with the
prompts of r2adapter/prompts/graph.md:

- `LLMTiers` (graph.tier_source `llm`, CatRAG §3 Stage II): for each of the query's top
  seeds, one call that puts each kept seed → neighbour transition in a tier. A
  neighbour's context is its facts, or, when it has more than `llm_context_facts`
  (CatRAG's τ), the ones closest to the query and how many more (an extractive summary:
  the paper asks an LLM for a summary, which would be one more call per neighbour).
- `FactFilter` (graph.fact_filter `llm`, HippoRAG 2's recognition memory): one call that
  keeps the query's top facts that help; when none survive, the graph search falls back
  to dense (as HippoRAG 2 does).

A query's calls share one budget (`llm_timeout_s`). A call that times out, fails or
answers garbage never fails the query: the tier judge answers that query with the
similarity tiers, the filter keeps every top fact; each such fallback is counted by
reason in `stats()` (what `r2a evaluate retrieval --json` reports per mode).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import numpy as np

from r2adapter.config import GraphParams
from r2adapter.errors import R2AError
from r2adapter.llm.base import LLM, LLMError
from r2adapter.llm.jsonreply import extract_json_object
from r2adapter.llm.prompts import load_prompts
from r2adapter.retrieve.graph_index import GraphIndex

log = logging.getLogger(__name__)

PROMPT = "graph"  # r2adapter/prompts/graph.md
REASONS = ("timeout", "error", "malformed")
MAX_TOKENS_PER_ITEM = 8  # a tier or a number, with its JSON punctuation


def fact_texts(g: GraphIndex) -> list[str]:
    """Each fact's text ("subject relation object", data/schema.py:fact_text), read once
    per index version."""

    def load() -> list[str]:
        from r2adapter.data.schema import fact_text
        from r2adapter.store.graph_store import read_graph_rows

        rows = read_graph_rows(g.version.id)
        return [fact_text(rows.entities[s], r, rows.entities[o]) for s, r, o, _ in rows.facts]

    out: list[str] = g.cached("fact_texts", load)
    return out


def default_llm(what: str) -> LLM:
    from r2adapter.llm import get_llm

    llm = get_llm(default_local=True)
    if llm is None:  # a backend named in R2A_LLM_BACKEND that is not configured
        raise R2AError(f"{what} needs an LLM and none is configured")
    return llm


def load_llm(llm: LLM) -> None:
    """Load a local model now, so that no query's budget is spent loading it."""
    load = getattr(llm, "load", None)
    if callable(load):
        load()


class LLMCalls:
    """One query's calls under one deadline; failures counted by reason."""

    def __init__(self, llm: LLM, params: GraphParams) -> None:
        self.llm = llm
        self.params = params
        self.prompts = load_prompts(PROMPT)
        self._lock = threading.Lock()
        self.counts: dict[str, Any] = {"queries": 0, "calls": 0, "fallbacks": 0}
        self.reasons = dict.fromkeys(REASONS, 0)

    def ask(
        self, stage: str, deadline: float, max_tokens: int, **fields: str
    ) -> tuple[dict[str, Any] | None, str | None]:
        """(the reply's JSON object, None), or (None, the failure's reason)."""
        left = deadline - time.monotonic()
        if left <= 0:
            return None, "timeout"
        with self._lock:
            self.counts["calls"] += 1
        try:
            reply = self.llm.complete(
                self.prompts.messages(stage, **fields),
                max_tokens=max_tokens,
                temperature=0.0,
                timeout=left,
            )
        except LLMError as e:
            timed_out = time.monotonic() >= deadline or "timed out" in str(e)
            log.debug("graph LLM %s call failed: %s", stage, e)
            return None, "timeout" if timed_out else "error"
        except Exception as e:  # a client bug must not take the query down with it
            log.warning("graph LLM %s call failed: %s: %s", stage, type(e).__name__, e)
            return None, "error"
        obj = extract_json_object(reply)
        return (obj, None) if obj is not None else (None, "malformed")

    def fell_back(self, reason: str) -> None:
        with self._lock:
            self.counts["fallbacks"] += 1
            self.reasons[reason] += 1

    def started(self) -> float:
        """Count a query; its deadline."""
        with self._lock:
            self.counts["queries"] += 1
        return time.monotonic() + self.params.llm_timeout_s

    def stats(self, prefix: str) -> dict[str, Any]:
        with self._lock:
            return {
                **{f"{prefix}_{k}": v for k, v in self.counts.items()},
                f"{prefix}_fallback_reasons": dict(self.reasons),
            }


# ---- CatRAG's tier judge ------------------------------------------------------------------


def parse_keep(obj: dict[str, Any], n: int) -> list[int] | None:
    """The kept fact positions (0-based) from {"keep": [numbers]}, or None if malformed."""
    keep = obj.get("keep")
    if not isinstance(keep, list):
        return None
    out: list[int] = []
    for v in keep:
        if isinstance(v, bool) or not isinstance(v, int | str):
            return None
        try:
            i = int(v) - 1
        except ValueError:
            return None
        if 0 <= i < n and i not in out:
            out.append(i)
        elif not 0 <= i < n:
            return None
    return sorted(out)


class FactFilter:
    """graph.fact_filter `llm`: `keep(g, query, top)` → the top facts the LLM keeps."""

    def __init__(self, params: GraphParams, llm: LLM | None = None) -> None:
        self.calls = LLMCalls(llm or default_llm("graph.fact_filter llm"), params)
        self.empty = 0

    def warmup(self, g: GraphIndex) -> None:
        fact_texts(g)
        load_llm(self.calls.llm)

    def keep(self, g: GraphIndex, query: str, top: np.ndarray) -> np.ndarray:
        """The kept facts (possibly none: the caller falls back to dense); every one of
        `top` when the call fails (counted)."""
        if not len(top) or not query:
            return top
        deadline = self.calls.started()
        texts = fact_texts(g)
        lines = "\n".join(f"{i}. {texts[int(f)]}" for i, f in enumerate(top, 1))
        obj, reason = self.calls.ask(
            "facts", deadline, MAX_TOKENS_PER_ITEM * len(top) + 16, question=query, facts=lines
        )
        kept = parse_keep(obj, len(top)) if obj is not None else None
        if kept is None:
            self.calls.fell_back(reason or "malformed")
            return top
        if not kept:
            with self.calls._lock:
                self.empty += 1
        return top[kept]

    def stats(self) -> dict[str, Any]:
        return {**self.calls.stats("fact_filter"), "fact_filter_empty": self.empty}
