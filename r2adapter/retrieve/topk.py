"""Top-k selection without sorting everything: the graph search ranks 63,584 fact scores
per query vector on 2Wiki to keep its top 5, where a full stable argsort costs 4.5 ms and
a partition 0.3 ms (1 thread)."""

from __future__ import annotations

import numpy as np


def top_k_stable(scores: np.ndarray, k: int) -> np.ndarray:
    """Exactly `np.argsort(-scores, kind="stable")[:k]`: the k highest scores, descending,
    equal scores in index order (a tie at the k-th value keeps the lowest indices)."""
    n = len(scores)
    if k <= 0:
        return np.zeros(0, dtype=np.intp)
    if k >= n or np.isnan(scores).any():
        return np.argsort(-scores, kind="stable")[:k]
    kth = np.partition(scores, n - k)[n - k]  # the k-th largest value
    above = np.flatnonzero(scores > kth)
    ties = np.flatnonzero(scores == kth)[: k - len(above)]
    idx = np.concatenate([above, ties])
    return idx[np.argsort(-scores[idx], kind="stable")]
