"""`r2a evaluate routing --protocol cv5|test|all`: every router and every single strategy on
the quality–cost plane of the strategy labels (r2adapter/evaluate/routing_report.py `Plane`),
with the k-way family's plane and rows (r2adapter/kway/evaluate.py `kway_plane`), the two-way
routers trained out of fold (r2adapter/twoway/folds.py) or their registered champions, other
families' rows handed in as `extra`, and paired intervals (r2adapter/evaluate/stats.py).
Routing latencies come from the one timer (r2adapter/evaluate/timing.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from r2adapter.config import label_params
from r2adapter.errors import R2AError
from r2adapter.evaluate.routing_report import (
    REWRITTEN_GRAPH,
    Champion,
    ExtraRows,
    Matrix,
    Plane,
    StrategyLike,
    graphs,
    mixture_ceiling,
    oracle_choice,
    router_figures,
    two_way_choice,
)
from r2adapter.evaluate.stats import paired_bootstrap
from r2adapter.evaluate.timing import time_per_query
from r2adapter.label.annotate import LabelRecord, db_labels
from r2adapter.route.baselines import NERRouter
from r2adapter.route.kinds import TRAINED_ROUTERS


def _time_two_way(
    decide: Callable[[str, np.ndarray], bool], questions: Sequence[str], qv: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A two-way router's graph decisions and routing ms, one query at a time (the one
    timer, r2adapter/evaluate/timing.py)."""
    graph, ms = time_per_query(lambda i: decide(questions[i], qv[i : i + 1]), len(questions))
    return np.array(graph, dtype=bool), ms


def _two_way_oof(kind: str, plane: Plane, records: dict[str, LabelRecord]) -> np.ndarray:
    from r2adapter.twoway.folds import two_way_oof

    missing = [q for q in plane.query_ids if q not in records]
    if missing:
        raise R2AError(f"{len(missing)} queries have no two-way labels: run `r2a label`")
    oof = two_way_oof(kind, [records[q] for q in plane.query_ids], plane.dataset)
    return np.array(
        [oof[q]["p_graph"] - oof[q]["p_dense"] > oof[q]["tau"] for q in plane.query_ids]
    )


def _two_way_latency(kind: str, plane: Plane, champion: Champion, notes: list[str]) -> np.ndarray:
    """The registered champion's routing latency per query (the folds' routers are the same
    network shape); without a champion, routing counts as free, and the note says so."""
    try:
        router, _ = champion(kind)
    except R2AError as e:
        notes.append(f"{kind}: routing latency not measured ({e})")
        return np.zeros(len(plane.query_ids))
    router.bind(plane.dataset, graphs())
    _, ms = _time_two_way(
        lambda q, v: bool(router.decide([q], v).graph[0]), plane.questions, plane.qv
    )
    return ms


