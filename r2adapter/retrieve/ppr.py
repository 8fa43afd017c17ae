"""Personalized PageRank on a scipy CSR (HippoRAG 2's graph search).

Same fixed point as igraph's prpack with a reset vector: a walker continues along a
weighted edge with probability `damping`, else jumps to the reset distribution; a node
without edges sends its mass to the reset distribution too.

PPR solves the linear system (I − d·P)·y = (1 − d)·r and returns y / Σy. P is the
column-stochastic transition of an undirected graph, so it is similar to the symmetric
D^-1/2·A·D^-1/2 and its eigenvalues are real, in [−1, 1]; those of I − d·P lie in
[1 − d, 1 + d]. With the spectrum known, the Chebyshev semi-iteration converges at
(√κ − 1)/(√κ + 1) per matrix product (κ = (1 + d)/(1 − d): 0.27 at d = 0.5) instead of
the power iteration's d (0.5): about half the products for the same error. The matrix is
stored in float32, its nodes in reverse Cuthill–McKee order (neighbours close in memory);
the products dominate the time and both halve the memory they stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

from r2adapter.retrieve.ppr_local import ForwardPush

if TYPE_CHECKING:
    from r2adapter.config import GraphParams

# reverse Cuthill–McKee only up to this many nodes: scipy's ordering grows about
# quadratically (synthetic graphs of 2Wiki's shape: 0.5 s at 86k nodes, 4.5 s at 171k, 11 s
# at 429k), while what it buys, locality in the exact solver's products, is a constant
# factor; above it the nodes keep the index's order (a passage's new entities together)
RCM_MAX_NODES = 100_000


@dataclass(frozen=True)
class Transition:
    """Column-stochastic transition of an undirected weighted graph, ready for PPR.

    `matrix` is P in the permuted node order: P[j, i] = w(i, j) / strength(i), with node
    `perm[k]` of the caller's numbering at position k."""

    matrix: sp.csr_matrix
    dangling: np.ndarray  # bool per node (caller's order): no edges
    perm: np.ndarray  # position -> caller's node id
    inv: np.ndarray  # caller's node id -> position

    @classmethod
    def from_edges(
        cls,
        n: int,
        src: np.ndarray,
        dst: np.ndarray,
        weight: np.ndarray,
        dtype: type = np.float32,
        reorder: bool = True,
    ) -> Transition:
        # undirected: each edge both ways; duplicate pairs add up
        rows = np.concatenate([src, dst])
        cols = np.concatenate([dst, src])
        w = np.concatenate([weight, weight]).astype(np.float64)
        adj = sp.csr_matrix((w, (rows, cols)), shape=(n, n))
        adj.sum_duplicates()
        strength = np.asarray(adj.sum(axis=1)).ravel()
        inv_s = np.divide(1.0, strength, out=np.zeros_like(strength), where=strength > 0)
        # adj is symmetric, so adj @ diag(1/strength) is P with columns summing to one
        matrix = (adj @ sp.diags(inv_s)).tocsr()
        if reorder and 1 < n <= RCM_MAX_NODES:
            perm = reverse_cuthill_mckee(matrix, symmetric_mode=True).astype(np.int64)
            matrix = matrix[perm][:, perm].tocsr()
        else:
            perm = np.arange(n, dtype=np.int64)
        matrix.sort_indices()
        inv = np.empty_like(perm)
        inv[perm] = np.arange(n, dtype=np.int64)
        return cls(matrix.astype(dtype), strength == 0, perm, inv)

    @property
    def n(self) -> int:
        return int(self.matrix.shape[0])

    @cached_property
    def push(self) -> ForwardPush:
        """The local (forward-push) solver over this transition, built on first use."""
        return ForwardPush(self.matrix, self.perm, self.inv)


def personalized_pagerank(
    t: Transition,
    reset: np.ndarray,
    damping: float = 0.5,
    tol: float = 1e-7,
    max_iter: int = 100,
) -> np.ndarray:
    """PPR scores in the caller's node order (float64, summing to one)."""
    return ppr_solve(t, reset, damping, tol, max_iter)[0]


