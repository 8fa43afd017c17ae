"""Great Expectations suites: shipped data passes, a corrupted copy fails."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from r2adapter.config import settings
from r2adapter.data.adapters import load_dataset
from r2adapter.data.data_docs import PAGE
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


def _statuses(html: str) -> dict[str, str]:
    """validation.html's overview of each suite: its name → Succeeded | Failed."""
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    return dict(re.findall(r"Expectation Suite: (\S+) Data asset: \S+ Status: (\w+)", text))


def test_the_checkpoint_writes_data_docs_naming_each_suite(tmp_path: Path) -> None:
    """The checkpoint's UpdateDataDocsAction writes the site: an index naming the three
    suites and linking this run's validation page of each; an earlier run's pages go, what
    else the folder holds stays; validation.html holds every suite's result on one page."""
    docs = tmp_path / "docs"
    (docs / "validations" / "sample-corpus" / "old").mkdir(parents=True)
    (docs / "notes.txt").write_text("mine")
    report = validate(load_dataset("sample"), docs)
    assert report.success and len(report.checks) == 16
    index = (docs / "index.html").read_text()
    for table in ("corpus", "queries", "gold"):
        assert f'href="expectations/sample-{table}.html"' in index
        (page,) = set(re.findall(rf"validations/sample-{table}/[^\"']+\.html", index))
        assert (docs / page).is_file(), page
    assert not (docs / "validations" / "sample-corpus" / "old").exists()
    assert (docs / "notes.txt").read_text() == "mine"
    assert _statuses((docs / PAGE).read_text()) == {
        "sample-corpus": "Succeeded",
        "sample-queries": "Succeeded",
        "sample-gold": "Succeeded",
    }


def test_data_docs_show_the_failed_suite(tmp_path: Path) -> None:
    src, dst = settings().data_dir / "sample", tmp_path / "bad"
    dst.mkdir()
    shutil.copy(src / "sample_corpus.json", dst / "bad_corpus.json")
    queries = json.loads((src / "sample.json").read_text())
    queries[0]["question"] = " "
    (dst / "bad.json").write_text(json.dumps(queries))
    report = validate(load_dataset(str(dst)), tmp_path / "docs")
    assert [c.table for c in report.failed] == ["queries"]
    assert _statuses((tmp_path / "docs" / PAGE).read_text()) == {
        "bad-corpus": "Succeeded",
        "bad-queries": "Failed",
        "bad-gold": "Succeeded",
    }


def test_the_validate_component_hands_the_ui_the_data_docs_page(tmp_path: Path) -> None:
    """The Kubeflow component's body: validation.html, every suite's result on one page, as
    its HTML artifact (the UI shows an artifact from one file)."""
    from kfp.dsl import HTML, Metrics

    from components.validate import validate as component

    page = HTML(uri=str(tmp_path / "data_docs.html"))
    out = component.python_func(
        dataset="sample", metrics=Metrics(uri=str(tmp_path / "metrics")), data_docs=page
    )
    assert out.name == "sample" and len(out.fingerprint) == 32
    assert _statuses((tmp_path / "data_docs.html").read_text()) == {
        "sample-corpus": "Succeeded",
        "sample-queries": "Succeeded",
        "sample-gold": "Succeeded",
    }
