"""The routing decision, in one place (R²Adapter eq. 4 and eq. 7).

graph iff p_graph − p_dense > τ; rewrite iff routed to graph and p_graph < ε. Every caller
(the router protocol, the threshold search, the adapter, the service, the MLflow model and
the evaluation) asks `decide`; a router that decides differently changes it here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from r2adapter.config import RouterParams

EPSILON = RouterParams.epsilon  # the one ε default (config.py): rewrite below this p_graph


@dataclass(frozen=True, eq=False)
class Decision:
    """Decisions for a batch of queries, aligned with it."""

    p_dense: np.ndarray  # suitability of dense retrieval, in [0, 1]
    p_graph: np.ndarray  # suitability of graph retrieval, in [0, 1]
    graph: np.ndarray  # bool: sent to graph retrieval (eq. 4)
    rewrite: np.ndarray  # bool: sent to graph with low confidence, so rewritten (eq. 7)
    tau: float
    epsilon: float
    qvecs: np.ndarray | None = None  # the query embeddings the router read, if any

    def __len__(self) -> int:
        return len(self.graph)

    def label(self, i: int) -> str:
        """ "graph" or "dense" for query i."""
        return "graph" if self.graph[i] else "dense"


def decide(
    p_dense: np.ndarray,
    p_graph: np.ndarray,
    tau: float,
    epsilon: float = EPSILON,
    qvecs: np.ndarray | None = None,
) -> Decision:
    """Graph iff p_graph − p_dense > τ (eq. 4); rewrite iff graph and p_graph < ε (eq. 7)."""
    # the scores' own dtype: τ* was searched on float32 validation scores, so is compared so
    p_d, p_g = np.asarray(p_dense), np.asarray(p_graph)
    graph = (p_g - p_d) > tau
    return Decision(
        p_d, p_g, graph, rewrite_mask(graph, p_g, epsilon), float(tau), float(epsilon), qvecs
    )


def rewrite_mask(graph: np.ndarray, p_graph: np.ndarray, epsilon: float = EPSILON) -> np.ndarray:
    """Eq. 7 alone: rewrite what was sent to graph retrieval with p_graph < ε (ε ≥ 1: all of
    it, a saturated p_graph of exactly 1.0 included)."""
    g = np.asarray(graph, dtype=bool)
    return g.copy() if epsilon >= 1.0 else g & (np.asarray(p_graph) < epsilon)
