"""CatRAG's Stage II judge through the LLM (graph.tier_source `llm`, the paper's): for each
of the query's top seeds, one call that puts each kept seed → neighbour transition in a
tier (prompts in r2adapter/prompts/graph.md). A neighbour's context is its facts, or, when
it has more than `llm_context_facts` (CatRAG's τ), the ones closest to the query and how
many more (an extractive summary: the paper asks an LLM for a summary, which would be one
more call per neighbour). The calls share the query's budget with the fact filter
(graph_llm.py); a timeout, error or garbage reply answers that query with the similarity
tiers, counted by reason in `stats()`."""

from __future__ import annotations

from typing import Any

import numpy as np

from r2adapter.config import GraphParams
from r2adapter.llm.base import LLM
from r2adapter.retrieve.catrag_graph import catrag_maps
from r2adapter.retrieve.catrag_tiers import (
    TIERS,
    TierQuery,
    TierSource,
    Transitions,
    banded,
)
from r2adapter.retrieve.graph_index import GraphIndex
from r2adapter.retrieve.graph_llm import (
    MAX_TOKENS_PER_ITEM,
    LLMCalls,
    default_llm,
    fact_texts,
    load_llm,
)


def neighbour_context(
    g: GraphIndex, facts_of: np.ndarray, fact_scores: np.ndarray | None, tau: int
) -> str:
    """A neighbour's facts, or its τ closest to the query and how many more."""
    texts = fact_texts(g)
    if len(facts_of) > tau:
        order = (
            np.argsort(-fact_scores[facts_of], kind="stable") if fact_scores is not None else None
        )
        shown = facts_of[order[:tau]] if order is not None else facts_of[:tau]
        more = f"; (and {len(facts_of) - tau} more facts)"
    else:
        shown, more = facts_of, ""
    return "; ".join(texts[int(f)] for f in shown) + more


def parse_tiers(obj: dict[str, Any], n: int) -> np.ndarray | None:
    """Tier index per numbered neighbour (−1 where the reply says nothing usable), or None
    when it names no neighbour with a known tier."""
    out = np.full(n, -1, dtype=np.int64)
    for key, value in obj.items():
        try:
            i = int(str(key).strip()) - 1
        except ValueError:
            continue
        name = str(value).strip().lower()
        if 0 <= i < n and name in TIERS:
            out[i] = TIERS.index(name)
    return out if (out >= 0).any() else None


class LLMTiers(TierSource):
    """Stage II by an LLM (the paper's judge); the similarity tiers when it fails."""

    name = "llm"

    def __init__(self, params: GraphParams, llm: LLM | None = None) -> None:
        super().__init__(params)
        self.calls = LLMCalls(llm or default_llm("graph.tier_source llm"), params)

    def warmup(self, g: GraphIndex) -> None:
        fact_texts(g)
        load_llm(self.calls.llm)

    def tiers(self, q: TierQuery, t: Transitions) -> np.ndarray:
        similarity = banded(t.scores, self.params.similarity_bands)
        deadline = self.calls.started()
        maps = catrag_maps(q.g)
        names = q.g.entity_names
        texts = fact_texts(q.g)
        out = similarity.copy()
        for seed in dict.fromkeys(t.seeds.tolist()):
            rows = np.flatnonzero(t.seeds == seed)
            lines = [
                f"{i}. {names[int(t.nbrs[r])]} | via: {texts[int(t.facts[r])]} | context: "
                + neighbour_context(
                    q.g, maps.facts_of(int(t.nbrs[r])), q.fact_scores, self.params.llm_context_facts
                )
                for i, r in enumerate(rows, 1)
            ]
            obj, reason = self.calls.ask(
                "tiers",
                deadline,
                MAX_TOKENS_PER_ITEM * len(rows) + 16,
                question=q.query,
                seed=names[int(seed)],
                neighbours="\n".join(lines),
            )
            judged = parse_tiers(obj, len(rows)) if obj is not None else None
            if judged is None:
                self.calls.fell_back(reason or "malformed")
                return similarity  # the whole query on the similarity tiers
            out[rows] = np.where(judged >= 0, judged, similarity[rows])
        return out

    def stats(self) -> dict[str, Any]:
        return self.calls.stats("tier_llm")


# ---- HippoRAG 2's recognition memory -------------------------------------------------------
