"""The index build's fast paths give what the plain ones give: the bulk ONNX encoder (token
ids sorted by length, small batches, one-thread lanes) against one pass per chunk, and its
lanes gated by a spare core; the vectorised synonym kNN against the per-pair loop."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from r2adapter.index.graph import synonym_edges

pytestmark = pytest.mark.unit  # but the one on Postgres (pg_env: integration)


def _texts() -> list[str]:
    rng = np.random.default_rng(3)
    words = "film director born married river city album song king queen war".split()
    return [
        " ".join(rng.choice(words, size=int(rng.integers(1, 40)))) + f" {i}" for i in range(300)
    ]


def test_bulk_lanes_give_the_one_pass_vectors_in_input_order() -> None:
    from r2adapter.index.encoder import Encoder

    enc = Encoder("minilm", backend="onnx")
    assert enc.backend == "onnx"
    texts = _texts()
    enc.lanes = 2
    bulk = enc.encode(texts)  # more texts than a batch: the lanes
    one = np.concatenate([enc._forward(texts[i : i + 16], 16) for i in range(0, 300, 16)])
    assert bulk.shape == (300, enc.dim) and bulk.dtype == np.float32
    assert np.abs(bulk - one).max() < 1e-6
    assert np.allclose(np.linalg.norm(bulk, axis=1), 1.0, atol=1e-5)


def test_a_second_lane_waits_for_the_spare_core() -> None:
    from r2adapter.index.encoder import Encoder

    enc = Encoder("minilm", backend="onnx")
    enc.lanes = 2
    onnx = enc._onnx
    assert onnx is not None
    run = onnx.run_ids
    threads: set[int] = set()
    spare = threading.Event()

    def counted(ids: Sequence[Sequence[int]], lane: bool = False) -> np.ndarray:
        threads.add(threading.get_ident())
        return run(ids, lane)

    onnx.run_ids = counted  # type: ignore[method-assign]
    alone = enc.encode(_texts(), spare_core=spare)  # never set: one lane does it all
    assert len(threads) == 1
    threads.clear()
    timer = threading.Timer(0.05, spare.set)
    timer.start()
    t = time.perf_counter()
    together = enc.encode(_texts() * 4, spare_core=spare)
    timer.join()
    assert time.perf_counter() - t > 0.05 and len(threads) == 2
    assert np.abs(together[:300] - alone).max() < 1e-6


def test_vectorised_synonyms_equal_the_per_pair_loop() -> None:
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(30, 24))
    x = centres[rng.integers(0, 30, 1500)] + rng.normal(scale=0.3, size=(1500, 24))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    emb = x.astype(np.float32)
    emb[7] = emb[5]  # an exact duplicate
    names = [f"entity {i}" if i % 13 else "ab" for i in range(1500)]
    for top_k, block in ((100, 2048), (10, 256), (3, 100)):  # crowded rows: top_k binds
        want = _per_pair(emb, names, 0.8, top_k, block)
        assert synonym_edges(emb, names, 0.8, top_k, block) == want
        assert want


def _per_pair(
    emb: np.ndarray, names: list[str], threshold: float, top_k: int, block: int
) -> list[tuple[int, int, float]]:
    """The loop synonym_edges replaced (as it was), the reference."""
    n = len(names)
    eligible = np.array([sum(c.isalnum() for c in name) > 2 for name in names])
    edges: dict[tuple[int, int], float] = {}
    k = min(top_k + 1, n)
    for start in range(0, n, block):
        sims = emb[start : start + block] @ emb.T
        idx = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        for row, cols in enumerate(idx):
            a = start + row
            if not eligible[a]:
                continue
            for b in cols:
                score = float(sims[row, b])
                if b != a and score >= threshold and eligible[b]:
                    key = (a, int(b)) if a < b else (int(b), a)
                    edges[key] = max(edges.get(key, 0.0), score)
    return [(a, b, s) for (a, b), s in sorted(edges.items())]


def test_a_narrative_of_one_insight_takes_its_vector() -> None:
    from r2adapter.adr.hypergraph import narrative_embeddings

    asked: list[tuple[str, list[str]]] = []

    def embed(kind: str, texts: list[str]) -> np.ndarray:
        asked.append((kind, list(texts)))
        return np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32).reshape(-1, 2)

    texts = ["T: a.", "T: bb.", "U: ccc."]
    emb = np.array([[1, 0], [0, 1], [0.6, 0.8]], dtype=np.float32)
    stories = ["T: bb.", "T: a. U: ccc.", "U: ccc."]
    got = narrative_embeddings(embed, stories, texts, emb)
    assert asked == [("narrative", ["T: a. U: ccc."])]
    assert got.tolist() == [[0, 1], [13, 1], [0.6000000238418579, 0.800000011920929]]
    asked.clear()
    assert narrative_embeddings(embed, ["x y"], texts, emb).tolist() == [[3, 1]]
    assert narrative_embeddings(embed, [], texts, emb).shape == (0, 2)


@pytest.mark.integration
def test_openie_beside_the_encoder_stores_what_it_extracts_inline(
    pg_env: dict[str, str], tmp_path: Path
) -> None:
    """spaCy OpenIE in its process of its own: the build's extractions are the backend's own
    (as an inline run gives them), read back from the cache it filled."""
    from r2adapter.index.build import build_index
    from r2adapter.index.openie_spacy import SpacyOpenIE
    from r2adapter.store import graph_store as gs
    from tests.conftest import make_mini_musique

    folder = make_mini_musique(tmp_path / "beside", n=8)
    r = build_index(folder, "spacy", log=lambda _: None, share=False)
    assert r.created and "openie_process" in r.timings
    passages = gs.stored_passages(r.dataset)
    ie = SpacyOpenIE()
    stored = gs.cached_extractions(ie.cache_key(), [p.id for p in passages])
    assert [stored[p.id] for p in passages] == ie.extract(passages)


def test_each_step_s_throughput_is_put_beside_its_limit() -> None:
    """index/throughput.py: tokens/s against the GEMM rate's tokens/s at the encoder's
    FLOPs a token; OpenIE's passages/s over its own process's seconds; steps without work
    or time are left out."""
    from types import SimpleNamespace

    from r2adapter.index.throughput import (
        MINILM_FLOPS_PER_TOKEN,
        flops_per_token,
        gemm_gflops,
        step_throughput,
    )

    assert 21.0e6 < MINILM_FLOPS_PER_TOKEN < 21.5e6  # MiniLM-L6: h 384, i 1,536, 6 layers
    cfg = SimpleNamespace(hidden_size=768, intermediate_size=3072, num_hidden_layers=12)
    assert flops_per_token([SimpleNamespace(auto_model=SimpleNamespace(config=cfg))]) == (
        2 * (4 * 768**2 + 2 * 768 * 3072) * 12
    )
    assert flops_per_token(object()) == MINILM_FLOPS_PER_TOKEN  # no config: MiniLM's
    assert gemm_gflops() > 1.0  # measured, and cached: the same figure twice
    assert gemm_gflops() == gemm_gflops()
    rates = step_throughput(
        {"fact_embeddings": {"tokens": 1e6}, "openie": {"passages": 780}, "synonyms": {}},
        {"fact_embeddings": 100.0, "openie": 0.5, "openie_process": 10.0},
        2e7,
        100.0,
    )
    assert rates["fact_embeddings"] == {
        "tokens": 1e6,
        "tokens_per_s": 1e4,
        "limit_tokens_per_s": 5000.0,
        "share_of_limit": 2.0,
    }
    assert rates["openie"] == {"passages": 780, "passages_per_s": 78.0, "cores": 1}
    assert "synonyms" not in rates
    assert rates["machine"] == {"gemm_gflops_fp32": 100.0, "encoder_mflops_per_token": 20.0}
