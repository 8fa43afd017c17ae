"""docs/results.md is rendered from the saved reports (scripts/render_results.py,
`make results`): the renderer runs, the figures it prints are the files' own, a missing file
is said so rather than a crash, the committed page is what the files render to now, its
recall-against-cost figures are drawn, and the figures README.md and docs/ quote are their
files' own."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "render_results.py"
PAGE = ROOT / "docs" / "results.md"


def _renderer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("render_results", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load(rel: str) -> dict:
    return json.loads((ROOT / rel).read_text(encoding="utf-8"))


def _table(text: str, source: str, nth: int = 0) -> list[dict[str, str]]:
    """The `nth` table after the line `Source: `<source>`...`, as rows keyed by header."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"Source: `{source}`"))
    tables: list[list[dict[str, str]]] = []
    i = start + 1
    while i < len(lines) and len(tables) <= nth:
        if lines[i].startswith("Source: ") or lines[i].startswith("## "):
            break
        if lines[i].startswith("| ") and lines[i + 1].startswith("|---"):
            headers = [c.strip() for c in lines[i].strip("|").split(" | ")]
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("| "):
                cells = [c.strip() for c in lines[i].strip("|").split(" | ")]
                rows.append(dict(zip(headers, cells, strict=True)))
                i += 1
            tables.append(rows)
        i += 1
    assert len(tables) > nth, f"no table {nth} after Source: {source}"
    return tables[nth]


def _row(rows: list[dict[str, str]], key: str, value: str) -> dict[str, str]:
    return next(r for r in rows if r[key] == value)


def _same(cell: str, value: float, digits: int = 3) -> None:
    assert float(cell.split()[0]) == pytest.approx(round(value, digits), abs=10**-digits / 2)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("results") / "results.md"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    return out.read_text(encoding="utf-8")


def test_the_renderer_succeeds_and_names_its_sources(rendered: str) -> None:
    assert rendered.startswith("# Results\n")
    for rel in (
        "reports/eval/retrieval.json",
        "reports/eval/routing.json",
        "reports/routing/kway_2wikimultihopqa_cv5.json",
        "reports/routing/kway_hotpotqa_dev_loco.json",
        "reports/corpora/all.json",
        "benchmarks/results/margin_rule.json",
        "benchmarks/results/rewriter_corpora.json",
        "benchmarks/results/scale.json",
    ):
        assert f"Source: `{rel}`" in rendered
    for superseded in ("kway_musique_all.json", "musique_dev.loco.json", "the ceiling"):
        assert superseded not in rendered


@pytest.mark.parametrize(
    "rel",
    [
        "reports/eval/retrieval.json",
        "reports/eval/routing.json",
        "reports/routing/kway_2wikimultihopqa_cv5.json",
        "reports/routing/kway_hotpotqa_dev_loco.json",
        "reports/corpora/all.json",
        "benchmarks/results/margin_rule.json",
        "benchmarks/results/scale.json",
    ],
)
def test_a_printed_figure_is_the_files_own(rendered: str, rel: str) -> None:
    if not (ROOT / rel).is_file():
        pytest.skip(f"{rel} is not in this checkout")
    d = _load(rel)
    rows = _table(rendered, rel)
    if rel == "reports/eval/retrieval.json":
        for mode in ("dense", "graph"):
            row = _row(rows, "mode", mode)
            _same(row["R@5"], d["modes"][mode]["recall@5"])
            _same(row["FCR@5"], d["modes"][mode]["fcr@5"])
    elif rel == "reports/eval/routing.json":
        for router in ("r2a", "r2a_embed"):
            row = _row(rows, "router", router)
            _same(row["hybrid R@5"], d["routers"][router]["recall@5"])
            _same(row["graph usage"], d["routers"][router]["graph_usage"])
    elif rel.endswith("kway_2wikimultihopqa_cv5.json"):
        row = _row(rows, "router", "kway")
        _same(row["recall"], d["routers"]["kway"]["recall"])
        _same(row["mean ms"], d["routers"]["kway"]["mean_ms"], 1)
        paired = _row(_table(rendered, rel, 1), "comparison", "kway_vs_r2a")
        _same(paired["difference [95%]"], d["paired"]["kway_vs_r2a"]["diff"])
    elif rel.endswith("_loco.json"):
        for name in ("kway", "kway_served", "always_graph@5", "always_dense@5"):
            row = _row(rows, "strategy or router", name)
            _same(row["recall"], d["routers"][name]["recall"])
            _same(row["mean ms"], d["routers"][name]["mean_ms"], 1)
    elif rel.endswith("all.json"):
        for nth, corpus in enumerate(d["corpora"].values()):
            rows = _table(rendered, rel, nth)
            for name, r in corpus["rows"].items():
                if name.startswith("always_") or name.startswith("kway"):
                    _same(_row(rows, "strategy or router", name)["recall"], r["recall"])
    elif rel.endswith("margin_rule.json"):
        for rule, r in d["swap_summary"].items():
            _same(_row(rows, "rule", rule)["worst gap"], r["worst_gap"], 4)
    elif rel.endswith("scale.json"):
        for size in d["sizes"].values():
            row = _row(rows, "passages", str(size["passages"]))
            _same(row["graph search p50 ms"], size["graph_search_p50_ms"], 1)


def _dot(v: float, digits: int) -> str:
    """A figure as the docs write it: `+.0065`, `−.0076` (a true minus), `.95`."""
    text = f"{v:+.{digits}f}".replace("+0.", "+.").replace("-0.", "−.")
    return text


