"""The evaluation's page: the headline tables of reports/eval/*.json (retrieval, routing, and
the corpora when evaluated) and their plots, in Markdown. `r2a evaluate report` writes it
as reports/eval/report.md beside the plots it links; the Kubeflow `evaluate` component
hands it to the UI as a Markdown artifact with the plots inside it (base64 data URIs: the
UI shows an artifact from one file)."""

from __future__ import annotations

import base64
import json
import numbers
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from r2adapter.errors import R2AError

EVAL_REPORTS = ("retrieval", "routing", "corpora")  # reports/eval/<name>.json
PAGE = "report.md"
ROUTING_PLOT = "routing.png"
CORPORA_PLOT = Path("..") / "corpora" / "all.png"  # `r2a evaluate corpora` draws it

RETRIEVAL_COLUMNS = {
    "R@2": "recall@2",
    "R@5": "recall@5",
    "FCR@2": "fcr@2",
    "FCR@5": "fcr@5",
    "p50 ms": "latency_ms_p50",
    "p95 ms": "latency_ms_p95",
}
ROUTING_COLUMNS = {
    "R@5": "recall@5",
    "R@2": "recall@2",
    "graph usage": "graph_usage",
    "precision (graph)": "precision_graph",
    "recall (graph)": "recall_graph",
    "F1 (graph)": "f1_graph",
    "p50 ms": "latency_ms_p50",
}


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool) or not isinstance(v, numbers.Real):  # numpy's numbers are Real
        return str(v)
    if isinstance(v, numbers.Integral):
        return f"{int(v):,}"
    x = float(v)
    return f"{x:.3f}" if abs(x) < 10 else f"{x:,.1f}"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A Markdown table; numbers with three decimals (one above 10), a missing one `-`."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def _interval(vs: Mapping[str, Any] | None) -> str:
    if not vs:
        return "-"
    lo, hi = vs["ci95"]
    return f"{vs['diff']:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def retrieval_lines(retrieval: Mapping[str, Any]) -> list[str]:
    lines = [
        f"## Retrieval: {retrieval['dataset']}",
        "",
        f"{retrieval['n_queries']} queries with complete gold, OpenIE {retrieval.get('openie')}.",
        "",
    ]
    rows = [
        [mode, *(m.get(k) for k in RETRIEVAL_COLUMNS.values())]
        for mode, m in retrieval["modes"].items()
    ]
    return lines + table(["mode", *RETRIEVAL_COLUMNS], rows)


def routing_lines(routing: Mapping[str, Any], plot: str | None) -> list[str]:
    lines = [
        f"## Routing: {routing['dataset']}, {routing['split']} split",
        "",
        f"{routing['n_queries']} queries, {routing['rule']} labels; champions "
        + ", ".join(f"{k} v{v}" for k, v in (routing.get("champion_versions") or {}).items())
        + ".",
        "",
    ]
    rows = [
        [name, *(r.get(k) for k in ROUTING_COLUMNS.values())]
        for name, r in routing["routers"].items()
    ]
    lines += table(["router", *ROUTING_COLUMNS], rows)
    pgr = routing.get("pgr") or {}
    if pgr:
        lines += ["", "PGR: " + ", ".join(f"{k} {_cell(v)}" for k, v in pgr.items())]
    lines += [f"- note: {n}" for n in routing.get("notes", [])]
    if plot:
        lines += ["", f"![Recall@5 against graph usage, every router]({plot})"]
    return lines


def corpora_lines(corpora: Mapping[str, Any], plot: str | None) -> list[str]:
    lines = ["## Corpora: every strategy, the k-way router left one corpus out", ""]
    rows = []
    for name, f in corpora["corpora"].items():
        r = f.get("rows") or {}
        best = r.get(f"always_{f.get('best_fixed')}", {})
        kway, served = r.get("kway_loco", {}), r.get("kway_served_loco", {})
        rows.append(
            [
                name,
                f.get("n_queries"),
                f.get("best_fixed"),
                best.get("recall"),
                kway.get("recall"),
                _interval(kway.get("vs_best")),
                served.get("recall"),
                r.get("oracle", {}).get("recall"),
            ]
        )
    header = [
        "corpus",
        "queries",
        "best fixed (≤ 5 passages)",
        "its recall",
        "k-way (loco)",
        "vs best [95% CI]",
        "k-way served (loco)",
        "oracle",
    ]
    lines += table(header, rows)
    if plot:
        lines += ["", f"![Recall against mean cost on each corpus]({plot})"]
    return lines


def markdown(
    retrieval: Mapping[str, Any] | None,
    routing: Mapping[str, Any] | None,
    corpora: Mapping[str, Any] | None = None,
    plots: Mapping[str, str] | None = None,
) -> str:
    """The page from the reports at hand; `plots` maps `routing` and `corpora` to an image
    source (a relative path, or a data URI to carry the picture inside the page)."""
    plots = plots or {}
    parts = [["# Evaluation"]]
    if retrieval:
        parts.append(retrieval_lines(retrieval))
    if routing:
        parts.append(routing_lines(routing, plots.get("routing")))
    if corpora:
        parts.append(corpora_lines(corpora, plots.get("corpora")))
    return "\n\n".join("\n".join(p) for p in parts) + "\n"


def data_uri(png: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")


def _read(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise R2AError(f"{path}: not a JSON report ({e.msg}, line {e.lineno})") from e
    return data


def write_page(folder: Path, out: Path | None = None, embed: bool = False) -> Path:
    """reports/eval/report.md from the reports in `folder` (reports/eval): the routing plot
    is drawn beside them (routing.png), the corpora's is `r2a evaluate corpora`'s own.
    `embed`: the plots inside the page rather than linked."""
    from r2adapter.evaluate.plots import plot_routing

    out = out or folder / PAGE
    retrieval, routing, corpora = (_read(folder / f"{n}.json") for n in EVAL_REPORTS)
    if not (retrieval or routing or corpora):
        raise R2AError(
            f"{folder}: no evaluation report ({', '.join(f'{n}.json' for n in EVAL_REPORTS)});"
            " run `dvc repro evaluate` or `r2a evaluate retrieval|routing --json` first"
        )
    pngs: dict[str, Path] = {}
    if routing:
        pngs["routing"] = plot_routing(routing, folder / ROUTING_PLOT)
    if corpora and (folder / CORPORA_PLOT).is_file():
        pngs["corpora"] = folder / CORPORA_PLOT
    plots = {k: data_uri(p) if embed else _relative(p, out.parent) for k, p in pngs.items()}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(markdown(retrieval, routing, corpora, plots))
    return out


def _relative(path: Path, start: Path) -> str:
    return Path(os.path.relpath(path.resolve(), start.resolve())).as_posix()
