"""The strategies' costs (params.yaml `kway.cost`): the calibration pass takes, per base
retriever, the minimum of each query's repeats and the median over queries, so a run
disturbed by the machine's load does not set the price; the label file keeps the
calibration, and a file from before it gets a one-line relabel request."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from r2adapter.config import kway_params
from r2adapter.errors import R2AError
from r2adapter.kway.labels import (
    StrategyLabel,
    calibrate_costs,
    evaluate_outcomes,
    export_strategy_labels,
    read_strategy_labels,
)
from r2adapter.kway.strategies import strategy_table

pytestmark = pytest.mark.unit


@dataclass
class Hit:
    passage_id: str


@dataclass
class Timed:
    """A retriever that takes `ms` a call, `spike_ms` more on the calls listed in `spikes`
    (the machine busy with something else then)."""

    ms: float
    spike_ms: float = 0.0
    spikes: set[int] = field(default_factory=set)
    calls: int = 0
    order: list[str] = field(default_factory=list)

    def retrieve(self, text: str, depth: int, qvec: object = None) -> list[Hit]:
        extra = self.spike_ms if self.calls in self.spikes else 0.0
        self.calls += 1
        time.sleep((self.ms + extra) / 1000)
        return [Hit(f"p{i}") for i in range(depth)]


class Encoder:
    def encode(self, texts: list[str]) -> np.ndarray:
        return np.zeros((len(texts), 4), dtype=np.float32)


def test_calibration_ignores_spikes_and_rotates_the_order() -> None:
    calls: list[str] = []

    class Logged(Timed):
        def retrieve(self, text: str, depth: int, qvec: object = None) -> list[Hit]:
            calls.append(self.name)
            return super().retrieve(text, depth, qvec)

    dense, graph = Logged(2.0), Logged(6.0, spike_ms=60.0, spikes={0, 1, 2, 3, 4})
    dense.name, graph.name = "dense", "graph"  # type: ignore[attr-defined]
    p = kway_params(cost="calibrated", calibration_queries=5, calibration_repeats=3)
    cost = calibrate_costs(["q"] * 20, Encoder(), {"dense": dense, "graph": graph}, p)
    # graph was disturbed on every query's first repeat: the minimum drops that run
    assert 5.5 <= cost["graph"] < 20.0
    assert 1.5 <= cost["dense"] < 10.0 and cost["graph"] > cost["dense"]
    assert set(cost) == {"embed", "dense", "graph"}
    assert dense.calls == graph.calls == 15  # 5 queries x 3 repeats
    firsts = calls[::2]  # which retriever ran first in each timed query
    assert {"dense", "graph"} <= set(firsts)  # the order rotates


def _label(cost_ms: dict[str, float]) -> StrategyLabel:
    return StrategyLabel(
        "q1",
        "Who?",
        "bridge",
        "train",
        ["p0"],
        {"dense": ["p0", "p1"], "graph": ["p1", "p0"]},
        {"embed": 1.0, "dense": 3.0, "graph": 50.0},
        {"p0": 10, "p1": 12},
        cost_ms=cost_ms,
    )


def test_calibrated_costs_price_the_strategies_and_round_trip(tmp_path: Path) -> None:
    p = kway_params(strategies=("dense@1", "graph@1"), route=(), cost="calibrated")
    table = strategy_table(p.strategies)
    lab = _label({"embed": 1.0, "dense": 2.0, "graph": 9.0})
    evaluate_outcomes(lab, table, p.rrf_k, p.cost)
    assert lab.outcomes["graph@1"].ms == pytest.approx(10.0)  # embed + graph, calibrated
    path = tmp_path / "x.strategies.jsonl"
    export_strategy_labels(path, [lab], table)
    back = read_strategy_labels("x", p, path)
    assert back[0].cost_ms == lab.cost_ms and back[0].outcomes["graph@1"].ms == 10.0
    measured = read_strategy_labels(
        "x", kway_params(strategies=p.strategies, route=(), cost="measured"), path
    )
    assert measured[0].outcomes["graph@1"].ms == pytest.approx(51.0)  # the one timing


def test_a_file_without_calibration_asks_for_a_relabel(tmp_path: Path) -> None:
    p = kway_params(strategies=("dense@1", "graph@1"), route=())
    table = strategy_table(p.strategies)
    lab = _label({})
    evaluate_outcomes(lab, table, p.rrf_k)
    path = tmp_path / "x.strategies.jsonl"
    export_strategy_labels(path, [lab], table)
    with pytest.raises(R2AError) as e:
        read_strategy_labels(
            "x", kway_params(strategies=p.strategies, route=(), cost="calibrated"), path
        )
    assert "r2a label --dataset x" in str(e.value) and "\n" not in str(e.value)


def test_an_unknown_cost_is_refused() -> None:
    with pytest.raises(R2AError, match="kway.cost"):
        kway_params(cost="cheapest").check()


def test_cpu_costs_price_the_strategies_and_an_older_file_asks_for_a_relabel(
    tmp_path: Path,
) -> None:
    p = kway_params(strategies=("dense@1", "graph@1"), route=(), cost="cpu")
    table = strategy_table(p.strategies)
    lab = _label({})
    lab.cpu_ms = {"embed": 0.5, "dense": 0.8, "graph": 30.0}
    evaluate_outcomes(lab, table, p.rrf_k, p.cost)
    assert lab.outcomes["graph@1"].ms == pytest.approx(30.5)  # embed + graph, CPU
    path = tmp_path / "x.strategies.jsonl"
    export_strategy_labels(path, [lab], table)
    back = read_strategy_labels("x", p, path)
    assert back[0].cpu_ms == lab.cpu_ms and back[0].outcomes["dense@1"].ms == 1.3
    wall = read_strategy_labels(
        "x", kway_params(strategies=p.strategies, route=(), cost="measured"), path
    )
    assert wall[0].outcomes["graph@1"].ms == pytest.approx(51.0)  # the wall clock's
    lab.cpu_ms = {}  # a file from before CPU times were recorded
    export_strategy_labels(path, [lab], table)
    with pytest.raises(R2AError) as e:
        read_strategy_labels("x", p, path)
    assert "r2a label --dataset x" in str(e.value) and "\n" not in str(e.value)


def test_cpu_median_prices_every_query_at_the_files_median_cpu(tmp_path: Path) -> None:
    p = kway_params(strategies=("dense@1", "graph@1"), route=(), cost="cpu_median")
    table = strategy_table(p.strategies)
    labs = []
    for i, graph_cpu in enumerate([20.0, 30.0, 90.0]):  # one query disturbed: 90 ms
        lab = _label({})
        lab.query_id = f"q{i}"
        lab.cpu_ms = {"embed": 1.0, "dense": 2.0 + i, "graph": graph_cpu}
        evaluate_outcomes(lab, table, p.rrf_k, "cpu")
        labs.append(lab)
    path = tmp_path / "x.strategies.jsonl"
    export_strategy_labels(path, labs, table)
    back = read_strategy_labels("x", p, path)
    # every query: embed 1 + the median graph 30 (not its own 20 or 90), dense 1 + 3
    assert [b.outcomes["graph@1"].ms for b in back] == [31.0, 31.0, 31.0]
    assert [b.outcomes["dense@1"].ms for b in back] == [4.0, 4.0, 4.0]
    assert "median_cpu_ms" not in path.read_text()  # not stored: the cpu_ms give it again
    own = read_strategy_labels(
        "x", kway_params(strategies=p.strategies, route=(), cost="cpu"), path
    )
    assert [b.outcomes["graph@1"].ms for b in own] == [21.0, 31.0, 91.0]
    for lab in labs:
        lab.cpu_ms = {}
    export_strategy_labels(path, labs, table)
    with pytest.raises(R2AError, match="kway.cost: cpu_median") as e:
        read_strategy_labels("x", p, path)
    assert "\n" not in str(e.value)
