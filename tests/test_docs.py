"""The README's layout picture and docs/architecture.md's house are the same picture, and
every folder and module the picture names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


def _picture(path: Path, heading: str) -> str:
    text = path.read_text(encoding="utf-8")
    start = text.index("```\n", text.index(heading)) + 4
    return text[start : text.index("```", start)]


def test_readme_layout_is_the_architecture_house() -> None:
    readme = _picture(ROOT / "README.md", "## Layout")
    house = _picture(ROOT / "docs" / "architecture.md", "## The house")
    assert readme == house


def test_every_path_in_the_house_exists() -> None:
    parent = ""
    missing = []
    for line in _picture(ROOT / "docs" / "architecture.md", "## The house").splitlines():
        if not line.strip() or line.startswith("        "):
            continue  # a continued description
        indent = len(line) - len(line.lstrip())
        names = re.split(r",\s*", line.strip().split("  ")[0])
        for name in names:
            name = name.strip()
            if not re.fullmatch(r"[\w.\-]+/?", name):
                continue
            path = ROOT / (parent + name if indent else name)
            if not path.exists():
                missing.append(str(path.relative_to(ROOT)))
            if not indent and name.endswith("/"):
                parent = name
    assert not missing, f"named in docs/architecture.md but absent: {missing}"
