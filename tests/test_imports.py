"""No import circles in the project's packages, and no import from a floor to a floor above
it. Every import (also the ones inside functions, which run later but still tie two modules
together) is read from the source with `ast`. For the circles, imports under
`if TYPE_CHECKING:` are left out: they never run. A submodule import is an edge to that
submodule only (its parent package's `__init__` running first is how packages work, not a
circle). For the floors, every tie counts: imports under `TYPE_CHECKING` too, and a string
naming `r2adapter.<module>` (a "module:Class" handed to importlib, a `python -m` command
line), since it ties the two modules as firmly as an import. The floors and the upward
imports that remain are read from docs/architecture.md, so the document and this test
cannot disagree. `python tests/test_imports.py` prints the upward imports it finds."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit  # source files only: no Postgres, no server

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("r2adapter", "serving", "components", "pipelines")
DOC = ROOT / "docs" / "architecture.md"
NAMED = re.compile(r"r2adapter(?:\.\w+)+")  # a module named in a string


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


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def imports_of(
    name: str, path: Path, modules: dict[str, Path], *, every_tie: bool = False
) -> set[str]:
    """The project modules `name` imports, anywhere in its source. `every_tie` adds the
    imports under `TYPE_CHECKING` and the modules named in strings (not in docstrings)."""
    tree = ast.parse(path.read_text(), str(path))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    docstrings = _docstrings(tree)
    out: set[str] = set()
    for node in ast.walk(tree):
        if (
            every_tie
            and isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ):
            targets = NAMED.findall(node.value)
        elif not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        elif not every_tie and _type_checking_only(node, parents):
            continue
        elif isinstance(node, ast.Import):
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


# ---- floors ---------------------------------------------------------------------------


def _section(heading: str) -> list[str]:
    """The lines of docs/architecture.md's section `heading`, up to the next heading."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("#")), len(lines))
    return lines[start:end]


def doc_floors() -> dict[str, int]:
    """docs/architecture.md's floors: a path's module prefix → its floor. A row of the table
    is `| <floor> | <name> | `path`, `path`, … | …`; a folder holds everything in it, a
    `.py` file only itself."""
    floors: dict[str, int] = {}
    for line in _section("## Floors"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or not cells[0].isdigit():
            continue
        for path in re.findall(r"`([\w/.]+)`", cells[2]):
            module = module_name(ROOT / path) if path.endswith(".py") else path.strip("/")
            floors[module.replace("/", ".") + ("" if path.endswith(".py") else ".*")] = int(
                cells[0]
            )
    return floors


def floor_of(module: str, floors: dict[str, int]) -> int | None:
    if module in floors:
        return floors[module]
    parts = module.split(".")
    for n in range(len(parts), 0, -1):  # the innermost folder that the table names
        key = ".".join(parts[:n]) + ".*"
        if key in floors:
            return floors[key]
    return None


EXCEPTION = re.compile(r"- `([\w.]+)` → `([\w.]+)` — (\S.*)")


def doc_exceptions() -> dict[tuple[str, str], str]:
    """docs/architecture.md's upward imports that remain: (importer, imported) → reason."""
    out: dict[tuple[str, str], str] = {}
    for line in _section("## Upward imports that remain"):
        if line.startswith("- "):
            m = EXCEPTION.fullmatch(line)
            assert m, f"docs/architecture.md: not `- `importer` → `imported` — reason`: {line}"
            out[(m[1], m[2])] = m[3]
    return out


def upward_imports(floors: dict[str, int]) -> dict[tuple[str, str], tuple[int, int]]:
    """Every (importer, imported) pair of project modules where the imported one lives on a
    higher floor, with the two floors."""
    modules = project_modules()
    out = {}
    for name, path in modules.items():
        here = floor_of(name, floors)
        for other in imports_of(name, path, modules, every_tie=True):
            there = floor_of(other, floors)
            if here is not None and there is not None and there > here:
                out[(name, other)] = (here, there)
    return out


def test_the_layering_checker_sees_every_tie(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        '"""Docstrings may name r2adapter.cli freely."""\n'
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import r2adapter.loop\n"
        "def f():\n    from r2adapter.config import settings\n"
        'TABLE = {"x": "r2adapter.adr.retriever:AdrRetriever"}\n'
    )
    modules = project_modules()
    assert imports_of("x.m", src, modules, every_tie=True) == {
        "r2adapter.loop",
        "r2adapter.config",
        "r2adapter.adr.retriever",
    }
    floors = {"r2adapter.config": 0, "r2adapter.*": 1, "r2adapter.adr.*": 2}
    assert floor_of("r2adapter.adr.retriever", floors) == 2
    assert floor_of("r2adapter.route.base", floors) == 1
    assert floor_of("r2adapter.config", floors) == 0
    assert floor_of("serving.service", floors) is None


def test_every_module_stands_on_a_floor() -> None:
    floors = doc_floors()
    assert len(set(floors.values())) > 5, "docs/architecture.md: no floors table read"
    homeless = sorted(m for m in project_modules() if floor_of(m, floors) is None)
    assert not homeless, f"on no floor of docs/architecture.md's table: {homeless}"
    modules = project_modules()
    named = {k.removesuffix(".*") for k in floors}
    absent = sorted(k for k in named if k not in modules)
    assert not absent, f"docs/architecture.md's floors name what is not there: {absent}"


def test_no_upward_import_beyond_the_listed_exceptions() -> None:
    """An import from a floor to a higher one fails unless docs/architecture.md lists it;
    a listed one that no longer occurs fails too, so the list stays the count."""
    found = upward_imports(doc_floors())
    listed = doc_exceptions()
    unlisted = [
        f"{a} (floor {found[a, b][0]}) → {b} (floor {found[a, b][1]})"
        for a, b in sorted(found.keys() - listed.keys())
    ]
    stale = [f"{a} → {b}" for a, b in sorted(listed.keys() - found.keys())]
    assert not unlisted, "upward imports not in docs/architecture.md: " + "; ".join(unlisted)
    assert not stale, "docs/architecture.md lists upward imports that are gone: " + "; ".join(stale)


if __name__ == "__main__":  # python tests/test_imports.py: count and list them
    found = upward_imports(doc_floors())
    listed = doc_exceptions()
    for (a, b), (here, there) in sorted(found.items()):
        print(f"{a} ({here}) → {b} ({there}){'' if (a, b) in listed else '   NOT LISTED'}")
    print(f"{len(found)} upward imports, {len(found.keys() & listed.keys())} of them listed")
    sys.exit(0 if found.keys() == listed.keys() else 1)