def ppr_solve(
    t: Transition,
    reset: np.ndarray,
    damping: float = 0.5,
    tol: float = 1e-7,
    max_iter: int = 100,
) -> tuple[np.ndarray, int]:
    """PPR by Chebyshev semi-iteration on (I − d·P)·y = (1 − d)·r; returns y / Σy (float64,
    in the caller's node order) and the number of matrix products.

    Dropping the dangling correction and normalising once at the end gives the same fixed
    point (a dangling node's mass goes back in proportion to r). The loop stops when the
    residual's L1 norm is below tol·(1 − d): since ‖P‖₁ ≤ 1, ‖(I − d·P)⁻¹‖₁ ≤ 1/(1 − d),
    so the L1 error of y (which sums to about 1) is below `tol`.
    """
    if not 0.0 < damping < 1.0:
        raise ValueError("damping must be in (0, 1)")
    total = float(reset.sum())
    if total <= 0:
        raise ValueError("reset vector has no mass")
    dtype = t.matrix.dtype
    b = (reset[t.perm] * ((1.0 - damping) / total)).astype(dtype)
    # Chebyshev iteration for A = I − d·P with spectrum in [1 − d, 1 + d]: centre 1, half-width d
    sigma = 1.0 / damping
    rho = 1.0 / sigma
    y = np.zeros_like(b)
    r = b.copy()
    step = r.copy()  # d_0 = r_0 / centre
    stop = tol * (1.0 - damping)
    iterations = 0
    while iterations < max_iter:
        iterations += 1
        y += step
        a_step = t.matrix @ step  # A·d = d − damping·P·d
        a_step *= -damping
        a_step += step
        r -= a_step
        if float(np.abs(r).sum()) < stop:
            break
        rho_next = 1.0 / (2.0 * sigma - rho)
        step *= rho_next * rho
        step += (2.0 * rho_next / damping) * r
        rho = rho_next
    x = y.astype(np.float64)[t.inv]
    return x / x.sum(), iterations


@dataclass(frozen=True)
class ColumnEdits:
    """A query's edits to a few columns of the transition (CatRAG: the seeds' out-edges).

    Column `nodes[k]` (caller's numbering) of P becomes P[:, nodes[k]] + Δ[:, k]; Δ is held
    compactly as the rows it touches (`rows`, permuted positions) and a k × m block, so a
    product costs its non-zeros, not the graph's size. The edited operator is no longer the
    transition of an undirected graph, so its spectrum is not real: PPR on it is solved by
    `ppr_edited`."""

    positions: np.ndarray  # permuted positions of the edited columns (m)
    rows: np.ndarray  # permuted positions of the rows Δ touches (k)
    block: sp.csr_matrix  # k × m: Δ restricted to `rows`

    @classmethod
    def from_columns(
        cls, t: Transition, columns: dict[int, tuple[np.ndarray, np.ndarray]]
    ) -> ColumnEdits:
        """`columns`: node → (targets, change of P[target, node]) in the caller's order."""
        nodes = np.array(sorted(columns), dtype=np.int64)
        if not len(nodes):
            empty = np.zeros(0, dtype=np.int64)
            return cls(empty, empty, sp.csr_matrix((0, 0), dtype=t.matrix.dtype))
        rows, cols, vals = [], [], []
        for k, u in enumerate(nodes.tolist()):
            targets, change = columns[u]
            rows.append(t.inv[np.asarray(targets, dtype=np.int64)])
            cols.append(np.full(len(targets), k, dtype=np.int64))
            vals.append(np.asarray(change, dtype=np.float64))
        touched, local = np.unique(np.concatenate(rows), return_inverse=True)
        block = sp.csr_matrix(
            (np.concatenate(vals), (local, np.concatenate(cols))), shape=(len(touched), len(nodes))
        )
        return cls(t.inv[nodes], touched, block.astype(t.matrix.dtype))

    @property
    def m(self) -> int:
        return len(self.positions)


def _edited_product(t: Transition, edits: ColumnEdits, x: np.ndarray) -> np.ndarray:
    """P′·x = P·x + Δ·x[edited] (permuted order)."""
    out = t.matrix @ x
    if edits.m:
        out[edits.rows] += edits.block @ x[edits.positions]
    return out


EDITED_METHODS = ("chebyshev", "power")


