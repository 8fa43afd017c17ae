"""Index build and retrieval against the real Postgres + pgvector, with the real encoder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import psycopg
import pytest

from r2adapter.data.adapters import load_dataset
from r2adapter.data.schema import Extraction
from r2adapter.errors import DataError, R2AError
from r2adapter.index.build import build_index
from r2adapter.index.graph import build_parts
from r2adapter.index.openie_precomputed import PrecomputedOpenIE, find_openie_file
from r2adapter.retrieve.dense import DenseRetriever, check_encoder
from r2adapter.retrieve.graph import GraphRetriever
from r2adapter.steps import index_extensions
from r2adapter.store import graph_store as gs
from r2adapter.store.db import connection
from r2adapter.store.load import load
from tests.conftest import run_cli

pytestmark = pytest.mark.integration  # the embedded Postgres


@pytest.fixture(scope="module")
def sample_index(pg_env: dict[str, str]) -> gs.IndexVersion:
    build_index("sample", "precomputed", log=lambda _: None, extensions=index_extensions())
    return gs.require_version("sample")


def test_index_counts_and_idempotence(sample_index: gs.IndexVersion) -> None:
    c = sample_index.counts
    assert c["passages"] == 3 and c["facts"] > 20 and c["entities"] > 15
    again = build_index("sample", "precomputed", log=lambda _: None, extensions=index_extensions())
    assert not again.created and again.version == sample_index.id
    with connection() as conn:
        n = conn.execute(
            "SELECT count(*) FROM passage_embeddings WHERE dataset='sample'"
        ).fetchone()[0]
        dim = conn.execute(
            "SELECT vector_dims(embedding) FROM passage_embeddings LIMIT 1"
        ).fetchone()[0]
        idx = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s",
            (gs.hnsw_index_name("sample", sample_index.encoder),),
        ).fetchone()
    assert (n, dim) == (3, 384)
    assert idx is not None and "hnsw" in idx[0] and "vector_cosine_ops" in idx[0]


def test_dense_and_graph_find_the_gold(sample_index: gs.IndexVersion) -> None:
    for retriever in (DenseRetriever("sample"), GraphRetriever("sample")):
        for question, title in (
            ("When was Thomas Christian Sudhof born?", "Thomas C. Sudhof"),
            ("Who founded BrainCheck?", "David Eagleman"),
        ):
            hits = retriever.retrieve(question, 3)
            assert len(hits) == 3 and hits[0].title == title, (retriever.mode, hits)
            assert hits[0].score >= hits[1].score >= hits[2].score


def test_graph_uses_the_facts(sample_index: gs.IndexVersion) -> None:
    g = GraphRetriever("sample")
    scores, graph, matched = g.scores(g.encoder.encode_query("Who won the Nobel Prize?"))
    assert matched and graph.transition.matrix.shape[0] == graph.n_nodes
    assert len(scores) == 3 and abs(scores.sum()) > 0


def test_bad_queries_and_unindexed_dataset(sample_index: gs.IndexVersion) -> None:
    from r2adapter import steps

    # checked at `r2a retrieve`'s door (steps.retrieve), not again by the retriever
    with pytest.raises(R2AError, match="empty"):
        steps.retrieve("sample", "   ", "dense")
    with pytest.raises(R2AError, match="limit is 2000"):
        steps.retrieve("sample", "x" * 2001, "graph")
    load(load_dataset("hotpotqa"))
    with pytest.raises(R2AError, match="run `r2a index --dataset hotpotqa` first"):
        DenseRetriever("hotpotqa")


def test_other_encoder_is_refused(sample_index: gs.IndexVersion) -> None:
    class Other:
        name, dim = "nvidia/NV-Embed-v2", 4096

    with pytest.raises(R2AError, match="built with all-MiniLM-L6-v2"):
        check_encoder(sample_index, Other())  # type: ignore[arg-type]


def test_int8_encoder_is_another_encoder(sample_index: gs.IndexVersion, tmp_path: Path) -> None:
    """encoder.backend onnx-int8: vectors close to fp32's but not the same, so an encoder of
    its own name that an fp32 index refuses, naming the rebuild (never a silent mix)."""
    from r2adapter.index.encoder import Encoder
    from r2adapter.index.onnx_encoder import for_sentence_transformer

    fp32, int8 = Encoder("minilm", backend="onnx"), Encoder("minilm", backend="onnx-int8")
    assert (int8.name, int8.backend, int8.dim) == ("all-MiniLM-L6-v2+int8", "onnx-int8", 384)
    texts = ["Who directed The Iron Mask?", "a long passage about a film " * 60, "x"]
    a, b = fp32.encode(texts), int8.encode(texts)
    cos = np.sum(a * b, axis=1)
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    assert cos.min() > 0.97 and np.abs(a - b).max() > 1e-4, cos  # close, not the same
    with pytest.raises(R2AError, match=r"rebuild it with `r2a index --dataset sample --rebuild`"):
        check_encoder(sample_index, int8)
    # quantised once beside the fp32 export, then reused
    q = for_sentence_transformer(fp32.model, str(_minilm_dir()), tmp_path, 1, int8=True)
    assert q.path.name.endswith("-int8.onnx") and len(list(tmp_path.glob("*.onnx"))) == 2
    mtime = q.path.stat().st_mtime_ns
    again = for_sentence_transformer(fp32.model, str(_minilm_dir()), tmp_path, 1, int8=True)
    assert again.path == q.path and q.path.stat().st_mtime_ns == mtime
    assert float(np.sum(again.run(texts[:1]) * b[:1])) > 0.99


def test_graph_in_memory_serves_while_the_database_is_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GraphCache's version check fails with the database down: the graph in memory serves
    (routing reads only its embeddings), and with none loaded the error is the database's."""
    from r2adapter.errors import DatabaseError
    from r2adapter.retrieve.graph_index import GraphCache

    def down(dataset: str) -> gs.IndexVersion:
        raise DatabaseError("database error at postgresql://…: connection refused")

    monkeypatch.setattr(gs, "require_version", down)
    cache = GraphCache(check_every_s=0.0)  # every call checks the version
    loaded = object()
    cache._graphs["sample"] = loaded  # type: ignore[assignment]  # loaded before it went down
    assert cache.get("sample") is loaded and cache.get("sample") is loaded
    with pytest.raises(DatabaseError, match="connection refused"):
        cache.get("musique")


