"""Threshold search for the routing decision (R²Adapter eqs. 4–5, Algorithm 2)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from r2adapter.route.decision import decide


def f1_recall(pred: np.ndarray, truth: np.ndarray) -> tuple[float, float, float]:
    """Precision, recall and F1 of the positive (graph) class."""
    tp = float(np.sum(pred & truth))
    fp, fn = float(np.sum(pred & ~truth)), float(np.sum(~pred & truth))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


@dataclass(frozen=True)
class ThresholdSearch:
    taus: np.ndarray
    scores: np.ndarray  # Score(τ) = (F1 + Recall) / 2 of the graph class (eq. 5)
    f1: np.ndarray
    recall: np.ndarray
    usage: np.ndarray  # share of queries sent to graph at each τ
    best_tau: float
    best_score: float
    max_usage: float = 1.0


def search_threshold(
    p_dense: np.ndarray,
    p_graph: np.ndarray,
    graph_preferred: np.ndarray,
    tau_min: float = 0.0,
    tau_max: float = 0.5,
    step: float = 0.02,
    max_usage: float = 1.0,
) -> ThresholdSearch:
    """Algorithm 2's search, optionally under a graph budget: only the τ that send at most
    `max_usage` of the queries to graph compete (if none does, the most frugal τ wins)."""
    if step <= 0:
        raise ValueError("the τ step must be positive")
    truth = np.asarray(graph_preferred, dtype=bool)
    n = int(round((tau_max - tau_min) / step)) + 1
    taus = np.round(tau_min + step * np.arange(n), 10)
    f1s, recalls, usage = np.zeros(n), np.zeros(n), np.zeros(n)
    for i, tau in enumerate(taus):
        pred = decide(p_dense, p_graph, tau).graph
        _, recalls[i], f1s[i] = f1_recall(pred, truth)
        usage[i] = float(np.mean(pred)) if pred.size else 0.0
    scores = (f1s + recalls) / 2
    allowed = usage <= max_usage + 1e-12
    if allowed.any():  # first maximum: the lowest τ among ties (Algorithm 2's >)
        best = int(np.flatnonzero(allowed)[np.argmax(scores[allowed])])
    else:
        best = int(np.argmin(usage))
    return ThresholdSearch(
        taus, scores, f1s, recalls, usage, float(taus[best]), float(scores[best]), max_usage
    )


@dataclass
class SearchPoint:
    step: int
    search: ThresholdSearch
    val_pr: tuple[np.ndarray, np.ndarray]  # precision, recall over decision margins


@dataclass
class SearchHistory:
    points: list[SearchPoint] = field(default_factory=list)
    best_step: int = -1
    best_tau: float = 0.0
    best_score: float = -1.0
    stopped_at: int = -1  # the step training stopped at for want of progress (-1: it did not)
