"""The one routing decision (r2adapter/route/decision.py): its rule on known answers, and
every caller (router protocol, adapter, MLflow model, evaluation) giving the same result."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from r2adapter.route.base import Router
from r2adapter.route.decision import EPSILON, decide

pytestmark = pytest.mark.unit  # no Postgres, no server

QUERIES = [f"question number {i} about someone" for i in range(24)]


def test_rule_on_known_answers() -> None:
    p_dense = np.array([0.2, 0.2, 0.5, 0.4, 0.1])
    p_graph = np.array([0.5, 0.9, 0.6, 0.5, 0.3])  # margins .3 .7 .1 .1 .2
    d = decide(p_dense, p_graph, tau=0.15, epsilon=0.6)
    assert d.graph.tolist() == [True, True, False, False, True]  # graph iff margin > τ
    assert d.rewrite.tolist() == [True, False, False, False, True]  # graph and p_graph < ε
    assert [d.label(i) for i in range(len(d))] == ["graph", "graph", "dense", "dense", "graph"]
    edge = decide(np.array([0.25]), np.array([0.5]), tau=0.25, epsilon=0.5)
    assert not edge.graph[0] and not edge.rewrite[0]  # both comparisons are strict
    assert EPSILON == 0.6 and decide(np.array([0.0]), np.array([0.59]), 0.0).rewrite[0]


def test_epsilon_one_rewrites_every_graph_bound_query() -> None:
    """ε ≥ 1 (router.structural_epsilon): every query routed to graph is rewritten, a
    saturated p_graph of exactly 1.0 too; a query routed to dense never is."""
    d = decide(np.array([0.0, 0.0, 0.8]), np.array([1.0, 0.55, 0.2]), tau=0.0, epsilon=1.0)
    assert d.graph.tolist() == [True, True, False]
    assert d.rewrite.tolist() == [True, True, False]
    assert decide(np.array([0.0]), np.array([0.8]), 0.0, epsilon=0.9).rewrite[0]


class Fixed(Router):
    """A router with given scores."""

    name = "fixed"

    def __init__(self, p_graph: float, reads: bool) -> None:
        self.p_graph, self.reads = p_graph, reads
        self.tau, self.epsilon = 0.1, 0.7

    @property
    def uses_embedding(self) -> bool:
        return self.reads

    def score(
        self, queries: Sequence[str], qvecs: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        n = len(queries)
        return np.full(n, 0.3), np.full(n, self.p_graph)


def test_router_decide_encodes_only_for_routers_that_read_embeddings() -> None:
    calls: list[list[str]] = []

    def encode(qs: list[str]) -> np.ndarray:
        calls.append(qs)
        return np.ones((len(qs), 4), dtype=np.float32)

    reader, other = Fixed(0.5, reads=True), Fixed(0.5, reads=False)
    d = reader.decide(["q1", "q2"], encode=encode)
    assert calls == [["q1", "q2"]] and d.qvecs is not None and d.qvecs.shape == (2, 4)
    assert d.graph.all() and d.rewrite.all() and (d.tau, d.epsilon) == (0.1, 0.7)
    assert other.decide(["q1"], encode=encode).qvecs is None and len(calls) == 1
    given = np.zeros((1, 4), dtype=np.float32)
    assert reader.decide(["q"], given, encode=encode).qvecs is given and len(calls) == 1
    assert Fixed(0.35, reads=False).route(["q"]).tolist() == [False]  # margin .05 ≤ τ


class Hashed(Router):
    """Scores from a hash of the query: deterministic, spread over [0, 1]."""

    name = "hashed"

    def score(
        self, queries: Sequence[str], qvecs: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        rng = [np.random.default_rng(sum(map(ord, q)) * 7919) for q in queries]
        p = np.array([r.uniform(size=2) for r in rng]).reshape(len(queries), 2)
        return p[:, 0], p[:, 1]


class StubEncoder:
    dim, name = 4, "stub"

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 4), dtype=np.float32) / 2.0

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


class NoRetrieval:
    def retrieve(self, query: str, k: int, qvec: np.ndarray | None = None) -> list[object]:
        return []


class Rewriter:
    def rewrite(self, query: str) -> SimpleNamespace:
        return SimpleNamespace(rewritten=query + " [rewritten]", rewritten_ok=True, fallback=None)


def test_every_caller_takes_the_same_decision() -> None:
    from r2adapter.adapter import R2Adapter
    from r2adapter.evaluate.routing import time_router
    from r2adapter.registry.pyfunc import RouterModel
    from r2adapter.route.family import Champion
    from r2adapter.route.kinds import TRAINED_ROUTERS
    from r2adapter.twoway.columns import TWO_WAY_COLUMNS
    from r2adapter.twoway.family import TwoWayFamily

    router = Hashed()
    p_d, p_g = router.score(QUERIES)
    router.tau = float(np.median(p_g - p_d))  # about half the queries go to graph
    router.epsilon = float(np.median(p_g))  # and some of those are rewritten
    expected = decide(p_d, p_g, router.tau, router.epsilon)
    assert 0 < expected.graph.sum() < len(QUERIES) and 0 < expected.rewrite.sum()

    enc = StubEncoder()
    champion = Champion(TwoWayFamily(next(iter(TRAINED_ROUTERS.values()))), router, "1")
    adapter = R2Adapter(champion, NoRetrieval(), NoRetrieval(), enc, Rewriter())  # type: ignore[arg-type]
    routes = [adapter.route(q) for q in QUERIES]
    assert [r.side == "graph" for r in routes] == expected.graph.tolist()
    assert [r.side for r in routes] == [r.side for r in adapter.route_many(list(QUERIES))]
    assert [r.rewrite for r in routes] == expected.rewrite.tolist()
    runs = [adapter.run(q) for q in QUERIES]
    assert [r.rewritten for r in runs] == expected.rewrite.tolist()
    assert [r.decision == "graph" for r in runs] == expected.graph.tolist()
    assert not any(r.rewritten for r in (adapter.run(q, mode="graph") for q in QUERIES))

    model = RouterModel("r2a", TWO_WAY_COLUMNS)
    model.router = router
    out = model.predict(None, pd.DataFrame({"query": QUERIES}))
    assert (out["decision"] == "graph").tolist() == expected.graph.tolist()
    assert out["rewrite"].tolist() == expected.rewrite.tolist()
    assert (out["tau"] == router.tau).all() and (out["epsilon"] == router.epsilon).all()

    records = [SimpleNamespace(question=q) for q in QUERIES]
    graph, _ = time_router(router, records, enc.encode(QUERIES))  # type: ignore[arg-type]
    assert graph.tolist() == expected.graph.tolist()
    assert router.route(QUERIES).tolist() == expected.graph.tolist()