def ppr_edited(
    t: Transition,
    reset: np.ndarray,
    edits: ColumnEdits,
    damping: float = 0.5,
    tol: float = 1e-7,
    max_iter: int = 100,
    method: str = "chebyshev",
) -> tuple[np.ndarray, int]:
    """PPR on the edited operator P′ = P + Δ (Δ non-zero in a few columns), solving
    (I − d·P′)·y = (1 − d)·r/Σr; returns y / Σy (float64, caller's order) and the number of
    products P′·x = P·x + Δ·x[edited].

    P′ is column-stochastic (a column may be zero: a node whose edits leave it no edge,
    whose mass then goes back in proportion to r, as `ppr_solve` treats dangling nodes), so
    ‖P′‖₁ ≤ 1, ‖(I − d·P′)⁻¹‖₁ ≤ 1/(1 − d), and whatever the iteration, a residual below
    tol·(1 − d) in L1 bounds the L1 error of y by `tol`: the loop stops there.

    `power`: the power (Richardson) iteration y ← y + r, r ← d·P′·r, converging at rate d.
    `chebyshev` (default): P′ is not symmetric, so its eigenvalues λ are complex, but
    |λ| ≤ 1 puts 1 − d·λ in the disc of radius d around 1, inside the ellipse through 0
    with foci 1 ± d on which the Chebyshev semi-iteration for [1 − d, 1 + d] converges
    (semi-minor axis √(1 − d²) > d); the unedited spectrum, all but a few eigenvalues, lies
    on the interval. Should the residual grow (a non-normal transient), the iteration goes
    on as the power iteration from where it is, which converges from any y."""
    if not 0.0 < damping < 1.0:
        raise ValueError("damping must be in (0, 1)")
    if method not in EDITED_METHODS:
        raise ValueError(f"method must be one of {EDITED_METHODS}, not {method!r}")
    total = float(reset.sum())
    if total <= 0:
        raise ValueError("reset vector has no mass")
    dtype = t.matrix.dtype
    b = (reset[t.perm] * ((1.0 - damping) / total)).astype(dtype)
    y = np.zeros_like(b)
    r = b.copy()
    stop = tol * (1.0 - damping)
    iterations = 0
    done = False
    if method == "chebyshev":  # as ppr_solve, with P′ for P
        sigma = 1.0 / damping
        rho = 1.0 / sigma
        step = r.copy()
        best = float(np.abs(r).sum())
        while iterations < max_iter:
            iterations += 1
            y += step
            a_step = _edited_product(t, edits, step)
            a_step *= -damping
            a_step += step
            r -= a_step
            res = float(np.abs(r).sum())
            if res < stop:
                done = True
                break
            if res > 2.0 * best:
                break  # not contracting: finish by power iteration
            best = min(best, res)
            rho_next = 1.0 / (2.0 * sigma - rho)
            step *= rho_next * rho
            step += (2.0 * rho_next / damping) * r
            rho = rho_next
    while not done and iterations < max_iter:
        iterations += 1
        y += r  # the residual of y + r is d·P′·r
        r = _edited_product(t, edits, r)
        r *= damping
        done = float(np.abs(r).sum()) < stop
    x = y.astype(np.float64)[t.inv]
    return x / x.sum(), iterations


def ppr_local(
    t: Transition,
    reset: np.ndarray,
    damping: float = 0.5,
    r_max: float = 1e-7,
    edits: ColumnEdits | None = None,
) -> np.ndarray:
    """PPR by forward push (`ppr_local.ForwardPush`), on P or on the edited operator P′ =
    P + Δ; the same return as `personalized_pagerank` and `ppr_edited` (float64, caller's
    order, summing to one), zero where the push did not reach. Its L1 error is at most
    2·ρ/(1 − ρ), ρ the residual left (≤ r_max × the degrees of the nodes touched)."""
    seeds = np.flatnonzero(reset)
    push = t.push
    replace: dict[int, tuple[np.ndarray, np.ndarray]] | None = None
    if edits is not None and edits.m:
        replace = {}
        block = edits.block.tocsc()
        out = push.out
        for k, u in enumerate(edits.positions.tolist()):
            lo, hi = block.indptr[k], block.indptr[k + 1]
            s, e = out.indptr[u], out.indptr[u + 1]
            targets = np.concatenate([out.indices[s:e], edits.rows[block.indices[lo:hi]]])
            values = np.concatenate([out.data[s:e], block.data[lo:hi].astype(np.float64)])
            uniq, at = np.unique(targets, return_inverse=True)
            col = np.zeros(len(uniq), dtype=np.float64)
            np.add.at(col, at, values)
            keep = col > 0  # a pruned edge (its weight × 0) leaves the column
            replace[u] = (uniq[keep].astype(np.int64), col[keep])
    return push.solve(seeds, reset[seeds], damping, r_max, replace=replace).dense(t.n)


def ppr_solver(p: GraphParams, n_nodes: int) -> str:
    """`local` or `exact`: graph.ppr_solver, `auto` by the graph's size."""
    if p.ppr_solver != "auto":
        return p.ppr_solver
    return "local" if n_nodes > p.ppr_local_above_nodes else "exact"
