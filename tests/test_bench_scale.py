"""The growth benchmark's parts (benchmarks/bench_scale.py, ann_index.py): the in-memory ANN
index finds the exact neighbours in the caller's numbering, its work per query does not
grow with the number indexed, and the whole script runs and prints its JSON last."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.ann_index import IVFIndex, exact_top, quantize

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


def _clustered(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(n // 100, 4), 16)).astype(np.float32)
    z = centres[rng.integers(0, len(centres), n)] + 0.5 * rng.standard_normal((n, 16))
    x = z.astype(np.float32) @ rng.standard_normal((16, 64)).astype(np.float32)
    x += 0.1 * rng.standard_normal(x.shape).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_ivf_finds_the_exact_neighbours_in_the_callers_numbering() -> None:
    x = _clustered(20_000, 0)
    vec, scale = quantize(x)
    index = IVFIndex.build(vec, scale, list_size=256, seed=1)
    assert 0.8 * 78 <= index.nlist <= 1.2 * 78  # about n / list_size lists
    assert sorted(index.ids.tolist()) == list(range(20_000))
    queries = x[[3, 500, 7777, 19_999]]
    gold = index.ids[exact_top(index.vectors, index.scale, queries, 10)]
    hits = 0
    for q, want, own in zip(queries, gold, [3, 500, 7777, 19_999], strict=True):
        ids, scores = index.search(q, 10, nprobe=16)
        assert ids[0] == own and scores[0] == pytest.approx(1.0, abs=0.02)  # itself, first
        assert np.all(np.diff(scores) <= 1e-6)  # best first
        hits += len(set(ids.tolist()) & set(want.tolist()))
    assert hits / 40 >= 0.9
    # exhaustive probing is exact search
    ids, _ = index.search(queries[1], 10, nprobe=index.nlist, probe_top=len(index.top))
    assert set(ids.tolist()) == set(gold[1].tolist())


def test_ivf_reads_the_same_rows_whatever_the_size() -> None:
    """nprobe lists of about list_size rows: the vectors a query scores do not grow with n."""
    small, large = _clustered(5_000, 1), _clustered(50_000, 2)
    sizes = []
    for x in (small, large):
        index = IVFIndex.build(*quantize(x), list_size=250, seed=3)
        probed = np.sort(np.diff(index.list_ptr))[-8:].sum()  # the 8 largest lists, at most
        sizes.append(int(probed))
    assert sizes[1] < 3 * sizes[0]


def test_bench_scale_runs_and_prints_json_last(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            sys.executable,
            "benchmarks/bench_scale.py",
            "--sizes",
            "1000,3000",
            "--queries",
            "8",
            "--exact-queries",
            "4",
            "--hnsw-max",
            "0",
            "--out",
            str(tmp_path / "scale.json"),
        ],
        cwd=ROOT,
        env={**os.environ, "TQDM_DISABLE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    for n in ("1000", "3000"):
        row = out["sizes"][n]
        for key in ("graph_search_p50_ms", "ppr_local_p50_ms", "ppr_exact_p50_ms", "csr_mb"):
            assert row[key] > 0, key
        assert 0 <= row["top5_agreement"] <= 1 and row["ann_fact_recall_at_5"] > 0.5
    assert out["sizes"]["3000"]["csr_mb"] > 2 * out["sizes"]["1000"]["csr_mb"]
    assert "graph_search_p50_ms" in out["slopes"]
    assert (tmp_path / "scale.png").stat().st_size > 0
