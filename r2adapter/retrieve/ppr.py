"""Personalized PageRank by power iteration on a scipy CSR (HippoRAG 2's graph search).

Same fixed point as igraph's prpack with a reset vector: a walker continues along a
weighted edge with probability `damping`, else jumps to the reset distribution; a node
without edges sends its mass to the reset distribution too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class Transition:
    """Column-stochastic transition of an undirected weighted graph, ready for PPR."""

    matrix: sp.csr_matrix  # P[j, i] = w(i, j) / strength(i)
    dangling: np.ndarray  # bool per node: no edges

    @classmethod
    def from_edges(cls, n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> Transition:
        # undirected: each edge both ways; duplicate pairs add up
        rows = np.concatenate([src, dst])
        cols = np.concatenate([dst, src])
        w = np.concatenate([weight, weight]).astype(np.float64)
        adj = sp.csr_matrix((w, (rows, cols)), shape=(n, n))
        adj.sum_duplicates()
        strength = np.asarray(adj.sum(axis=1)).ravel()
        inv = np.divide(1.0, strength, out=np.zeros_like(strength), where=strength > 0)
        # adj is symmetric, so adj @ diag(1/strength) is P with columns summing to one
        matrix = (adj @ sp.diags(inv)).tocsr()
        return cls(matrix, strength == 0)


def personalized_pagerank(
    t: Transition,
    reset: np.ndarray,
    damping: float = 0.5,
    tol: float = 1e-7,
    max_iter: int = 100,
) -> np.ndarray:
    """Power iteration on y ← d·P·y + (1 − d)·r, returned as y / Σy.

    Dropping the dangling correction inside the loop and normalising once at the end gives
    the same fixed point (a dangling node's mass goes back in proportion to r). The loop
    stops when the L1 change is below `tol`, which bounds the L1 error by tol·d/(1 − d).
    """
    total = float(reset.sum())
    if total <= 0:
        raise ValueError("reset vector has no mass")
    base = reset.astype(np.float64) * ((1.0 - damping) / total)
    y = base.copy()
    for _ in range(max_iter):
        nxt = t.matrix @ y
        nxt *= damping
        nxt += base
        diff = float(np.abs(nxt - y).sum())
        y = nxt
        if diff < tol:
            break
    return y / y.sum()
