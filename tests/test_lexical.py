"""The lexical retriever (BM25 over an index version's lexicon, scored in Postgres) and the
`hybrid` strategy (dense ∪ lexical, reciprocal-rank fused), against a Python reference."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest

from r2adapter.config import LexicalParams, lexical_params
from r2adapter.errors import R2AError
from r2adapter.index.lexicon import STOPWORDS, ensure_lexicon, terms
from tests.conftest import run_cli

pytestmark = pytest.mark.unit


def test_terms_fold_accents_and_drop_function_words() -> None:
    assert terms("Who directed Amélie (2001)?") == ["directed", "amelie", "2001"]
    assert terms("The Beyoncé album's name") == ["beyonce", "album", "s"]
    assert terms("what is the") == []
    assert not STOPWORDS & set(terms(" ".join(sorted(STOPWORDS)) + " film"))


@pytest.mark.parametrize("body", [{"k1": -0.5}, {"b": 1.5}, {"b": -0.1}])
def test_bm25_parameters_are_checked(body: dict[str, float]) -> None:
    with pytest.raises(R2AError, match="lexical"):
        lexical_params({"lexical": body})


def test_defaults_are_robertsons() -> None:
    assert LexicalParams() == LexicalParams(k1=1.2, b=0.75)
    assert lexical_params({}) == LexicalParams()


def _reference_bm25(
    docs: dict[str, list[str]], query: str, k1: float = 1.2, b: float = 0.75
) -> dict[str, float]:
    """BM25 as Lucene scores it, in plain Python: what Postgres must reproduce."""
    n = len(docs)
    avg = sum(len(d) for d in docs.values()) / n
    df = Counter(t for d in docs.values() for t in set(d))
    out: dict[str, float] = {}
    for pid, d in docs.items():
        tf = Counter(d)
        s = 0.0
        for t in set(terms(query)):
            if tf[t]:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(d) / avg))
        if s > 0:
            out[pid] = s
    return out


@pytest.mark.integration
def test_postgres_bm25_matches_the_reference(mini_indexed: str) -> None:
    from r2adapter.retrieve.lexical import LexicalRetriever
    from r2adapter.store import graph_store as gs
    from r2adapter.store.db import connection

    name = Path(mini_indexed).name
    version = gs.require_version(name)
    with connection() as conn:
        rows = conn.execute(
            "SELECT id, title, text FROM passages WHERE dataset = %s", (version.dataset,)
        ).fetchall()
    docs = {pid: terms(f"{title}\n{text}") for pid, title, text in rows}
    questions = [
        q["question"] for q in json.loads((Path(mini_indexed) / f"{name}.json").read_text())
    ]
    r = LexicalRetriever(name)
    for question in questions[:15]:
        ref = _reference_bm25(docs, question)
        want = sorted(ref, key=lambda p: (-ref[p], p))[:10]
        got = r.retrieve(question, 10)
        assert [h.passage_id for h in got] == want, question
        for h in got:
            assert h.score == pytest.approx(ref[h.passage_id], rel=1e-9)
            assert h.title and h.text  # the passage as the reader gets it
    assert r.retrieve("what is the", 5) == []  # function words only: nothing to match


@pytest.mark.integration
def test_the_lexicon_is_built_once_per_index_version(mini_indexed: str) -> None:
    from r2adapter.store import graph_store as gs
    from r2adapter.store.db import connection

    version = gs.require_version(Path(mini_indexed).name)
    first = ensure_lexicon(version.id, version.dataset)
    with connection() as conn:
        n_rows = conn.execute(
            "SELECT count(*) FROM lexicon_postings WHERE index_version = %s", (version.id,)
        ).fetchone()[0]
        n_passages = conn.execute(
            "SELECT count(*) FROM passages WHERE dataset = %s", (version.dataset,)
        ).fetchone()[0]
    again = ensure_lexicon(version.id, version.dataset)
    with connection() as conn:
        n_again = conn.execute(
            "SELECT count(*) FROM lexicon_postings WHERE index_version = %s", (version.id,)
        ).fetchone()[0]
    assert again == first and n_again == n_rows > n_passages
    assert first.n_docs == n_passages and first.avg_length > 10


@pytest.mark.integration
def test_hybrid_fuses_dense_and_lexical(mini_indexed: str, pg_env: dict[str, str]) -> None:
    from r2adapter.retrieve.dense import DenseRetriever
    from r2adapter.retrieve.fusion import rrf
    from r2adapter.retrieve.lexical import LexicalRetriever

    name = Path(mini_indexed).name
    q = json.loads((Path(mini_indexed) / f"{name}.json").read_text())[0]["question"]
    r = run_cli(["retrieve", "--dataset", mini_indexed, "--mode", "hybrid", "--top-k", "4",
                 "--json", q], pg_env)  # fmt: skip
    assert r.returncode == 0, r.stderr[-1500:]
    got = [h["passage_id"] for h in json.loads(r.stdout)["hits"]]
    dense = [h.passage_id for h in DenseRetriever(name).retrieve(q, 20)]
    lexical = [h.passage_id for h in LexicalRetriever(name).retrieve(q, 20)]
    assert got == rrf([dense, lexical], 60)[:4]
