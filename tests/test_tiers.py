"""Every test says its tier: a marker declared in pyproject.toml's [tool.pytest.ini_options]
markers (unit, integration, slow, ...), on its module (`pytestmark`), its class or itself.
`make test-fast` selects `unit and not integration and not slow`, so a test with none of
them is never run there and says nothing of what it needs. Read from the source with
`ast`, so a test that pytest would skip at import (a missing optional server) counts too."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit  # source files only

ROOT = Path(__file__).resolve().parents[1]


def tier_markers() -> set[str]:
    """The markers pyproject.toml declares: `name: what it selects`."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        declared = tomllib.load(f)["tool"]["pytest"]["ini_options"]["markers"]
    return {m.split(":", 1)[0].split("(", 1)[0].strip() for m in declared}


def _marks(node: ast.AST | None) -> set[str]:
    """Marker names in an expression: `pytest.mark.unit`, `[pytest.mark.a, pytest.mark.b]`,
    `pytest.mark.slow(...)`."""
    if node is None:
        return set()
    return {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute)
        and isinstance(n.value, ast.Attribute)
        and n.value.attr == "mark"
    }


def _pytestmark(body: list[ast.stmt]) -> set[str]:
    out: set[str] = set()
    for st in body:
        if isinstance(st, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in st.targets
        ):
            out |= _marks(st.value)
        elif (
            isinstance(st, ast.AnnAssign)
            and isinstance(st.target, ast.Name)
            and st.target.id == "pytestmark"
        ):
            out |= _marks(st.value)
    return out


def _decorators(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> set[str]:
    return set().union(*(_marks(d) for d in node.decorator_list))


def markers_of_tests(source: str) -> dict[str, set[str]]:
    """Each test function of a module (`test*`, also in `Test*` classes) → the markers it
    carries from its module, its classes and itself."""
    tree = ast.parse(source)
    out: dict[str, set[str]] = {}

    def visit(body: list[ast.stmt], prefix: str, inherited: set[str]) -> None:
        for st in body:
            if isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef) and st.name.startswith(
                "test"
            ):
                out[prefix + st.name] = inherited | _decorators(st)
            elif isinstance(st, ast.ClassDef) and st.name.startswith("Test"):
                here = inherited | _decorators(st) | _pytestmark(st.body)
                visit(st.body, f"{prefix}{st.name}.", here)

    visit(tree.body, "", _pytestmark(tree.body))
    return out


def test_the_checker_reads_module_class_and_function_markers() -> None:
    src = (
        "import pytest\n"
        "pytestmark = [pytest.mark.slow, pytest.mark.skipif(False, reason='')]\n"
        "def test_a(): ...\n"
        "class TestB:\n"
        "    pytestmark = pytest.mark.integration\n"
        "    @pytest.mark.parametrize('x', [1])\n"
        "    def test_c(self, x): ...\n"
        "@pytest.mark.unit\n"
        "class TestD:\n"
        "    async def test_e(self): ...\n"
        "    def helper(self): ...\n"
        "def helper(): ...\n"
    )
    assert markers_of_tests(src) == {
        "test_a": {"slow", "skipif"},
        "TestB.test_c": {"slow", "skipif", "integration", "parametrize"},
        "TestD.test_e": {"slow", "skipif", "unit"},
    }
    assert markers_of_tests("def test_f(): ...\n") == {"test_f": set()}
    assert {"unit", "integration", "slow"} <= tier_markers()


def test_every_test_has_a_tier() -> None:
    tiers = tier_markers()
    files = sorted({*ROOT.joinpath("tests").rglob("test_*.py"), *ROOT.glob("tests/**/*_test.py")})
    assert len(files) > 40, "no test modules found"
    untiered = [
        f"{path.relative_to(ROOT)}::{name}"
        for path in files
        for name, marks in markers_of_tests(path.read_text(encoding="utf-8")).items()
        if not marks & tiers
    ]
    assert not untiered, (
        f"{len(untiered)} tests carry none of the tier markers {sorted(tiers)} (a module's "
        "`pytestmark`, or a decorator on the class or the test): " + ", ".join(untiered)
    )
