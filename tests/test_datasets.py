"""Every adapter on every shipped dataset, with exact counts, and format detection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from r2adapter.data.adapters import load_dataset
from r2adapter.data.schema import passage_id
from r2adapter.errors import DataError

pytestmark = pytest.mark.unit  # no Postgres, no server

EXPECTED = {
    # name: (passages, queries, complete gold, corpus format, query format)
    "2wikimultihopqa": (6119, 1000, 860, "hipporag_list", "2wiki_derived"),
    "musique": (1890, 100, 100, "hipporag_list", "paragraphs_is_supporting"),
    "hotpotqa": (994, 100, 100, "hotpotqa_sentences", "hotpotqa"),
    "sample": (3, 1, 1, "hipporag_list", "paragraphs_is_supporting"),
    # issue 24: HotpotQA dev (distractor) with its corpus as a {title, text} list, and
    # MuSiQue-Ans dev with its gold decompositions
    "hotpotqa_dev": (5809, 590, 590, "hipporag_list", "hotpotqa"),
    "musique_dev": (3025, 192, 192, "hipporag_list", "paragraphs_is_supporting"),
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_adapter_counts(name: str) -> None:
    n_p, n_q, n_c, cfmt, qfmt = EXPECTED[name]
    ds = load_dataset(name)
    assert (len(ds.passages), len(ds.queries), ds.n_complete) == (n_p, n_q, n_c)
    assert (ds.corpus_format, ds.query_format) == (cfmt, qfmt)
    ids = {p.id for p in ds.passages}
    assert len(ids) == n_p
    for q in ds.queries:
        if q.gold_complete:
            assert q.gold_passage_ids and set(q.gold_passage_ids) <= ids, q.id


def test_musique_identity_is_title_plus_text() -> None:
    ds = load_dataset("musique")
    assert len({p.title for p in ds.passages}) == 1764
    by_id = {p.id: p for p in ds.passages}
    raw = json.loads((Path(ds.files["queries"])).read_text())
    # gold matched by text: each supporting paragraph's text is the gold passage's text
    for rec, q in zip(raw, ds.queries, strict=True):
        texts = {p["paragraph_text"] for p in rec["paragraphs"] if p["is_supporting"]}
        assert {by_id[g].text for g in q.gold_passage_ids} == texts


def test_sample_ids_match_hipporag_chunk_ids() -> None:
    ds = load_dataset("sample")
    openie = json.loads(
        (Path(ds.files["corpus"]).parent / "sample_openie_gpt-4o-mini.json").read_text()
    )
    assert {d["idx"] for d in openie["docs"]} == {p.id for p in ds.passages}
    assert passage_id("T", "x") != passage_id("T", "y")


def test_hotpotqa_gold_from_supporting_facts() -> None:
    ds = load_dataset("hotpotqa")
    q = ds.queries[0]
    titles = {p.id: p.title for p in ds.passages}
    assert {titles[g] for g in q.gold_passage_ids} == {"Alû", "Lilu (mythology)"}
    assert q.type in {"bridge", "comparison"}


def _write(folder: Path, queries: object, corpus: object) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{folder.name}.json").write_text(json.dumps(queries))
    (folder / f"{folder.name}_corpus.json").write_text(json.dumps(corpus))
    return str(folder)


def test_folder_path_and_detection(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "mini",
        [
            {
                "id": "q1",
                "question": "Who?",
                "answers": ["A"],
                "gold_titles": ["T"],
                "gold_complete": True,
            }
        ],
        [{"title": "T", "text": "A is here."}],
    )
    ds = load_dataset(path)
    assert ds.name == "mini" and ds.query_format == "2wiki_derived"
    assert ds.queries[0].gold_passage_ids == [passage_id("T", "A is here.")]


@pytest.mark.parametrize(
    ("queries", "corpus", "message"),
    [
        ([{"foo": 1}], [{"title": "T", "text": "t"}], "unknown query format"),
        ([{"id": "q"}], {"a": 1}, "unknown corpus format"),
        ([{"id": "q", "gold_titles": []}], [{"title": "T", "text": "t"}], "lacks 'question'"),
        (
            [{"id": "q", "question": "?", "answers": [], "gold_titles": [], "gold_complete": 1}],
            [{"title": "T", "text": 3}],
            "record 0 is not an object with string 'title'",
        ),
    ],
)
def test_bad_formats_are_refused_by_name(
    tmp_path: Path, queries: object, corpus: object, message: str
) -> None:
    path = _write(tmp_path / "bad", queries, corpus)
    with pytest.raises(DataError, match=message):
        load_dataset(path)


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    folder = tmp_path / "x"
    folder.mkdir()
    with pytest.raises(DataError, match=r"x_corpus\.json: file not found"):
        load_dataset(str(folder))
    (folder / "x_corpus.json").write_text('[{"title": "T", "text": "t"}]')
    (folder / "x.json").write_text("{bad")
    with pytest.raises(DataError, match=r"x\.json: malformed JSON at line 1"):
        load_dataset(str(folder))


def test_musique_dev_keeps_every_hop_and_its_paragraph() -> None:
    """Every MuSiQue dev question's gold is its decomposition's supporting paragraphs (2-4
    hops), so the decomposition scores (r2adapter/rewrite/score.py) and Recall read the
    same chain."""
    ds = load_dataset("musique_dev")
    raw = json.loads((Path(ds.files["queries"])).read_text())
    hops = {r["id"]: len(r["question_decomposition"]) for r in raw}
    assert sorted(set(hops.values())) == [2, 3, 4]
    by_id = {q.id: q for q in ds.queries}
    for rid, n in hops.items():
        assert 2 <= len(by_id[rid].gold_passage_ids) <= n
