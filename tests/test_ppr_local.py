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


# ---- the solver in the retriever: local vs exact, the edited operator, the parameters ----


def _reset(t: Transition, rng: np.random.Generator, seeds: int = 5) -> np.ndarray:
    """HippoRAG 2-shaped: a few strong seeds and weak mass on many other nodes."""
    reset = np.zeros(t.n)
    reset[rng.choice(t.n, seeds, replace=False)] = rng.uniform(0.2, 1.0, seeds)
    weak = rng.choice(t.n, t.n // 10, replace=False)
    reset[weak] += 0.01 * rng.uniform(0.0, 1.0, len(weak))
    return reset


@pytest.mark.parametrize("seed", range(5))
def test_local_error_bound_and_top_k_on_random_graphs(seed: int) -> None:
    """ppr_local (what the retriever calls) within its stated bound of the exact vector on
    random graphs, dense resets included, and the top 5 the same at the default r_max."""
    from r2adapter.config import GraphParams
    from r2adapter.retrieve.ppr import ppr_local

    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(500, 4000))
    t = _graph(n, int(n * rng.uniform(2, 6)), seed=seed, isolated=5)
    r_max = GraphParams().ppr_r_max
    for _ in range(4):
        reset = _reset(t, rng)
        exact, _ = ppr_solve(t, reset, 0.5, tol=1e-13, max_iter=500)
        seeds = np.flatnonzero(reset)
        res = t.push.solve(seeds, reset[seeds], 0.5, r_max)
        approx = ppr_local(t, reset, 0.5, r_max)
        assert np.array_equal(approx, res.dense(n))
        err = float(np.abs(approx - exact).sum())
        assert err <= 2 * res.residual / (1 - res.residual) + 1e-12
        assert res.residual <= r_max * float(t.push.degree.sum())
        assert set(np.argsort(-exact)[:5]) == set(np.argsort(-approx)[:5])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_local_on_the_edited_operator_matches_the_exact_edited_solver(seed: int) -> None:
    """CatRAG's operator P′ = P + Δ: forward push along the edited columns (one emptied:
    a dangling node, one with an edge pruned to zero) against ppr_edited."""
    from r2adapter.retrieve.ppr import ColumnEdits, ppr_edited, ppr_local

    rng = np.random.default_rng(seed)
    n = 1500
    t = _graph(n, 6000, seed=seed + 20)
    adj = (t.matrix.T).tocsr()  # row u: column u of P (permuted order)
    deg = np.diff(adj.indptr)
    chosen = rng.choice(np.flatnonzero(deg >= 3), 4, replace=False)
    columns = {}
    for i, pos in enumerate(chosen.tolist()):
        targets_pos = adj.indices[adj.indptr[pos] : adj.indptr[pos + 1]]
        old = adj.data[adj.indptr[pos] : adj.indptr[pos + 1]].astype(np.float64)
        factor = np.zeros(len(old)) if i == 0 else rng.choice([0.0, 0.5, 5.0], len(old))
        factor[0] = 0.0 if i == 0 else 10.0
        new = old * factor
        col = new / new.sum() if new.sum() > 0 else np.zeros_like(new)
        columns[int(t.perm[pos])] = (t.perm[targets_pos], col - old)
    edits = ColumnEdits.from_columns(t, columns)
    reset = _reset(t, rng)
    reset[t.perm[chosen]] += 1.0  # the edited nodes carry mass
    exact, _ = ppr_edited(t, reset, edits, 0.5, tol=1e-12, max_iter=500)
    for r_max in (1e-7, 1e-10):
        approx = ppr_local(t, reset, 0.5, r_max, edits)
        assert abs(approx.sum() - 1.0) < 1e-9
        # the bound 2ρ/(1 − ρ), ρ ≤ r_max × the degrees of all nodes (those touched, at most)
        rho = r_max * float(t.push.degree.sum())
        assert float(np.abs(approx - exact).sum()) <= 2 * rho / (1 - rho)
        assert set(np.argsort(-exact)[:5]) == set(np.argsort(-approx)[:5])
    # the unedited operator gives a different answer: the edits are applied
    plain = ppr_local(t, reset, 0.5, 1e-10)
    assert float(np.abs(plain - exact).sum()) > 1e-3


def test_the_solver_is_chosen_by_size_or_forced() -> None:
    from r2adapter.config import GraphParams
    from r2adapter.retrieve.graph import ppr_solver, run_ppr

    p = GraphParams(ppr_local_above_nodes=1000)
    assert (ppr_solver(p, 1000), ppr_solver(p, 1001)) == ("exact", "local")
    assert ppr_solver(GraphParams(ppr_solver="local"), 10) == "local"
    assert ppr_solver(GraphParams(ppr_solver="exact", ppr_local_above_nodes=0), 10**9) == "exact"
    t = _graph(3000, 9000, seed=9)
    reset = _reset(t, np.random.default_rng(9))
    local = run_ppr(t, reset, GraphParams(ppr_solver="local", ppr_r_max=1e-4))
    exact = run_ppr(t, reset, GraphParams(ppr_solver="exact"))
    assert (local == 0).sum() > (exact == 0).sum()  # the push leaves far nodes at zero
    assert float(np.abs(local - exact).sum()) > 1e-6  # a coarse r_max shows: a different solver


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("ppr_r_max: 0.5", "graph.ppr_r_max must be in [1e-12, 0.1], not 0.5"),
        ("ppr_r_max: 0", "graph.ppr_r_max must be in"),
        ("ppr_r_max: -1.0e-7", "graph.ppr_r_max must be in"),
        ("ppr_solver: approximate", "graph.ppr_solver must be one of auto, local, exact"),
        ("ppr_local_above_nodes: -1", "graph.ppr_local_above_nodes"),
        ("passage_seed_top_n: -5", "graph.passage_seed_top_n"),
    ],
)
def test_bad_ppr_parameters_are_one_line(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch, line: str, named: str
) -> None:
    from pathlib import Path

    from r2adapter.config import load_params, settings
    from r2adapter.errors import R2AError

    home = Path(str(tmp_path))
    monkeypatch.setenv("R2A_HOME", str(home))
    settings.cache_clear()
    try:
        (home / "params.yaml").write_text(f"graph:\n  {line}\n")
        with pytest.raises(R2AError) as e:
            load_params()
        assert "\n" not in str(e.value) and named in str(e.value)
    finally:
        monkeypatch.undo()
        settings.cache_clear()