def test_openie_file_that_does_not_match_the_corpus(pg_env: dict[str, str]) -> None:
    ds = load_dataset("musique")
    backend = PrecomputedOpenIE(find_openie_file(Path(ds.files["corpus"]).parent), ds.passages)
    with pytest.raises(DataError, match="does not match the corpus: 3 of 3"):
        backend.extract(load_dataset("sample").passages)


def test_failed_build_keeps_previous_index(sample_index: gs.IndexVersion) -> None:
    parts = build_parts(["x"], [Extraction([], [("a", "r\u0000", "c")])])
    with pytest.raises(psycopg.Error):
        gs.write_version("sample", "all-MiniLM-L6-v2", 384, "test", "sig", parts, [], {}, {})
    latest = gs.require_version("sample")
    assert latest.id == sample_index.id
    assert GraphRetriever("sample").retrieve("Alzheimer's", 1)


def test_cli_index_retrieve_evaluate(sample_index: gs.IndexVersion, pg_env: dict[str, str]) -> None:
    r = run_cli(["index", "--dataset", "sample", "--openie", "precomputed"], pg_env)
    assert r.returncode == 0 and "up to date" in r.stdout, r.stderr
    r = run_cli(["evaluate", "retrieval", "--dataset", "sample", "--json"], pg_env)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["n_queries"] == 1 and list(report["modes"]) == ["dense", "graph", "catrag"]
    for m in report["modes"].values():
        assert {"recall@2", "recall@5", "fcr@2", "fcr@5", "latency_ms_p50"} <= set(m)
        assert m["recall@5"] == 1.0
    r = run_cli(["retrieve", "--dataset", "sample", "--mode", "graph", " "], pg_env)
    assert r.returncode == 1 and r.stderr.strip().startswith("error: the query is empty:")
    r = run_cli(["retrieve", "--dataset", "musique", "Who?"], pg_env)
    assert r.returncode == 1 and "run `r2a index --dataset musique` first" in r.stderr


def test_onnx_encoder_gives_the_torch_embeddings(tmp_path: Path) -> None:
    from r2adapter.index.encoder import Encoder
    from r2adapter.index.onnx_encoder import for_sentence_transformer

    torch_enc = Encoder("minilm", backend="torch")
    onnx_enc = Encoder("minilm", backend="onnx")
    assert (torch_enc.backend, onnx_enc.backend) == ("torch", "onnx")
    texts = ["Who directed The Iron Mask?", "a long passage about a film " * 60, "x"]
    diff = np.abs(onnx_enc.encode(texts) - torch_enc.encode(texts)).max()
    assert diff < 1e-5
    # a fresh cache folder: exported once, then reused
    a = for_sentence_transformer(torch_enc.model, str(_minilm_dir()), tmp_path, 1)
    mtime = a.path.stat().st_mtime_ns
    b = for_sentence_transformer(torch_enc.model, str(_minilm_dir()), tmp_path, 1)
    assert b.path == a.path and b.path.stat().st_mtime_ns == mtime
    assert np.abs(b.run(texts[:1]) - torch_enc.encode(texts[:1])).max() < 1e-5


def test_onnx_encoder_runs_from_several_threads_at_once() -> None:
    """The service's routing lanes encode at the same time (no encoder-wide lock on ONNX):
    eight threads, each its own texts, each the vectors it gets alone; the passes overlap."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from r2adapter.index.encoder import Encoder

    enc = Encoder("minilm", backend="onnx")
    assert enc.backend == "onnx"
    texts = [[f"Who directed film number {i}-{j}?" for j in range(i + 1)] for i in range(8)]
    alone = [enc.encode(t) for t in texts]
    active, peak = 0, 0
    lock = threading.Lock()
    run = enc._onnx.run  # type: ignore[union-attr]

    def counted(batch: list[str]) -> np.ndarray:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        try:
            time.sleep(0.02)  # hold the pass long enough for others to start
            return run(batch)
        finally:
            with lock:
                active -= 1

    enc._onnx.run = counted  # type: ignore[union-attr,method-assign]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(enc.encode, texts))
    for a, b in zip(alone, together, strict=True):
        assert np.abs(a - b).max() < 1e-6
    assert peak > 1, "the passes did not overlap: a lock still serialises them"


def _minilm_dir() -> Path:
    from r2adapter.index.encoder import _minilm_path

    return _minilm_path()
