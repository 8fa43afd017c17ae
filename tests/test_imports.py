"""No import circles in the project's packages: every import (also the ones inside functions,
which run later but still tie two modules together) is read from the source with `ast`, and
the module graph must have no cycle. Imports under `if TYPE_CHECKING:` are left out: they
never run. A submodule import is an edge to that submodule only (its parent package's
`__init__` running first is how packages work, not a circle)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit  # source files only: no Postgres, no server

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("r2adapter", "serving", "components", "pipelines")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {
        module_name(p): p
        for pkg in PACKAGES
        for p in sorted((ROOT / pkg).rglob("*.py"))
        if ".venv" not in p.parts
    }


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports, anywhere in its source."""
    tree = ast.parse(path.read_text(), str(path))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom) or _type_checking_only(node, parents):
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:  # relative: from the package, up level − 1
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import mod` imports the submodule; `from mod import name` the module
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            ]
        for t in targets:
            while t and t not in modules:  # `import a.b.c` where only a.b is ours, etc.
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def test_the_checker_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert find_cycles(graph) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_the_checker_reads_imports_inside_functions(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import r2adapter.cli\n"
        "def f():\n    from r2adapter.config import settings\n    import r2adapter.route.base\n"
    )
    modules = project_modules()
    assert imports_of("x.m", src, modules) == {"r2adapter.config", "r2adapter.route.base"}


def test_no_import_circles() -> None:
    graph = import_graph()
    assert "r2adapter.config" in graph and len(graph) > 50  # it read the tree
    cycles = find_cycles(graph)
    assert not cycles, "import circles: " + "; ".join(" ↔ ".join(c) for c in cycles)


def test_config_is_a_ground_floor() -> None:
    """config.py (settings and parameters) imports nothing of the project but its errors."""
    assert import_graph()["r2adapter.config"] <= {"r2adapter.errors"}
