"""The routing report over every router (r2adapter/reports/plane.py
`plane_report`) on a plane built by hand: it takes its routers from the caller (a family's
plane, the champions, other families' rows) and reaches up to none of them."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from r2adapter.errors import R2AError
from r2adapter.evaluate import routing_report as rr
from r2adapter.reports import plane as plane_module
from r2adapter.reports.plane import plane_report

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class S:
    name: str
    graph_side: bool


TABLE = [S("dense@5", False), S("graph@5", True), S("graph+rw@5", True)]


def _plane(protocol: str = "test") -> rr.Plane:
    n = 6
    recall = np.array([[1.0, 1.0, 1.0], [0.0, 1.0, 1.0], [0.0, 0.0, 1.0]] * 2)
    m = {
        "recall": recall,
        "full": recall,
        "passages": np.full((n, 3), 5.0),
        "tokens": np.tile([400.0, 600.0, 650.0], (n, 1)),
        "ms": np.tile([10.0, 30.0, 70.0], (n, 1)),
    }
    return rr.Plane(
        dataset="toy",
        protocol=protocol,
        query_ids=[f"q{i}" for i in range(n)],
        questions=[f"question {i}" for i in range(n)],
        qv=np.zeros((n, 4)),
        m=m,
        table=TABLE,
        kway_cols=[0, 1, 2],
        budget=0.4,
        max_passages=5.0,
        strategies=["dense@5", "graph@5", "graph+rw@5"],
        labelled_strategies=["dense@5", "graph@5", "graph+rw@5"],
        kway_choice=np.array([0, 1, 2, 0, 1, 2]),
        kway_ms=np.full(n, 1.0),
        notes=["kway: from the plane"],
    )


class _Ner:
    def decide(self, queries: list[str]) -> Any:
        return SimpleNamespace(graph=np.array([queries[0].endswith(("1", "4"))]))


def test_the_report_takes_its_routers_from_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plane_module, "db_labels", lambda *a, **k: [])
    monkeypatch.setattr(plane_module, "NERRouter", _Ner)
    monkeypatch.setattr(plane_module, "graphs", lambda: None)

    class Router:
        def bind(self, dataset: str, graphs: Any) -> None: ...

        def decide(self, queries: list[str], qv: Any) -> Any:
            return SimpleNamespace(graph=np.array([not queries[0].endswith(("0", "3"))]))

    def champion(kind: str) -> Any:
        if kind == "r2a":
            raise R2AError("no champion for r2a")
        return Router(), "7"

    def adr_rows(dataset, protocol, ids, routers, notes) -> None:
        routers["adr"] = {"recall": 0.5, "n": len(ids)}
        notes.append(f"adr: {dataset} {protocol}")

    plane = _plane()
    rep = plane_report(plane, champion, ("r2a", "r2a_embed"), extra=(adr_rows,))
    routers = rep["routers"]
    # the fixed strategies, then kway from the plane, then the two-way champion with and
    # without the rewrite, the baseline, the oracles, the other family's rows
    assert list(routers) == [
        "always_dense@5",
        "always_graph@5",
        "always_graph+rw@5",
        "kway",
        "r2a_embed",
        "r2a_embed_rw",
        "ner",
        "oracle",
        "oracle_routed",
        "adr",
    ]
    assert routers["kway"] == rr.router_figures(plane.kway_choice, plane.kway_ms, plane.m, TABLE)
    assert routers["kway"]["recall"] == pytest.approx(1.0)
    assert routers["r2a_embed"]["recall"] == pytest.approx(4 / 6)  # graph@5 misses q2, q5
    assert routers["r2a_embed_rw"]["recall"] == pytest.approx(1.0)
    assert routers["oracle"]["mean_ms"] == pytest.approx((10 + 30 + 70) / 3)  # cheapest best
    assert routers["ner"]["graph_usage"] == pytest.approx(2 / 6)
    assert routers["adr"] == {"recall": 0.5, "n": 6}
    assert rep["notes"][0] == "kway: from the plane" and "r2a: no champion for r2a" in rep["notes"]
    assert "adr: toy test" in rep["notes"]
    assert rep["paired"]["kway_vs_r2a_embed"]["diff"] == pytest.approx(2 / 6)
    assert set(rep["paired"]) >= {"kway_vs_always_graph@5", "hull_at_kway_cost"}
    assert "frontier_at_two_way_cost" not in rep["ablation"]  # cv5 only
    assert plane.notes == ["kway: from the plane"]  # the plane is not written into


def test_with_two_way_and_columns() -> None:
    assert rr.with_two_way(["catrag@5", "graph@5"]) == ["catrag@5", "graph@5", "dense@5"]
    m = _plane().m
    sub = rr.columns(m, [0, 1])
    assert sub["recall"].shape == (6, 2)
    assert sub["suitable"][2].tolist() == [True, True]  # both miss: both reach the best
