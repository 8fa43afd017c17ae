"""The evaluation's page (r2adapter/evaluate/report_page.py): the headline tables of the
retrieval, routing and corpora reports and their plots, linked beside reports/eval/report.md
or carried inside the page (what the Kubeflow evaluate component hands the UI)."""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from r2adapter.errors import R2AError
from r2adapter.evaluate.report_page import markdown, write_page

pytestmark = pytest.mark.unit  # files only

ROOT = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"

RETRIEVAL = {
    "dataset": "toy",
    "n_queries": 40,
    "openie": "spacy",
    "modes": {
        "dense": {"recall@2": 0.5, "recall@5": 0.6, "fcr@2": 0.1, "fcr@5": 0.25,
                  "latency_ms_p50": 7.81, "latency_ms_p95": 12.345},
        "graph": {"recall@2": 0.6, "recall@5": 0.8, "fcr@2": 0.3, "fcr@5": 0.55,
                  "latency_ms_p50": 20.4, "latency_ms_p95": 24.7},
    },
}  # fmt: skip
ROUTER = {"recall@2": 0.5, "precision_graph": 0.7, "recall_graph": 0.6, "f1_graph": 0.65}
ROUTING = {
    "dataset": "toy",
    "split": "test",
    "rule": "recall_first",
    "n_queries": 12,
    "routers": {
        "always_dense": {**ROUTER, "recall@5": 0.6, "graph_usage": 0.0, "latency_ms_p50": 0.01},
        "r2a": {**ROUTER, "recall@5": 0.75, "graph_usage": 0.45, "latency_ms_p50": 7.4},
    },
    "pgr": {"r2a": 0.5},
    "champion_versions": {"r2a": "3"},
    "notes": ["LLM-router skipped"],
}
CORPORA = {
    "corpora": {
        "toy": {
            "n_queries": 12,
            "best_fixed": "graph@5",
            "rows": {
                "always_graph@5": {"recall": 0.8},
                "kway_loco": {"recall": 0.79, "vs_best": {"diff": -0.01, "ci95": [-0.03, 0.01]}},
                "oracle": {"recall": 0.9},
            },
        },
        "nogold": {"note": "no gold", "costs_ms": {}},
    }
}


def _rows(page: str, first: str) -> list[list[str]]:
    """The cells of the table rows whose first cell is `first`."""
    return [
        [c.strip() for c in line.strip("|").split("|")]
        for line in page.splitlines()
        if line.startswith(f"| {first} |")
    ]


def test_the_page_renders_each_report_as_a_table() -> None:
    page = markdown(RETRIEVAL, ROUTING, CORPORA, {"routing": "routing.png"})
    assert _rows(page, "dense") == [["dense", "0.500", "0.600", "0.100", "0.250", "7.810", "12.3"]]
    assert _rows(page, "r2a") == [
        ["r2a", "0.750", "0.500", "0.450", "0.700", "0.600", "0.650", "7.400"]
    ]
    assert _rows(page, "toy") == [
        ["toy", "12", "graph@5", "0.800", "0.790", "-0.010 [-0.030, +0.010]", "-", "0.900"]
    ]
    assert _rows(page, "nogold") == [["nogold", "-", "-", "-", "-", "-", "-", "-"]]
    assert "12 queries, recall_first labels; champions r2a v3." in page
    assert "PGR: r2a 0.500" in page and "- note: LLM-router skipped" in page
    # the routing plot is linked; the corpora plot was not given, so none is
    assert re.findall(r"!\[[^]]*\]\(([^)]*)\)", page) == ["routing.png"]
    # a page of what is at hand: no retrieval report, no retrieval section
    assert "## Retrieval" not in markdown(None, ROUTING)


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "reports" / "eval"
    folder.mkdir(parents=True)
    for name, report in (("retrieval", RETRIEVAL), ("routing", ROUTING), ("corpora", CORPORA)):
        (folder / f"{name}.json").write_text(json.dumps(report))
    (tmp_path / "reports" / "corpora").mkdir()
    (tmp_path / "reports" / "corpora" / "all.png").write_bytes(PNG + b"corpora")
    return folder


def test_write_page_draws_the_routing_plot_and_links_both(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    out = write_page(folder)
    assert out == folder / "report.md"
    assert (folder / "routing.png").read_bytes().startswith(PNG)
    images = re.findall(r"!\[[^]]*\]\(([^)]*)\)", out.read_text())
    assert images == ["routing.png", "../corpora/all.png"]


def test_embedded_plots_are_the_pictures_themselves(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    out = write_page(folder, tmp_path / "page.md", embed=True)
    uris = re.findall(r"!\[[^]]*\]\(data:image/png;base64,([^)]*)\)", out.read_text())
    assert [base64.b64decode(u) for u in uris] == [
        (folder / "routing.png").read_bytes(),
        PNG + b"corpora",
    ]


def test_no_report_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(R2AError, match="no evaluation report") as e:
        write_page(tmp_path)
    assert "\n" not in str(e.value)
    (tmp_path / "routing.json").write_text("{")
    with pytest.raises(R2AError, match="routing.json: not a JSON report"):
        write_page(tmp_path)


def test_the_committed_page_is_the_reports(tmp_path: Path) -> None:
    """reports/eval/report.md is what `r2a evaluate report` writes from the committed
    reports (the evaluate stage's command ends with it)."""
    folder = tmp_path / "reports" / "eval"
    shutil.copytree(ROOT / "reports" / "eval", folder)
    shutil.copytree(ROOT / "reports" / "corpora", tmp_path / "reports" / "corpora")
    fresh = write_page(folder, folder / "fresh.md")  # beside it: the same links
    assert fresh.read_text() == (ROOT / "reports" / "eval" / "report.md").read_text()


def test_the_evaluate_component_hands_the_ui_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Kubeflow component's body, its steps standing in: the JSON report, and the
    Markdown page with the routing plot inside it (the UI shows an artifact from one file)."""
    from kfp.dsl import Artifact, Markdown, Metrics

    from components.evaluate import evaluate
    from r2adapter import steps

    monkeypatch.setattr(steps, "evaluate_retrieval", lambda d: RETRIEVAL)
    monkeypatch.setattr(steps, "evaluate_routing", lambda d, s: ROUTING)
    out: dict[str, Any] = {
        "metrics": Metrics(uri=str(tmp_path / "metrics")),
        "report": Artifact(uri=str(tmp_path / "report.json")),
        "summary": Markdown(uri=str(tmp_path / "summary.md")),
    }
    assert evaluate.python_func(dataset="toy", **out) == 0.75
    page = (tmp_path / "summary.md").read_text()
    assert _rows(page, "r2a")[0][1] == "0.750" and _rows(page, "graph")[0][2] == "0.800"
    (uri,) = re.findall(r"!\[[^]]*\]\(data:image/png;base64,([^)]*)\)", page)
    assert base64.b64decode(uri).startswith(PNG)
    assert json.loads((tmp_path / "report.json").read_text())["routing"] == ROUTING
