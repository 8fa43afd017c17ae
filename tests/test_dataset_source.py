"""Issue 44, items 2 and 7: a dataset's stored name belongs to the folder it was loaded
from (a foreign folder of the same name, or of a shipped dataset's, is refused in one line
naming the stored source and the flag that proceeds), and `r2a data load` and `r2a index`
refuse the empty and blank questions `r2a data validate` refuses; neither writes a row."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from r2adapter.store.db import connection
from tests.conftest import run_cli

pytestmark = pytest.mark.integration  # the embedded Postgres


def _stored(name: str) -> tuple[int, str, str | None]:
    """(passages, their ids joined, the stored source) of `name`."""
    with connection() as conn:
        n, ids = conn.execute(
            "SELECT count(*), coalesce(string_agg(id, ',' ORDER BY id), '') FROM passages"
            " WHERE dataset = %s",
            (name,),
        ).fetchone()
        row = conn.execute("SELECT source FROM datasets WHERE name = %s", (name,)).fetchone()
    return int(n), str(ids), row[0] if row else None


def _folder(folder: Path, texts: list[str], question: str = "Which passage is this?") -> str:
    """A dataset folder in the MuSiQue shape: one passage per text, one question on the first."""
    folder.mkdir(parents=True, exist_ok=True)
    corpus = [{"title": f"P{i}", "text": t} for i, t in enumerate(texts)]
    (folder / f"{folder.name}_corpus.json").write_text(json.dumps(corpus))
    queries = [
        {
            "id": "q1",
            "question": question,
            "answer": "x",
            "paragraphs": [{"title": "P0", "paragraph_text": texts[0], "is_supporting": True}],
        }
    ]
    (folder / f"{folder.name}.json").write_text(json.dumps(queries))
    return str(folder)


def _one_line(r: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_a_foreign_folder_named_like_a_shipped_dataset_is_refused(
    pg_env: dict[str, str], tmp_path: Path
) -> None:
    assert run_cli(["data", "load", "--dataset", "sample"], pg_env).returncode == 0
    before = _stored("sample")
    assert before[0] == 3 and before[2] == "data/sample"
    texts = [f"Not the shipped sample, {i}." for i in range(5)]
    foreign = _folder(tmp_path / "x" / "sample", texts)
    for args in (["data", "load"], ["index", "--openie", "spacy"]):
        r = run_cli([*args, "--dataset", foreign], pg_env)
        _one_line(r, "stored from data/sample", foreign, "--replace")
        assert _stored("sample") == before
    # the shipped folder given by its path is the same source: it loads
    r = run_cli(["data", "load", "--dataset", str(Path(pg_env["R2A_DATA_DIR"]) / "sample")], pg_env)
    assert r.returncode == 0 and "nothing changed" in r.stdout, r.stderr


def test_a_stored_name_is_not_taken_over_by_another_folder(
    pg_env: dict[str, str], tmp_path: Path
) -> None:
    first = _folder(tmp_path / "a" / "takeover", ["The first folder's passage."])
    second = _folder(tmp_path / "b" / "takeover", ["The second folder's passage."])
    assert run_cli(["data", "load", "--dataset", first], pg_env).returncode == 0
    before = _stored("takeover")
    assert before[0] == 1 and before[2] == str(Path(first).resolve())
    r = run_cli(["data", "load", "--dataset", second], pg_env)
    _one_line(r, f"stored from {Path(first).resolve()}", f"--dataset {second} --replace")
    assert _stored("takeover") == before
    # the flag proceeds, and the name then belongs to the second folder
    r = run_cli(["data", "load", "--dataset", second, "--replace"], pg_env)
    assert r.returncode == 0 and "takeover: passages +1 -1" in r.stdout, r.stderr
    assert _stored("takeover")[2] == str(Path(second).resolve())
    _one_line(run_cli(["data", "load", "--dataset", first], pg_env), f"stored from {second}")


@pytest.mark.parametrize("question", ["", "   "])
def test_load_and_index_refuse_a_blank_question_as_validate_does(
    pg_env: dict[str, str], tmp_path: Path, question: str
) -> None:
    path = _folder(tmp_path / "blankq", ["Some passage text."], question)
    r = run_cli(["data", "validate", "--dataset", path], pg_env)
    assert r.returncode == 1 and "expect_column_values_to_not_match_regex(question)" in r.stdout
    for args in (["data", "load"], ["index", "--openie", "spacy"]):
        r = run_cli([*args, "--dataset", path], pg_env)
        _one_line(r, "nothing written", "1 question(s) are empty or blank (e.g. query q1)")
        assert _stored("blankq") == (0, "", None)
