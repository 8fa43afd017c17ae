"""Local Personalized PageRank by forward push (Andersen, Chung and Lang, FOCS 2006).

The exact solver (`ppr.py`) multiplies by the whole transition matrix on every iteration, so
a query costs time linear in the graph. Forward push keeps an estimate p and a residual r
(r starts as the normalised reset vector) and repeatedly *pushes* a node u whose residual
exceeds `r_max` × its degree: p_u += (1 − d)·r_u, and d·r_u spreads to u's neighbours in
proportion to the edge weights (column u of P). Every push keeps the invariant

    ppr = p + PPR(r)          (PPR is linear in the reset vector)

so the L1 error of p is at most Σr, the residual left when no node exceeds its threshold.
Pushing stops when r_u ≤ r_max·deg(u) everywhere, so Σr ≤ r_max·Σ_touched deg(u) and the
number of pushes is at most 1 / ((1 − d)·r_max) (each push settles at least
(1 − d)·r_max·deg(u) of mass): the work depends on r_max and the seeds' neighbourhood, not on
the size of the graph. Like the exact solver, a node without edges keeps only its own share
and the result is normalised once at the end (the same fixed point, since a dangling node's
mass returns to the reset distribution in proportion).

The pushes run frontier by frontier (every node over its threshold at once), in numpy: the
same invariant and bound, fewer Python steps. Workspace arrays are allocated once per graph
and thread and cleared where they were touched, so a query never allocates O(n).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from r2adapter.config import PPR_R_MAX_RANGE as R_MAX_RANGE


@dataclass(frozen=True)
class LocalPPRResult:
    """PPR mass on the nodes the push touched (caller's numbering); every other node has
    (approximately) none. `residual` is the L1 mass not yet pushed: the estimate before
    normalisation is within `residual` of the exact one in L1."""

    nodes: np.ndarray  # int64, caller's node ids, sorted
    values: np.ndarray  # float64, summing to one
    residual: float
    pushes: int

    def dense(self, n: int) -> np.ndarray:
        out = np.zeros(n, dtype=np.float64)
        out[self.nodes] = self.values
        return out


class ForwardPush:
    """Forward-push PPR over a column-stochastic transition in a permuted node order (the
    `Transition` of `ppr.py`): `matrix[j, i] = P[j, i]`, node `perm[k]` at position k."""

    def __init__(self, matrix: sp.csr_matrix, perm: np.ndarray, inv: np.ndarray) -> None:
        # row u of Pᵀ is column u of P: where u's mass goes, and with what share
        self.out = sp.csr_matrix(matrix.T, dtype=np.float64)
        self.out.sort_indices()
        self.degree = np.diff(self.out.indptr).astype(np.float64)
        self.perm = perm
        self.inv = inv
        self.n = int(matrix.shape[0])
        self._local = threading.local()

    def _workspace(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ws = getattr(self._local, "ws", None)
        if ws is None:
            ws = (
                np.zeros(self.n, dtype=np.float64),
                np.zeros(self.n, dtype=np.float64),
                np.zeros(self.n, dtype=np.int64),
            )
            self._local.ws = ws
        return ws

    @staticmethod
    def _distinct(ids: np.ndarray, slot: np.ndarray) -> np.ndarray:
        """The distinct values of `ids` (unordered) in O(len(ids)), no sort: each value's
        last position wins its `slot`, and that position keeps it. `slot` is scratch."""
        at = np.arange(len(ids), dtype=np.int64)
        slot[ids] = at
        return ids[slot[ids] == at]

    def solve(
        self,
        seeds: np.ndarray,
        mass: np.ndarray,
        damping: float = 0.5,
        r_max: float = 1e-6,
        max_pushes: int = 10_000_000,
        replace: dict[int, tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> LocalPPRResult:
        """PPR from a sparse reset vector (`seeds` in the caller's numbering, `mass` ≥ 0).

        `replace`: edited columns of the transition (CatRAG's query-adapted operator P′),
        position → (target positions, the column's new values), both in the permuted order;
        an edited node pushes along its new column instead of its stored one. The invariant
        and the bound hold for P′ as for P (an empty new column is a dangling node)."""
        if not 0.0 < damping < 1.0:
            raise ValueError("damping must be in (0, 1)")
        if not R_MAX_RANGE[0] <= r_max <= R_MAX_RANGE[1]:
            raise ValueError(f"r_max must be in [{R_MAX_RANGE[0]:g}, {R_MAX_RANGE[1]:g}]")
        seeds = np.asarray(seeds, dtype=np.int64)
        mass = np.asarray(mass, dtype=np.float64)
        keep = mass > 0
        seeds, mass = seeds[keep], mass[keep]
        total = float(mass.sum())
        if total <= 0:
            raise ValueError("reset vector has no mass")
        alpha = 1.0 - damping
        p, r, slot = self._workspace()
        start = self.inv[seeds]
        np.add.at(r, start, mass / total)
        touched = [self._distinct(start, slot)]
        frontier = touched[0][r[touched[0]] > r_max * self.degree[touched[0]]]
        pushes = 0
        indptr, indices, data = self.out.indptr, self.out.indices, self.out.data
        edited = np.array(sorted(replace), dtype=np.int64) if replace else None
        try:
            while frontier.size and pushes < max_pushes:
                pushes += int(frontier.size)
                rf = r[frontier].copy()
                r[frontier] = 0.0
                p[frontier] += alpha * rf
                lo, hi = indptr[frontier], indptr[frontier + 1]
                spread: list[np.ndarray] = []
                if edited is not None:  # edited nodes push along their new column
                    is_ed = np.isin(frontier, edited)
                    for u, ru in zip(frontier[is_ed].tolist(), rf[is_ed].tolist(), strict=True):
                        targets, values = replace[u]  # type: ignore[index]
                        np.add.at(r, targets, damping * ru * values)
                        spread.append(targets)
                    hi = np.where(is_ed, lo, hi)
                counts = hi - lo
                if counts.sum():
                    # the rows of the frontier, gathered without building a sub-matrix
                    offsets = np.repeat(lo - np.cumsum(counts) + counts, counts)
                    pos = np.arange(int(counts.sum()), dtype=np.int64) + offsets
                    cols = indices[pos]
                    np.add.at(r, cols, damping * np.repeat(rf, counts) * data[pos])
                    spread.append(cols)
                if not spread:
                    break
                cand = self._distinct(np.concatenate(spread), slot)
                touched.append(cand)
                frontier = cand[r[cand] > r_max * self.degree[cand]]
            nodes = self._distinct(np.concatenate(touched), slot)
            values = p[nodes].copy()
            residual = float(r[nodes].sum())
        finally:
            for t in touched:  # clear only what this query wrote
                p[t] = 0.0
                r[t] = 0.0
        order = self.perm[nodes]
        sort = np.argsort(order, kind="stable")
        s = float(values.sum())
        return LocalPPRResult(
            order[sort], values[sort] / s if s > 0 else values[sort], residual, pushes
        )