RC, CR, MR = (
    f"benchmarks/results/{f}.json" for f in ("rewriter_corpora", "container_route", "margin_rule")
)
ALL = "reports/corpora/all.json"
# docs/corpora.md's headline table: each held-out corpus's row starts with its best fixed
# strategy's recall, then the k-way router's chosen in the fold
_HEADLINE_ROWS = (
    ("2wikimultihopqa", "860", "catrag+rw@5", "195"),
    ("hotpotqa_dev", "590", "catrag+rw@5", "176"),
    ("musique_dev", "192", "catrag+rw@5", "184"),
    ("musique_dev_mixed", "546", "catrag@5", "180"),
    ("2wiki_mixed", "2,909", "catrag+rw@5", "188"),
)
# (the page that quotes, the text around the figure, the file, the path to it, how written)
QUOTES = [
    ("README.md", "({} s;", "benchmarks/results/first_run.json", "total_s", "{:,.0f}"),
    ("README.md", "2Wiki {} s", "reports/index/2wikimultihopqa.json", "seconds_total", "{:.0f}"),
    ("benchmarks/studies.md", "worst gain {}.", RC, "worst_gain", "dot4"),
    (
        "benchmarks/studies.md",
        "inside / outside p50 {} (",
        CR,
        "p50_ratio_inside_over_outside",
        "{:.2f}",
    ),
    ("docs/settings.md", "**{}**", MR, "swap_summary/maximin/worst_gap", "dot4"),
    ("docs/corpora.md", "recalls **{}** at", "reports/train/kway.json", "test_recall", "u3"),
    ("docs/corpora.md", "γ **{}** chosen", "reports/train/adr.json", "gamma", "u2"),
    *(
        (
            "docs/corpora.md",
            f"| {c} ({n}) | {best} {{}}, {cost} |",
            ALL,
            f"corpora/{c}/rows/always_{best}/recall",
            "u3",
        )
        for c, n, best, cost in _HEADLINE_ROWS
    ),
    *(
        (
            "docs/corpora.md",
            f"| {c} ({n}) | {best} " + "{}",
            ALL,
            f"corpora/{c}/rows/kway_loco/recall",
            "row",
        )
        for c, n, best, _ in _HEADLINE_ROWS
    ),
]


@pytest.mark.parametrize(("doc", "around", "rel", "path", "fmt"), QUOTES)
def test_a_quoted_figure_is_its_files_own(
    doc: str, around: str, rel: str, path: str, fmt: str
) -> None:
    """README.md and docs/ quote figures by hand: each quote listed here is checked against the
    file it came from, so a rerun that changes the figure fails until the quote follows."""
    if not (ROOT / rel).is_file():
        pytest.skip(f"{rel} is not in this checkout")
    value = _load(rel)
    for key in path.split("/"):
        value = value[key]
    text = (ROOT / doc).read_text(encoding="utf-8")
    if fmt == "row":  # the second figure of a table row: the row's second cell starts with it
        line = next(ln for ln in text.splitlines() if ln.startswith(around.format("")))
        assert line.split(" | ")[2].startswith(f"{value:.3f}".removeprefix("0")), (doc, line)
        return
    if fmt == "dot4":
        figure = _dot(value, 4)
    elif fmt in ("u2", "u3"):  # unsigned, without the leading zero: .850
        figure = f"{value:.{fmt[1]}f}".removeprefix("0")
    else:
        figure = fmt.format(value)
    assert around.format(figure) in text, (doc, figure)


def test_the_training_parameters_are_params_yaml(rendered: str) -> None:
    """The loss parameters the page states are the ones training reads (issue 25: the
    README said α 0.25, γ 2 while params.yaml trains with α 0.5, and γ 0 for r2a_embed)."""
    import yaml

    p = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    rows = _table(rendered, "params.yaml")
    for router, section in (("r2a", "router_minilm"), ("r2a_embed", "router_embedding")):
        merged = {**p["router"], **p[section]}
        row = _row(rows, "router", router)
        assert float(row["α"]) == merged["alpha"]
        assert float(row["γ"]) == merged["gamma"]


def test_a_missing_file_is_said_so(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "reports" / "eval").mkdir(parents=True)
    shutil.copy(ROOT / "reports" / "eval" / "routing.json", root / "reports" / "eval")
    text = _renderer().render(root)
    assert "(not measured: `reports/eval/retrieval.json` missing)" in text
    assert "(not measured: `benchmarks/results/scale.json` missing)" in text
    assert "(not measured: `params.yaml` missing)" in text
    assert "Source: `reports/eval/routing.json`" in text
    assert "(not measured: `reports/eval/routing.json` missing)" not in text
    assert "(not yet produced: `reports/routing/*_loco.json`" in text
    assert "(not yet produced: `reports/corpora/all.json`" in text


def test_the_figures_are_drawn_per_corpus(tmp_path: Path) -> None:
    """Recall against ms for every held-out corpus and every corpus of the corpora report."""
    pngs = _renderer().figures(ROOT, tmp_path)
    loco = sorted((ROOT / "reports" / "routing").glob("*_loco.json"))
    if not loco:
        pytest.skip("no loco report in this checkout")
    corpora = (
        _load("reports/corpora/all.json")["corpora"]
        if (ROOT / "reports/corpora/all.json").is_file()
        else {}
    )
    assert len(pngs) == len(loco) + len(corpora)
    for png in pngs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
        assert f"](figures/{png.name})" in PAGE.read_text(encoding="utf-8")


def test_the_committed_page_is_up_to_date() -> None:
    """Drift fails: a report that changed without `make results` changes the page."""
    assert PAGE.is_file(), "docs/results.md is missing: run `make results`"
    assert PAGE.read_text(encoding="utf-8") == _renderer().render(ROOT), (
        "docs/results.md differs from what the saved reports render to: run `make results`"
    )
