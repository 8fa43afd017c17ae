"""Paired statistics (r2adapter/evaluate/stats.py): the bootstrap of a difference and of a
ratio of means, McNemar's test, against figures worked by hand and the copies they replaced."""

from __future__ import annotations

import numpy as np
import pytest

from r2adapter.evaluate.stats import (
    discordant,
    mcnemar,
    mean_interval,
    paired_bootstrap,
    ratio_interval,
)

pytestmark = pytest.mark.unit


def test_ratio_of_means_and_a_paired_interval() -> None:
    rng = np.random.default_rng(0)
    b = rng.uniform(100, 300, 400)
    a = 0.6 * b + rng.normal(0, 5, 400)  # paired: a tracks b closely
    r = ratio_interval(a, b)
    assert r["ratio"] == pytest.approx(a.sum() / b.sum()) and r["n"] == 400
    lo, hi = r["ci95"]
    assert lo < r["ratio"] < hi and hi - lo < 0.01  # pairing keeps it narrow
    # the same costs unpaired (b shuffled against a): the ratio is the same, the interval
    # of a ratio of sums hardly changes, but the pairs are what is resampled
    assert ratio_interval(a, rng.permutation(b))["ratio"] == pytest.approx(r["ratio"])


def test_constant_ratio_has_no_spread_and_bad_input_is_refused() -> None:
    b = np.arange(1.0, 11.0)
    r = ratio_interval(0.5 * b, b)
    assert r["ratio"] == pytest.approx(0.5) and r["ci95"] == pytest.approx([0.5, 0.5])
    for a, bb in ((np.ones(3), np.ones(4)), (np.ones(0), np.ones(0)), (np.ones(2), np.zeros(2))):
        with pytest.raises(ValueError):
            ratio_interval(a, bb)


def _bootstrap_as_it_was(a: np.ndarray, b: np.ndarray, seed: int) -> list[float]:
    """The copies this module replaced (kway/evaluate.py `paired_interval`, seed 13;
    the retired bench_rewriter `bootstrap_ci` and bench_ppr_local `paired_ci`, seed 0),
    all the same scheme."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    rng = np.random.default_rng(seed)
    boots = d[rng.integers(0, len(d), size=(2000, len(d)))].mean(axis=1)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return [float(lo), float(hi)]


def test_paired_bootstrap_is_bit_identical_to_the_copies_it_replaced() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 2, 300).astype(float), rng.integers(0, 2, 300).astype(float)
    for seed in (13, 0):
        r = paired_bootstrap(a, b, seed=seed)
        assert r["diff"] == float((a - b).mean())
        assert r["ci95"] == _bootstrap_as_it_was(a, b, seed)  # exactly, not approximately
        assert mean_interval(a - b, seed) == r["ci95"]
    assert paired_bootstrap(a, b)["ci95"] == paired_bootstrap(a, b, seed=13)["ci95"]


def test_paired_bootstrap_brackets_a_known_shift_and_refuses_bad_input() -> None:
    rng = np.random.default_rng(1)
    b = rng.normal(0, 1, 500)
    a = b + 0.3 + rng.normal(0, 0.1, 500)  # paired: every query gains about .3
    r = paired_bootstrap(a, b)
    lo, hi = r["ci95"]
    assert lo < 0.3 < hi and hi - lo < 0.05
    assert paired_bootstrap(b, b)["ci95"] == [0.0, 0.0]
    with pytest.raises(ValueError):
        paired_bootstrap(np.ones(3), np.ones(4))
    with pytest.raises(ValueError):
        mean_interval([])


def test_mcnemar_exact_for_small_counts_chi2_above() -> None:
    # 1 win, 9 losses: two-sided exact binomial = 2 · P(X ≤ 1 | n=10, 1/2) = 2 · 11/1024
    assert mcnemar(1, 9) == pytest.approx(22 / 1024)
    assert mcnemar(9, 1) == pytest.approx(22 / 1024)
    assert mcnemar(0, 0) == 1.0 and mcnemar(5, 5) == pytest.approx(1.0)
    # 40 against 20: χ² with continuity correction, (|40 − 20| − 1)² / 60 = 6.0167, p ≈ .0142
    assert mcnemar(40, 20) == pytest.approx(0.014171, abs=1e-5)
    assert mcnemar(30, 30) == pytest.approx(1.0)
    # forced exact at any count (bench_catrag's figures were all exact)
    from scipy.stats import binomtest

    assert mcnemar(40, 20, exact=True) == pytest.approx(binomtest(40, 60, 0.5).pvalue)
    with pytest.raises(ValueError):
        mcnemar(-1, 3)


def test_discordant_pairs() -> None:
    a = [1, 1, 0, 0, 1, 0.5]
    b = [1, 0, 1, 0, 0, 1.0]
    assert discordant(a, b) == (2, 2)
