"""JSON-lines label files (the k-way strategy labels, ADR's operator labels): written
atomically with their md5, read back with one-line errors that name the command to rerun."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from r2adapter.errors import R2AError


def write_label_lines(path: Path, rows: Iterable[dict[str, Any]]) -> str:
    """One JSON object per line, keys sorted, written atomically (a temporary file, then a
    rename); returns the file's md5."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(body)
    tmp.replace(path)
    return hashlib.md5(body.encode()).hexdigest()


def read_label_lines(
    path: Path, fmt: int, what: str, one: str, again: str, needs: Sequence[str] = ()
) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) per line of format `fmt` with the keys `needs`. A missing or
    empty file, a line that is not JSON or not such an object: one line ending in `again`
    (`what`: "strategy labels"; `one`: "a strategy label")."""
    if not path.is_file():
        raise R2AError(f"{path}: no {what}: {again}")
    rows = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as e:
            raise R2AError(f"{path}: line {i} is not JSON ({e.msg}): {again}") from None
        if (
            not isinstance(raw, dict)
            or raw.get("format") != fmt
            or any(k not in raw for k in needs)
        ):
            raise R2AError(f"{path}: line {i} is not {one} of format {fmt}: {again}")
        rows.append((i, raw))
    if not rows:
        raise R2AError(f"{path}: no {what} in the file: {again}")
    return rows
