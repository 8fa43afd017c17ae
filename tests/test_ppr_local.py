"""Forward-push PPR against the exact solver and igraph: the stated L1 bound holds, the top
of the ranking agrees, and the work does not grow with the graph."""

from __future__ import annotations

import numpy as np
import pytest

from r2adapter.retrieve.ppr import Transition, ppr_solve

pytestmark = pytest.mark.unit


def _graph(n: int, m: int, seed: int, isolated: int = 0) -> Transition:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n - isolated, m)
    dst = rng.integers(0, n - isolated, m)
    keep = src != dst
    w = rng.uniform(0.5, 2.0, int(keep.sum()))
    return Transition.from_edges(n, src[keep], dst[keep], w, dtype=np.float64)


@pytest.mark.parametrize("r_max", [1e-4, 1e-6, 1e-9])
def test_error_within_the_stated_bound(r_max: float) -> None:
    t = _graph(3000, 9000, seed=1, isolated=20)
    rng = np.random.default_rng(2)
    seeds = rng.choice(3000, 7, replace=False)
    seeds[0] = 2995  # an isolated (dangling) seed
    mass = rng.uniform(0.1, 1.0, 7)
    reset = np.zeros(3000)
    reset[seeds] = mass
    exact, _ = ppr_solve(t, reset, damping=0.5, tol=1e-13, max_iter=500)
    res = t.push.solve(seeds, mass, damping=0.5, r_max=r_max)
    approx = res.dense(3000)
    assert abs(approx.sum() - 1.0) < 1e-12
    # before normalisation the error is at most the residual; normalising at most doubles it
    err = float(np.abs(approx - exact).sum())
    assert err <= 2 * res.residual / (1 - res.residual) + 1e-12
    # and the residual itself is below r_max · the total degree of the touched nodes
    assert res.residual <= r_max * float(t.push.degree[t.inv[res.nodes]].sum()) + 1e-15
    if r_max <= 1e-9:
        assert err < 1e-4
        top_exact = set(np.argsort(-exact)[:10])
        assert len(top_exact & set(np.argsort(-approx)[:10])) >= 9


def test_agrees_with_igraph_prpack() -> None:
    igraph = pytest.importorskip("igraph")
    rng = np.random.default_rng(5)
    n, m = 400, 1500
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    w = rng.uniform(0.5, 2.0, len(src))
    t = Transition.from_edges(n, src, dst, w, dtype=np.float64)
    g = igraph.Graph(n=n, edges=list(zip(src.tolist(), dst.tolist(), strict=True)))
    g.es["weight"] = w.tolist()
    reset = np.zeros(n)
    reset[[3, 17, 42]] = [1.0, 0.5, 0.25]
    ref = np.array(
        g.personalized_pagerank(damping=0.5, reset=reset.tolist(), weights="weight", directed=False)
    )
    got = t.push.solve(np.array([3, 17, 42]), np.array([1.0, 0.5, 0.25]), r_max=1e-10).dense(n)
    assert float(np.abs(got - ref).sum()) < 1e-6


def test_work_does_not_grow_with_the_graph() -> None:
    # the same local neighbourhood inside a small and a 30x larger graph: about the same pushes
    small = _graph(2_000, 6_000, seed=3)
    large = _graph(60_000, 180_000, seed=3)
    seeds, mass = np.array([0, 1]), np.array([1.0, 1.0])
    p_small = small.push.solve(seeds, mass, r_max=1e-4).pushes
    p_large = large.push.solve(seeds, mass, r_max=1e-4).pushes
    assert p_large < 3 * p_small
    assert p_large < 1 / (0.5 * 1e-4)  # the 1 / ((1 − d)·r_max) bound


def test_workspace_is_clean_between_queries() -> None:
    t = _graph(500, 2000, seed=4)
    a = t.push.solve(np.array([1]), np.array([1.0]), r_max=1e-8)
    t.push.solve(np.array([2, 3]), np.array([1.0, 2.0]), r_max=1e-8)
    again = t.push.solve(np.array([1]), np.array([1.0]), r_max=1e-8)
    assert np.array_equal(a.nodes, again.nodes)
    assert np.allclose(a.values, again.values, atol=1e-15)


@pytest.mark.parametrize("r_max", [0.0, -1.0, 0.5])
def test_r_max_out_of_range_is_refused(r_max: float) -> None:
    t = _graph(50, 100, seed=6)
    with pytest.raises(ValueError, match="r_max must be in"):
        t.push.solve(np.array([1]), np.array([1.0]), r_max=r_max)


def test_no_mass_is_refused() -> None:
    t = _graph(50, 100, seed=6)
    with pytest.raises(ValueError, match="no mass"):
        t.push.solve(np.array([1]), np.array([0.0]))
