"""Synonym edges through pgvector HNSW (r2adapter/index/synonyms_hnsw.py) against the
all-pairs pass on small clustered sets, where the HNSW search is exact, and in the build
(graph.synonym_search)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from r2adapter.index.graph import synonym_edges
from tests.conftest import make_mini_musique

pytestmark = pytest.mark.unit  # the tests on Postgres (pg_env) are integration


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


def test_a_full_first_list_is_searched_again(pg_env: dict[str, str]) -> None:
    """A cluster larger than the first pass's list: its members come back full and are
    searched again with the whole top_k; one short pass alone misses pairs."""
    from r2adapter.index.synonyms_hnsw import synonym_edges_hnsw
    from r2adapter.store.db import connection
    from r2adapter.store.migrate import migrate

    migrate()
    rng = np.random.default_rng(1)
    centre = rng.normal(size=32)
    cluster = centre + rng.normal(scale=0.05, size=(60, 32))  # 60 near-duplicates
    rest = rng.normal(size=(200, 32))
    x = np.vstack([cluster, rest])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    emb, names = x.astype(np.float32), [f"entity {i}" for i in range(len(x))]
    want = synonym_edges(emb, names, 0.8, 100)
    assert len(want) >= 60 * 59 // 2  # every pair inside the cluster
    stats: dict[str, float] = {}
    with connection() as conn:
        got = synonym_edges_hnsw(conn, emb, names, 0.8, 100, ef_first=10, stats=stats)
        short = synonym_edges_hnsw(conn, emb, names, 0.8, 100, ef_search=10, ef_first=10)
    assert [(a, b) for a, b, _ in got] == [(a, b) for a, b, _ in want]
    assert stats["searched_twice"] >= 60
    assert len(short) < len(want)


def test_synonym_search_by_size() -> None:
    from r2adapter.config import GraphParams
    from r2adapter.index.synonyms_hnsw import synonym_search

    p = GraphParams(synonym_hnsw_above=1000)
    assert (synonym_search(p, 1000), synonym_search(p, 1001)) == ("exact", "hnsw")
    assert synonym_search(GraphParams(synonym_search="hnsw"), 10) == "hnsw"
    assert synonym_search(GraphParams(synonym_search="exact"), 10**9) == "exact"
    # the real corpora (≤ 50k entities) keep the exact pass by default
    assert synonym_search(GraphParams(), 50_000) == "exact"


def test_build_with_hnsw_synonyms_is_a_new_version_with_the_same_edges(
    pg_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from r2adapter.config import GraphParams
    from r2adapter.index import build
    from r2adapter.store.db import connection

    def synonyms(version: int) -> dict[tuple[int, int], float]:
        with connection() as conn:
            rows = conn.execute(
                "SELECT a, b, score FROM synonym_edges WHERE index_version = %s", (version,)
            ).fetchall()
        return {(a, b): s for a, b, s in rows}

    ds = make_mini_musique(tmp_path / "synhnsw", n=12)
    quiet = lambda _: None  # noqa: E731
    exact = build.build_index(ds, "precomputed", log=quiet)
    assert exact.created  # auto: the exact pass at this size
    log: list[str] = []
    monkeypatch.setattr(build, "graph_params", lambda: GraphParams(synonym_search="hnsw"))
    hnsw = build.build_index(ds, "precomputed", log=log.append)
    # the method is part of the signature: a new version, built through HNSW
    assert hnsw.created and hnsw.version > exact.version
    assert [line for line in log if "through HNSW" in line]
    want, got = synonyms(exact.version), synonyms(hnsw.version)
    assert len(want) > 20 and want.keys() == got.keys()
    assert max(abs(want[k] - got[k]) for k in want) < 1e-5
    assert {k: v for k, v in hnsw.counts.items()} == exact.counts
    # auto above the size threshold is the same build: nothing new
    monkeypatch.setattr(build, "graph_params", lambda: GraphParams(synonym_hnsw_above=10))
    assert not build.build_index(ds, "precomputed", log=quiet).created
    # and back to the exact pass: a version again (its signature is the one before)
    monkeypatch.setattr(build, "graph_params", lambda: GraphParams())
    back = build.build_index(ds, "precomputed", log=quiet)
    assert back.created and back.version > hnsw.version
