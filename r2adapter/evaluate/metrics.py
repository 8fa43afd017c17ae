"""Retrieval metrics as in HippoRAG 2 and CatRAG, over ranked passage ids."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def recall_at_k(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Fraction of the gold passages found in the top k (HippoRAG 2's Recall@k)."""
    if not gold:
        return 0.0
    top = set(ranked[:k])
    return sum(g in top for g in set(gold)) / len(set(gold))


def full_chain(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """1 when every gold passage is in the top k (CatRAG's Full Chain Retrieval)."""
    return float(bool(gold) and set(gold) <= set(ranked[:k]))


def average_rank(ranked: Sequence[str], gold: Sequence[str], depth: int) -> float:
    """Mean 1-based rank of the gold passages; a gold passage not retrieved counts depth + 1
    (R²Adapter §3.2)."""
    pos = {pid: i + 1 for i, pid in enumerate(ranked[:depth])}
    return float(np.mean([pos.get(g, depth + 1) for g in gold])) if gold else float(depth + 1)


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else 0.0


def metric_key(name: str) -> str:
    """A figure's name as a metric key: MLflow and Kubeflow take no '@' (recall@5 →
    recall_at_5)."""
    return name.replace("@", "_at_")
