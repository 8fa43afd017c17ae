"""An in-memory approximate nearest-neighbour index for the growth benchmark: an inverted
file (IVF) under a two-level coarse quantizer, over unit vectors stored as int8 (scalar
quantized, a scale per vector: a quarter of float32's memory; converting int8 to float32 for
a product is fast where float16 is not).

Vectors fall into lists of about `list_size`; a query scans the √nlist top-level centroids,
the fine centroids of its `probe_top` best top-level cells, then the vectors of its `nprobe`
best lists. With the list size and nprobe fixed, a query reads about nprobe × list_size
vectors whatever the number indexed (plus two centroid scans of O(√nlist)): the similarity
of a query to every fact (a product over all F facts) becomes one whose cost does not grow
with the corpus. Building costs one pass of (√nlist + √nlist) products per vector: seconds
per million on 2 cores, where a graph index (HNSW) over tens of millions takes hours.

Centroids are trained on a sample (a few Lloyd iterations for the top level; fine centroids
drawn from each cell's sample, one Lloyd step): the coarse quantizer only has to spread the
vectors evenly, recall comes from nprobe, measured against exact search by the benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _lloyd(x: np.ndarray, k: int, iters: int, rng: np.random.Generator) -> np.ndarray:
    """Spherical k-means on `x` (unit rows), k centroids, starting from k of its points."""
    c = x[rng.choice(len(x), k, replace=False)].copy()
    for _ in range(iters):
        a = np.argmax(x @ c.T, axis=1)
        sums = np.zeros_like(c)
        np.add.at(sums, a, x)
        norm = np.linalg.norm(sums, axis=1, keepdims=True)
        empty = norm[:, 0] == 0
        c[~empty] = sums[~empty] / norm[~empty]
    return c


@dataclass
class IVFIndex:
    vectors: np.ndarray  # (n, d) int8: round(x · 127 / max|x|) per row, in list order
    scale: np.ndarray  # (n,) float32: x ≈ vectors[i] · scale[i]
    top: np.ndarray  # (c1, d) float32 top-level centroids
    fine: list[np.ndarray]  # per top-level cell: its fine centroids (float32)
    fine_offset: np.ndarray  # list id of cell c's first fine centroid
    list_ptr: np.ndarray  # list l is rows ptr[l]:ptr[l+1] of `vectors` (contiguous)
    ids: np.ndarray  # row → the caller's id
    build_s: float = 0.0

    @classmethod
    def build(
        cls,
        vectors: np.ndarray,
        scale: np.ndarray,
        list_size: int = 512,
        seed: int = 0,
        chunk: int = 262_144,
    ) -> IVFIndex:
        import time

        t0 = time.perf_counter()
        rng = np.random.default_rng(seed)
        n = len(vectors)
        nlist = max(1, n // list_size)
        c1 = max(1, int(round(np.sqrt(nlist))))
        pick = rng.choice(n, min(n, max(40 * nlist, 20 * c1), 200_000), replace=False)
        sample = vectors[pick].astype(np.float32) * scale[pick, None]
        top = _lloyd(sample, c1, 5, rng)
        cell = np.argmax(sample @ top.T, axis=1)
        counts = np.bincount(cell, minlength=c1)
        # fine centroids per cell in proportion to its share of the sample (at least one)
        per = np.maximum(1, np.round(nlist * counts / counts.sum()).astype(np.int64))
        fine: list[np.ndarray] = []
        for c in range(c1):
            pts = sample[cell == c]
            if len(pts) == 0:
                fine.append(top[c : c + 1].copy())
                continue
            k = int(min(per[c], len(pts)))
            fine.append(_lloyd(pts, k, 1, rng))
        offset = np.concatenate([[0], np.cumsum([len(f) for f in fine])]).astype(np.int64)
        assign = np.empty(n, dtype=np.int64)
        for lo in range(0, n, chunk):
            x = vectors[lo : lo + chunk].astype(np.float32)  # the scale does not change an argmax
            a1 = np.argmax(x @ top.T, axis=1)
            out = np.empty(len(x), dtype=np.int64)
            for c in np.unique(a1).tolist():
                at = np.flatnonzero(a1 == c)
                out[at] = offset[c] + np.argmax(x[at] @ fine[c].T, axis=1)
            assign[lo : lo + chunk] = out
        order = np.argsort(assign, kind="stable")
        ptr = np.searchsorted(assign[order], np.arange(int(offset[-1]) + 1))
        # a copy in list order: a probed list is one contiguous slice (the caller drops its own)
        return cls(
            vectors[order], scale[order], top, fine, offset, ptr, order, time.perf_counter() - t0
        )

    @property
    def nlist(self) -> int:
        return len(self.list_ptr) - 1

    def search(
        self, q: np.ndarray, k: int, nprobe: int = 16, probe_top: int = 16
    ) -> tuple[np.ndarray, np.ndarray]:
        """(ids, inner products) of the approximate top k, best first."""
        s1 = self.top @ q
        cells = np.argsort(-s1)[: min(probe_top, len(s1))]
        cand = np.concatenate([self.fine[c] for c in cells.tolist()])
        ids = np.concatenate(
            [self.fine_offset[c] + np.arange(len(self.fine[c])) for c in cells.tolist()]
        )
        s2 = cand @ q
        best = ids[np.argsort(-s2)[: min(nprobe, len(s2))]]
        rows, parts = [], []
        for b in best.tolist():
            lo, hi = int(self.list_ptr[b]), int(self.list_ptr[b + 1])
            parts.append((self.vectors[lo:hi].astype(np.float32) @ q) * self.scale[lo:hi])
            rows.append(np.arange(lo, hi))
        scores, at = np.concatenate(parts), np.concatenate(rows)
        top = np.argsort(-scores)[:k]
        return self.ids[at[top]], scores[top]


def quantize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float rows → (int8 rows, float32 scale per row)."""
    scale = np.abs(x).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    return np.round(x / scale[:, None]).astype(np.int8), scale.astype(np.float32)


def exact_top(
    vectors: np.ndarray, scale: np.ndarray, queries: np.ndarray, k: int, chunk: int = 262_144
) -> np.ndarray:
    """Exact top-k ids per query (rows of `queries`) by inner product over the stored
    (quantized) vectors, in chunks."""
    best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), 0), dtype=np.int64)
    for lo in range(0, len(vectors), chunk):
        s = (queries @ vectors[lo : lo + chunk].astype(np.float32).T) * scale[lo : lo + chunk]
        part = np.argpartition(-s, min(k, s.shape[1] - 1), axis=1)[:, :k]
        best_s = np.concatenate([best_s, np.take_along_axis(s, part, 1)], axis=1)
        best_i = np.concatenate([best_i, part + lo], axis=1)
        keep = np.argsort(-best_s, axis=1)[:, :k]
        best_s = np.take_along_axis(best_s, keep, 1)
        best_i = np.take_along_axis(best_i, keep, 1)
    return best_i
