"""Paired statistics over the same queries, the one module the library and the benchmarks use.

- `paired_bootstrap(a, b)`: mean(a − b) and its 95% paired bootstrap interval.
- `mean_interval(d)`: the same interval for per-query differences already taken.
- `ratio_interval(a, b)`: sum(a) / sum(b) (a routed cost against a fixed strategy's) and its
  95% paired bootstrap interval.
- `ratio_difference(num_a, den_a, num_b, den_b)`: the difference of two pooled rates over the
  same queries (a chain precision, matched ÷ predicted triplets, of two rewriters) and its
  95% paired bootstrap interval.
- `mcnemar(wins, losses)`: McNemar's two-sided test on the discordant pairs (exact binomial
  for small counts); `discordant(a, b)` counts them.

The bootstrap, for all four: `n_boot` (2000) resamples of the query indices with
replacement, drawn at once by `numpy.random.default_rng(seed).integers(0, n, (n_boot, n))`,
so a query's two figures are always resampled together; the interval is the 2.5th and
97.5th percentile (numpy's linear interpolation) of the resampled statistic. The same seed,
`n_boot` and queries give bit-identical intervals. The library's reports use seed 13;
benchmarks that used seed 0 before this module pass `seed=0` and keep their figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

N_BOOT = 2000
SEED = 13  # the library's reports (r2a evaluate routing / corpora)
EXACT_BELOW = 25  # McNemar: the exact binomial test below this many discordant pairs


def _resample(n: int, seed: int, n_boot: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(n_boot, n))


def mean_interval(
    d: Sequence[float] | np.ndarray, seed: int = SEED, n_boot: int = N_BOOT
) -> list[float]:
    """The 95% bootstrap interval of the mean of the per-query differences `d`."""
    x = np.asarray(d, dtype=np.float64)
    if x.ndim != 1 or len(x) == 0:
        raise ValueError("mean_interval needs a non-empty 1-d array of differences")
    boots = x[_resample(len(x), seed, n_boot)].mean(axis=1)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return [float(lo), float(hi)]


def paired_bootstrap(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    seed: int = SEED,
    n_boot: int = N_BOOT,
) -> dict[str, Any]:
    """Mean of a − b over the same queries and its 95% paired bootstrap interval:
    `{"diff": mean, "ci95": [lo, hi]}`."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"paired_bootstrap: unequal shapes {x.shape} and {y.shape}")
    d = x - y
    return {"diff": float(d.mean()), "ci95": mean_interval(d, seed, n_boot)}


def ratio_interval(
    a: np.ndarray, b: np.ndarray, seed: int = SEED, n_boot: int = N_BOOT
) -> dict[str, Any]:
    """sum(a) / sum(b) over the same queries (the ratio of the means) and its 95% paired
    bootstrap interval: the queries are resampled together, so a query's two costs stay
    paired."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise ValueError("ratio_interval needs two equal-length, non-empty 1-d arrays")
    if b.sum() <= 0:
        raise ValueError("ratio_interval: the reference's total is not positive")
    idx = _resample(len(a), seed, n_boot)
    boots = a[idx].sum(axis=1) / np.maximum(b[idx].sum(axis=1), 1e-12)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return {"ratio": float(a.sum() / b.sum()), "ci95": [float(lo), float(hi)], "n": len(a)}


def ratio_difference(
    num_a: Sequence[float] | np.ndarray,
    den_a: Sequence[float] | np.ndarray,
    num_b: Sequence[float] | np.ndarray,
    den_b: Sequence[float] | np.ndarray,
    seed: int = SEED,
    n_boot: int = N_BOOT,
) -> dict[str, Any]:
    """sum(num_a) / sum(den_a) − sum(num_b) / sum(den_b) over the same queries (two pooled
    rates: each query weighs by its denominator) and its 95% paired bootstrap interval:
    `{"diff": d, "ci95": [lo, hi]}`. A resample whose denominator is 0 has rate 0."""
    arrs = [np.asarray(x, dtype=np.float64) for x in (num_a, den_a, num_b, den_b)]
    if any(x.shape != arrs[0].shape for x in arrs) or arrs[0].ndim != 1 or not len(arrs[0]):
        raise ValueError("ratio_difference needs four equal-length, non-empty 1-d arrays")
    na, da, nb, db = arrs

    def rate(num: np.ndarray, den: np.ndarray) -> np.ndarray:
        return np.divide(num, den, out=np.zeros_like(num), where=den > 0)

    idx = _resample(len(na), seed, n_boot)
    boots = rate(na[idx].sum(1), da[idx].sum(1)) - rate(nb[idx].sum(1), db[idx].sum(1))
    diff = rate(na.sum(keepdims=True), da.sum(keepdims=True)) - rate(
        nb.sum(keepdims=True), db.sum(keepdims=True)
    )
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return {"diff": float(diff[0]), "ci95": [float(lo), float(hi)]}


def discordant(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> tuple[int, int]:
    """The discordant pairs of two per-query outcomes (1 = success): (queries where only `a`
    succeeds, queries where only `b` does). Outcomes are compared as numbers, so a query
    with a > b counts as a win for `a`."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError("discordant needs two equal-length arrays")
    return int((x > y).sum()), int((x < y).sum())


def mcnemar(wins: int, losses: int, exact: bool | None = None) -> float:
    """McNemar's two-sided p-value from the discordant pairs. Exact (the binomial test of
    `wins` among `wins + losses` at 1/2) when there are fewer than 25 of them or `exact` is
    True; otherwise the χ² statistic with continuity correction, max(|w − l| − 1, 0)² / (w + l),
    on one degree of freedom. No discordant pair: 1.0."""
    from scipy.stats import binomtest, chi2

    if wins < 0 or losses < 0:
        raise ValueError("mcnemar: counts must be non-negative")
    n = wins + losses
    if n == 0:
        return 1.0
    if exact or (exact is None and n < EXACT_BELOW):
        return float(binomtest(wins, n, 0.5).pvalue)
    stat = max(abs(wins - losses) - 1.0, 0.0) ** 2 / n
    return float(chi2.sf(stat, 1))
