"""Synonym edges through pgvector HNSW (r2adapter/index/synonyms_hnsw.py) against the
all-pairs pass on a small clustered set, where the HNSW search is exact."""

from __future__ import annotations

import numpy as np
import pytest

from r2adapter.index.graph import synonym_edges

pytestmark = pytest.mark.integration


def _clusters(n: int = 400, dim: int = 32, seed: int = 0) -> tuple[np.ndarray, list[str]]:
    """Tight clusters of near-duplicates (many pairs above 0.8) among unrelated points."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(40, dim))
    x = centres[rng.integers(0, 40, n)] + rng.normal(scale=0.35, size=(n, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    names = [f"entity {i}" if i % 17 else "ab" for i in range(n)]  # some too short: none
    return x.astype(np.float32), names


def test_hnsw_synonyms_equal_the_all_pairs_pass(pg_env: dict[str, str]) -> None:
    from r2adapter.index.synonyms_hnsw import synonym_edges_hnsw
    from r2adapter.store.db import connection
    from r2adapter.store.migrate import migrate

    migrate()  # pgvector's extension (a no-op once applied)
    emb, names = _clusters()
    # top_k above every cluster's size: the all-pairs candidates do not depend on which
    # entities may have synonyms, so both passes keep every pair above the threshold
    want = synonym_edges(emb, names, 0.8, 100)
    assert 200 < len(want) < 20_000
    with connection() as conn:
        got = synonym_edges_hnsw(conn, emb, names, 0.8, 100)
        looser = synonym_edges_hnsw(conn, emb, names, 0.7, 100)
    assert [(a, b) for a, b, _ in got] == [(a, b) for a, b, _ in want]
    np.testing.assert_allclose([s for *_, s in got], [s for *_, s in want], atol=1e-5)
    assert not [e for e in got if "ab" in (names[e[0]], names[e[1]])]
    # a lower threshold finds more pairs, each at least that similar
    assert {(a, b) for a, b, _ in looser} > {(a, b) for a, b, _ in got}
    assert min(s for *_, s in looser) >= 0.7 - 1e-6