def _two_way_champion(
    kind: str, plane: Plane, champion: Champion, notes: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """A registered two-way champion's decisions, timed; on `all`, τ calibrated label-free to
    its graph budget on the corpus's own questions."""
    from r2adapter.config import router_params

    router, version = champion(kind)
    router.bind(plane.dataset, graphs())
    if plane.protocol == "all":
        usage = router_params(TRAINED_ROUTERS[kind].backbone).max_graph_usage
        tau = router.calibrate(plane.questions, usage, plane.qv)
        notes.append(f"{kind}: champion v{version}, τ calibrated to {tau:.3f} (usage {usage})")
    return _time_two_way(
        lambda q, v: bool(router.decide([q], v).graph[0]), plane.questions, plane.qv
    )


def _ner(plane: Plane) -> tuple[np.ndarray, np.ndarray]:
    ner = NERRouter()
    return _time_two_way(lambda q, v: bool(ner.decide([q]).graph[0]), plane.questions, plane.qv)


def frontier_at(
    two_way: dict[str, np.ndarray],
    routers: dict[str, dict[str, Any]],
    frontier: list[dict[str, Any]],
    per_budget: dict[float, np.ndarray],
    m: Matrix,
    kway_cols: Sequence[int],
) -> dict[str, Any]:
    """For each two-way router, kway's two frontier points around its mean ms: `within`,
    the costliest budget at no more ms, and `above`, the cheapest budget over it (a
    frontier point a few tenths of a ms dearer is the same cost within timing noise); each
    paired with the router on the same queries."""
    out: dict[str, Any] = {}
    rows = np.arange(len(m["recall"]))
    for name, ch in two_way.items():
        ms = routers[name]["mean_ms"]
        sides = {
            "within": max(
                (f for f in frontier if f["mean_ms"] <= ms + 1e-9),
                key=lambda f: f["mean_ms"],
                default=None,
            ),
            "above": min(
                (f for f in frontier if f["mean_ms"] > ms + 1e-9),
                key=lambda f: f["mean_ms"],
                default=None,
            ),
        }
        out[name] = {"router_recall": routers[name]["recall"], "router_ms": ms}
        for side, f in sides.items():
            if f is None:
                out[name][side] = None
                continue
            picked = np.array([kway_cols[c] for c in per_budget[f["budget"]]])
            out[name][side] = {
                "budget": f["budget"],
                "kway_recall": f["recall"],
                "kway_ms": f["mean_ms"],
                "paired": paired_bootstrap(m["recall"][rows, picked], m["recall"][rows, ch]),
            }
    return out


def paired_rows(
    chosen: dict[str, np.ndarray],
    m: Matrix,
    table: Sequence[StrategyLike],
    routers: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """kway against each router and the best fixed strategies, paired on the same queries;
    and against the fixed strategies' hull (the best random mix of them) at kway's own mean
    ms and mean passages."""
    if "kway" not in chosen:
        return {}
    rows = np.arange(len(chosen["kway"]))
    kr = m["recall"][rows, chosen["kway"]]
    out: dict[str, Any] = {}
    for name, ch in chosen.items():
        if name != "kway":
            out[f"kway_vs_{name}"] = paired_bootstrap(kr, m["recall"][rows, ch])
    for j, s in enumerate(table):
        if s.name in ("graph@5", "catrag@5"):
            out[f"kway_vs_always_{s.name}"] = paired_bootstrap(kr, m["recall"][:, j])
    k = routers["kway"]
    ceiling, mixed = mixture_ceiling(m, range(len(table)), k["mean_ms"], k["mean_passages"])
    out["hull_at_kway_cost"] = {
        "hull_recall": ceiling if np.isfinite(ceiling) else None,
        "kway_recall": k["recall"],
        "gap": k["recall"] - ceiling if np.isfinite(ceiling) else None,
        "paired": paired_bootstrap(kr, mixed) if np.isfinite(ceiling) else None,
    }
    return out


def plane_report(
    plane: Plane,
    champion: Champion,
    two_way: Sequence[str] = tuple(TRAINED_ROUTERS),
    extra: Sequence[ExtraRows] = (),
) -> dict[str, Any]:
    """Every router on the plane: each fixed strategy (`always_<strategy>`), k-way (the
    plane's), each two-way router in `two_way` (cv5: trained out of fold,
    r2adapter/twoway/folds.py, timed as its registered `champion`; test/all: the
    champion), with the structural rewrite (`<kind>_rw`) when graph+rw@5 is labelled, the
    NER baseline, the oracles, `extra` families' rows, and the paired intervals."""
    table, m, n = plane.table, plane.m, len(plane.query_ids)
    notes = list(plane.notes)
    routers: dict[str, dict[str, Any]] = {}
    zero = np.zeros(n)
    for j, s in enumerate(table):
        routers[f"always_{s.name}"] = router_figures(np.full(n, j), zero, m, table)
    routers["kway"] = router_figures(plane.kway_choice, plane.kway_ms, m, table)
    chosen: dict[str, np.ndarray] = {"kway": plane.kway_choice}
    ablation = dict(plane.ablation)
    records = {r.query_id: r for r in db_labels(plane.dataset, label_params().rule, None)}
    names = [s.name for s in table]
    for kind in two_way:
        try:
            if plane.protocol == "cv5":
                graph = _two_way_oof(kind, plane, records)
                lat2 = _two_way_latency(kind, plane, champion, notes)
            else:
                graph, lat2 = _two_way_champion(kind, plane, champion, notes)
            chosen[kind] = two_way_choice(graph, table)
            routers[kind] = router_figures(chosen[kind], lat2, m, table)
            if REWRITTEN_GRAPH in names:
                # as served with the structural rewriter: every graph-bound query rewritten
                # (router.structural_epsilon), so its graph side is graph+rw@5
                rw = f"{kind}_rw"
                chosen[rw] = two_way_choice(graph, table, REWRITTEN_GRAPH)
                routers[rw] = router_figures(chosen[rw], lat2, m, table)
        except R2AError as e:
            notes.append(f"{kind}: {e}")
    if plane.protocol == "cv5":
        ablation["frontier_at_two_way_cost"] = frontier_at(
            {k: v for k, v in chosen.items() if k != "kway"},
            routers,
            plane.frontier,
            plane.per_budget,
            m,
            plane.kway_cols,
        )
    ner_graph, ner_ms = _ner(plane)
    routers["ner"] = router_figures(two_way_choice(ner_graph, table), ner_ms, m, table)
    # the oracle over every labelled strategy, and over the ones kway routes among (its ceiling)
    routers["oracle"] = router_figures(oracle_choice(m, table, range(len(table))), zero, m, table)
    routers["oracle_routed"] = router_figures(
        oracle_choice(m, table, plane.kway_cols), zero, m, table
    )
    for rows in extra:  # another family's routers (ADR's, issue 16)
        rows(plane.dataset, plane.protocol, plane.query_ids, routers, notes)
    return {
        "dataset": plane.dataset,
        "protocol": plane.protocol,
        "n_queries": n,
        "budget": plane.budget,
        "max_passages": plane.max_passages,
        "strategies": plane.strategies,
        "labelled_strategies": plane.labelled_strategies,
        "routers": routers,
        "frontier": plane.frontier,
        "ablation": ablation,
        "paired": paired_rows(chosen, m, table, routers),
        "notes": notes,
    }
