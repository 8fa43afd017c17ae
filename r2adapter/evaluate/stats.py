"""Paired statistics over the same queries: the bootstrap interval of a ratio of means (a
routed cost against a fixed strategy's)."""

from __future__ import annotations

from typing import Any

import numpy as np

N_BOOT = 2000


def ratio_interval(a: np.ndarray, b: np.ndarray, seed: int = 13) -> dict[str, Any]:
    """sum(a) / sum(b) over the same queries (the ratio of the means) and its 95% paired
    bootstrap interval: the queries are resampled together, so a query's two costs stay
    paired."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise ValueError("ratio_interval needs two equal-length, non-empty 1-d arrays")
    if b.sum() <= 0:
        raise ValueError("ratio_interval: the reference's total is not positive")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(N_BOOT, len(a)))
    boots = a[idx].sum(axis=1) / np.maximum(b[idx].sum(axis=1), 1e-12)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return {"ratio": float(a.sum() / b.sum()), "ci95": [float(lo), float(hi)], "n": len(a)}
