"""Baseline routers under the same protocol (R²Adapter §4 routing baselines)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from r2adapter.errors import R2AError
from r2adapter.route.base import Router


class AlwaysDense(Router):
    name = "always_dense"

    def score(
        self, queries: Sequence[str], qvecs: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        return np.ones(len(queries)), np.zeros(len(queries))


class AlwaysGraph(Router):
    name = "always_graph"

    def score(
        self, queries: Sequence[str], qvecs: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(len(queries)), np.ones(len(queries))


class NERRouter(Router):
    """Graph iff spaCy finds at least `min_entities` named entities (HybGRAG's heuristic)."""

    name = "ner"

    def __init__(self, min_entities: int = 2) -> None:
        self.min_entities = min_entities

    def score(
        self, queries: Sequence[str], qvecs: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        from r2adapter.nlp.ner import entities

        graph = np.array([len(e) >= self.min_entities for e in entities(queries)], dtype=float)
        return 1 - graph, graph


class OracleRouter(Router):
    """The labels' preference: an upper bound for any router on labelled queries."""

    name = "oracle"

    def __init__(self, preference: Mapping[str, str]) -> None:
        self.preference = preference

    def score(
        self, queries: Sequence[str], qvecs: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        missing = [q for q in queries if q not in self.preference]
        if missing:
            raise R2AError(f"oracle router: no label for '{missing[0][:60]}'")
        graph = np.array([self.preference[q] == "graph" for q in queries], dtype=float)
        return 1 - graph, graph


LLM_ROUTER_PROMPT = (
    "Decide how a question should be answered from a document collection. Reply with one "
    "word. Reply FACT when a single passage can answer it (one fact about one named thing). "
    "Reply REASONING when it needs several facts chained or compared (for example about an "
    "entity that the question only describes, such as 'the director of film X').\n\n"
    "Question: {query}\nAnswer:"
)


class LLMRouter(Router):
    """Fact vs reasoning classification by an LLM (Han et al., 2025): reasoning → graph."""

    name = "llm"

    def __init__(self, llm: Any = None) -> None:
        from r2adapter.llm import get_llm

        self.llm: Any = llm or get_llm()
        if self.llm is None:
            raise R2AError("LLM-router skipped: no LLM configured (set R2A_LLM_BASE_URL)")

    def score(
        self, queries: Sequence[str], qvecs: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        graph = []
        for q in queries:
            reply = self.llm.complete(
                [{"role": "user", "content": LLM_ROUTER_PROMPT.format(query=q)}], max_tokens=4
            )
            graph.append(float("reason" in reply.lower()))
        g = np.array(graph)
        return 1 - g, g
