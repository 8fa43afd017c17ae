"""The Router protocol: `score(queries, qvecs=None) -> (p_dense, p_graph)`, and `decide`, the
one routing decision (r2adapter/route/decision.py) every caller asks."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

import numpy as np

from r2adapter.route.decision import EPSILON, Decision, decide

Encode = Callable[[list[str]], np.ndarray]  # the retrieval encoder: queries → embeddings


class Router(ABC):
    name: str = ""
    tau: float = 0.0  # graph iff p_graph − p_dense > τ
    epsilon: float = EPSILON  # rewrite a graph-bound query with p_graph < ε

    @property
    def uses_embedding(self) -> bool:
        """Whether `score` reads the queries' retrieval embeddings (`qvecs`): callers that
        compute them anyway pass them; others pay for them only when a router reads them."""
        return False

    @abstractmethod
    def score(
        self, queries: Sequence[str], qvecs: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Suitability of dense and graph retrieval for each query, in [0, 1]. `qvecs`, the
        queries' retrieval embeddings, are read by routers that use them, ignored by others."""

    def decide(
        self,
        queries: Sequence[str],
        qvecs: np.ndarray | None = None,
        encode: Encode | None = None,
    ) -> Decision:
        """Score and decide (R²Adapter eqs. 4, 7). Without `qvecs`, a router that reads them
        gets them from `encode` (the caller's retrieval encoder), and the decision carries
        them for the caller to reuse."""
        if qvecs is None and encode is not None and self.uses_embedding and len(queries):
            qvecs = encode(list(queries))
        p_dense, p_graph = self.score(queries, qvecs)
        return decide(p_dense, p_graph, self.tau, self.epsilon, qvecs)

    def route(self, queries: Sequence[str], qvecs: np.ndarray | None = None) -> np.ndarray:
        """True where the query goes to graph retrieval (R²Adapter eq. 4)."""
        return self.decide(queries, qvecs).graph
