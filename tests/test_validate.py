"""Great Expectations suites: shipped data passes, a corrupted copy fails."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from r2adapter.config import settings
from r2adapter.data.adapters import load_dataset
from r2adapter.data.validate import validate

pytestmark = pytest.mark.unit  # no Postgres, no server


@pytest.mark.slow  # reads and checks all 6,119 passages (~4 s)
def test_shipped_2wiki_passes_and_counts_complete_gold() -> None:
    report = validate(load_dataset("2wikimultihopqa"))
    assert report.success, [c.line() for c in report.checks if not c.success]
    assert (report.n_passages, report.n_queries, report.n_complete) == (6119, 1000, 860)
    gold = [c for c in report.checks if c.table == "gold"][0]
    assert gold.checked == 2319 and gold.unexpected == 0


def test_corrupted_copy_fails(tmp_path: Path) -> None:
    src = settings().data_dir / "musique"
    dst = tmp_path / "musique"
    shutil.copytree(src, dst)
    corpus = json.loads((dst / "musique_corpus.json").read_text())
    queries = json.loads((dst / "musique.json").read_text())
    gold_text = next(p["paragraph_text"] for p in queries[0]["paragraphs"] if p["is_supporting"])
    corpus = [p for p in corpus if p["text"] != gold_text]  # a gold passage goes missing
    corpus.append(dict(corpus[0]))  # and a duplicate appears
    queries[1]["question"] = "   "  # and a blank question
    (dst / "musique_corpus.json").write_text(json.dumps(corpus))
    (dst / "musique.json").write_text(json.dumps(queries))
    report = validate(load_dataset(str(dst)))
    failed = {(c.table, c.expectation, c.column): c for c in report.checks if not c.success}
    assert not report.success
    assert failed[("gold", "expect_column_values_to_be_in_set", "passage_id")].unexpected == 1
    assert failed[("corpus", "expect_column_values_to_be_unique", "id")].unexpected == 2
    assert (
        failed[("queries", "expect_column_values_to_not_match_regex", "question")].unexpected == 1
    )
