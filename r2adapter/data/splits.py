"""The labelled queries' splits and folds, by a hash of the query id: stable across runs
and machines, and the same for every router family, the tier scorer and the evaluation."""

from __future__ import annotations

import hashlib


def split_of(query_id: str, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> str:
    """Deterministic 8:1:1 split by a hash of the query id: stable across runs and machines."""
    bucket = int(hashlib.sha256(query_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    if bucket < fractions[0]:
        return "train"
    return "val" if bucket < fractions[0] + fractions[1] else "test"


N_FOLDS = 5  # k-fold cross-validation over all labelled queries (r2adapter/twoway/folds.py)


def fold_of(query_id: str, n_folds: int = N_FOLDS) -> int:
    return int(hashlib.sha1(f"cv:{query_id}".encode()).hexdigest()[:8], 16) % n_folds


def fold_roles(fold: int, n_folds: int = N_FOLDS) -> dict[int, str]:
    """fold → its role when `fold` is tested: test, val (the next one), train (the rest)."""
    return {
        f: "test" if f == fold else "val" if f == (fold + 1) % n_folds else "train"
        for f in range(n_folds)
    }
