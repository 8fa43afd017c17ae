"""top_k_stable is exactly the stable argsort's prefix, ties and edge cases included."""

from __future__ import annotations

import numpy as np
import pytest

from r2adapter.retrieve.topk import top_k_stable

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("seed", range(20))
def test_equals_the_stable_argsort_prefix(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    # few distinct values: ties everywhere, at the k-th value too
    scores = rng.integers(0, 6, n).astype(np.float64) / 5
    for k in (0, 1, 2, 5, n - 1, n, n + 3):
        want = np.argsort(-scores, kind="stable")[: max(k, 0)]
        assert top_k_stable(scores, k).tolist() == want.tolist()


def test_float32_scores_and_nan() -> None:
    rng = np.random.default_rng(1)
    s = rng.standard_normal(1000).astype(np.float32)
    assert top_k_stable(s, 7).tolist() == np.argsort(-s, kind="stable")[:7].tolist()
    s[3] = np.nan
    assert top_k_stable(s, 7).tolist() == np.argsort(-s, kind="stable")[:7].tolist()
