"""The CLI at the data's edges (issue 13, item 6): each malformed input is one line on stderr
naming the problem and a non-zero exit, through the real `r2a`; and the reports `--report`
writes keep the keys DVC reads."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from r2adapter.data.schema import MAX_PASSAGE_CHARS, Passage
from r2adapter.retrieve.base import query_problem
from tests.conftest import R2A, ROOT, run_cli


def _dataset(folder: Path, corpus: object, queries: object | None = None) -> str:
    """A folder dataset in the derived 2Wiki format (its queries name gold by title)."""
    folder.mkdir(parents=True, exist_ok=True)
    if queries is None:
        queries = [
            {
                "id": "q1",
                "question": "Who is here?",
                "answers": ["A"],
                "gold_titles": ["T"],
                "gold_complete": True,
            }
        ]
    (folder / f"{folder.name}.json").write_text(json.dumps(queries))
    (folder / f"{folder.name}_corpus.json").write_text(
        corpus if isinstance(corpus, str) else json.dumps(corpus)
    )
    return str(folder)


def _one_line_error(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "internal error" not in r.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.integration
def test_json_nested_100000_deep_is_one_line(pg_env: dict[str, str], tmp_path: Path) -> None:
    path = _dataset(tmp_path / "deep", "[" * 100_000 + "]" * 100_000)
    for command in ("validate", "load"):
        r = run_cli(["data", command, "--dataset", path], pg_env)
        _one_line_error(r, "deep_corpus.json", "nested too deeply")


@pytest.mark.integration
def test_empty_corpus_is_named_empty(pg_env: dict[str, str], tmp_path: Path) -> None:
    r = run_cli(["data", "validate", "--dataset", _dataset(tmp_path / "e", [])], pg_env)
    _one_line_error(r, "e_corpus.json", "the corpus is empty")
    assert "unknown corpus format" not in r.stderr
    r = run_cli(
        [
            "data",
            "load",
            "--dataset",
            _dataset(tmp_path / "nq", [{"title": "T", "text": "A."}], []),
        ],
        pg_env,
    )
    _one_line_error(r, "nq.json", "no queries")


@pytest.mark.integration
def test_blank_dataset_name_is_refused(pg_env: dict[str, str], tmp_path: Path) -> None:
    # run from a folder holding a dataset of its own name: "" must not resolve to it
    here = Path(_dataset(tmp_path / "cwd", [{"title": "T", "text": "A is here."}]))
    for args in (
        ["data", "validate", "--dataset", ""],
        ["data", "load", "--dataset", " "],
        ["retrieve", "--dataset", "", "Who is here?"],
    ):
        r = subprocess.run(
            [*R2A, *args],
            env={**pg_env, "PYTHONPATH": str(ROOT)},
            cwd=here,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        _one_line_error(r, "--dataset is empty")


@pytest.mark.integration
def test_duplicate_passages_load_refuses_as_validate_fails(
    pg_env: dict[str, str], tmp_path: Path
) -> None:
    t = {"title": "T", "text": "A is here."}
    other = {"title": "U", "text": "B is there."}
    retitled = {"title": "V", "text": "B is there."}
    path = _dataset(tmp_path / "dups", [t, other, dict(t), retitled])
    r = run_cli(["data", "validate", "--dataset", path], pg_env)
    assert r.returncode == 1 and "expect_column_values_to_be_unique(id)" in r.stderr
    r = run_cli(["data", "load", "--dataset", path], pg_env)
    _one_line_error(
        r,
        "not loaded, nothing written",
        "1 passage(s) repeat another's title and text (e.g. 'T')",
        "1 passage(s) repeat another's text under another title (e.g. 'V')",
    )
    # nothing was written: the first load of the repaired corpus adds every passage
    _dataset(tmp_path / "dups", [t, other])
    r = run_cli(["data", "load", "--dataset", path], pg_env)
    assert r.returncode == 0 and "dups: passages +2 -0, queries +1" in r.stdout, r.stdout


@pytest.mark.integration
def test_long_passage_is_refused_by_validate_load_and_index(
    pg_env: dict[str, str], tmp_path: Path
) -> None:
    long = {"title": "Long", "text": "Ann was born in Paris. " * (1_000_000 // 23 + 1)}
    path = _dataset(tmp_path / "big", [{"title": "T", "text": "A is here."}, long])
    r = run_cli(["data", "validate", "--dataset", path], pg_env)
    _one_line_error(r, "validation failed", "expect_column_value_lengths_to_be_between(text)")
    assert "FAIL corpus: expect_column_value_lengths_to_be_between(text)" in r.stdout
    for args in (["data", "load"], ["index", "--openie", "spacy"]):
        r = run_cli([*args, "--dataset", path], pg_env)
        _one_line_error(r, f"over {MAX_PASSAGE_CHARS:,} characters", "'Long'", "split them")
        assert "E088" not in r.stderr


@pytest.mark.integration
def test_passage_longer_than_a_parse_indexes_with_spacy(
    pg_env: dict[str, str], tmp_path: Path
) -> None:
    from r2adapter.index.openie_spacy import MAX_PARSE_CHARS

    sentences = [f"Ann Lee{i} was born in Paris{i} in {1900 + i % 100}." for i in range(700)]
    text = " ".join(sentences)
    assert MAX_PARSE_CHARS < len(text) <= MAX_PASSAGE_CHARS
    path = _dataset(
        tmp_path / "longish",
        [{"title": "T", "text": "A is here."}, {"title": "Ann Lee", "text": text}],
    )
    r = run_cli(["index", "--dataset", path, "--openie", "spacy"], pg_env, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "longish: new index version" in r.stdout


@pytest.mark.unit
def test_spacy_parses_a_long_passage_in_pieces() -> None:
    """E088 is spaCy refusing a text over nlp.max_length: lowered here so that this
    passage would hit it whole; in pieces it does not, and the fact in its last piece is
    read."""
    from r2adapter.index.openie_spacy import SpacyOpenIE, split_for_parser

    text = "It rained all day. " * 1100 + "Ann Lee was born in Paris in 1950."
    pieces = split_for_parser(text, 2_000)
    assert len(pieces) == 11 and all(len(p) <= 2_000 and p.endswith(".") for p in pieces)
    assert " ".join(pieces) == text
    oie = SpacyOpenIE(max_chars=2_000)
    oie.nlp.max_length = 5_000
    with pytest.raises(ValueError, match="E088"):
        oie.nlp(text)
    (ex,) = oie.extract([Passage.of("Ann Lee", text)])
    assert ("Ann Lee", "born in", "Paris") in ex.triples
    assert "Paris" in ex.entities


@pytest.mark.integration
def test_invisible_query_is_refused(pg_env: dict[str, str]) -> None:
    for question in ("\u200b\u200c\u200d\ufeff", " \u2060 ", "\u0301"):
        r = run_cli(["retrieve", "--dataset", "sample", question], pg_env)
        _one_line_error(r, "no visible character")
    # argv cannot carry a NUL byte: the check the CLI and the service share, directly
    assert query_problem("\x00") == "the query contains a NUL character"
    assert query_problem("\x00\x00 ") == "the query contains a NUL character"
    assert query_problem("Who directed Blind Shaft?") is None
    assert query_problem("日本の首都は？") is None


@pytest.mark.integration
def test_validate_report_keeps_the_dvc_metric_keys(pg_env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "sample.json"
    r = run_cli(["data", "validate", "--dataset", "sample", "--report", str(out)], pg_env)
    assert r.returncode == 0, r.stderr
    written = json.loads(out.read_text())
    committed = json.loads((ROOT / "reports" / "validate" / "sample.json").read_text())
    assert list(written) == list(committed)
    assert written == {
        "dataset": "sample",
        "passages": 3,
        "queries": 1,
        "complete_gold": 1,
        "expectations": 16,
        "failed": 0,
    }
