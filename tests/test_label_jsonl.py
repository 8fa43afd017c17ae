"""JSON-lines label files: atomic write with the md5 of what is on disk; every way a file
can be wrong is one line naming the command that rewrites it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from r2adapter.errors import R2AError
from r2adapter.label.jsonl import read_label_lines, write_label_lines

pytestmark = pytest.mark.unit

AGAIN = "run `r2a label --dataset x`"


def _read(path: Path) -> list[tuple[int, dict]]:
    return read_label_lines(path, 1, "test labels", "a test label", AGAIN, ["q"])


def test_roundtrip_and_md5(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "x.jsonl"
    md5 = write_label_lines(path, [{"format": 1, "q": "a"}, {"q": "b", "format": 1}])
    assert md5 == hashlib.md5(path.read_bytes()).hexdigest()
    assert [(i, r["q"]) for i, r in _read(path)] == [(1, "a"), (2, "b")]
    assert not list(tmp_path.glob("sub/*.tmp"))  # the temporary file was renamed


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (None, "no test labels: run"),
        ("", "no test labels in the file"),
        ('{"format": 1, "q": 1}\n{bad\n', "line 2 is not JSON"),
        ('{"format": 2, "q": 1}\n', "line 1 is not a test label of format 1"),
        ('{"format": 1}\n', "line 1 is not a test label of format 1"),
        ("[1, 2]\n", "line 1 is not a test label"),
    ],
)
def test_bad_files_are_one_line(tmp_path: Path, body: str | None, message: str) -> None:
    path = tmp_path / "x.jsonl"
    if body is not None:
        path.write_text(body)
    with pytest.raises(R2AError, match=message) as e:
        _read(path)
    assert str(e.value).endswith(AGAIN) and "\n" not in str(e.value)
