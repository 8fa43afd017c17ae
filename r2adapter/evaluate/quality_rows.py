"""The rows of the retrieval-quality table (benchmarks/bench_quality.py, docs/results.md): one
per (dataset, OpenIE backend), its `retrieval` the JSON of `r2a evaluate retrieval --json`
and its `index` the `r2a index --report` of the build evaluated. Here: the warnings a row's
own figures raise, and an earlier run's rows merged with the ones run now."""

from __future__ import annotations

from typing import Any

from r2adapter.data.adapters import SHIPPED_DATASETS
from r2adapter.index.openie import OPENIE_BACKENDS

BACKENDS = tuple(OPENIE_BACKENDS)  # the table's order within a dataset


def row_warnings(row: dict[str, Any]) -> list[str]:
    """What makes a row's graph figures mean less than they seem."""
    out = []
    ix, rv = row["index"], row["retrieval"]
    n, bare = int(ix.get("passages", 0)), int(ix.get("passages_without_facts", 0))
    if n and bare == n:
        out.append(f"no facts from any of the {n} passages: the graph has no fact edges")
    elif n and bare * 2 > n:
        out.append(f"{bare} of {n} passages without facts")
    fb, nq = rv["modes"]["graph"].get("fallbacks", 0), rv["n_queries"]
    if fb:
        out.append(f"graph fell back to dense scores on {fb} of {nq} queries (no phrase match)")
    if nq < 10:
        out.append(f"{nq} queries: latency p50 includes first-call warm-up")
    return out


def merged_rows(old_rows: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of an earlier result file, those run now replacing theirs; shipped order."""
    old = old_rows if isinstance(old_rows, list) else []
    new = {(r["dataset"], r["backend"]): r for r in rows}
    keep = {(r["dataset"], r["backend"]): r for r in old if isinstance(r, dict)}
    keep.update(new)
    for r in keep.values():  # derived from the row alone: recomputed with the current rules
        if r.get("status") == "ok":
            r["warnings"] = row_warnings(r)
    order = {d: i for i, d in enumerate(SHIPPED_DATASETS)}
    return sorted(
        keep.values(),
        key=lambda r: (order.get(r["dataset"], 99), r["dataset"], BACKENDS.index(r["backend"])),
    )
