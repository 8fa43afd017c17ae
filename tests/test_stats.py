"""Paired statistics (r2adapter/evaluate/stats.py): the ratio of means and its bootstrap
interval against figures worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from r2adapter.evaluate.stats import ratio_interval

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
