"""Serving through one path (issue 25, item 3): every family's `route` gives the one
decision record, the service's /route answer is read off it, and the adapter retrieves what
it says."""

from __future__ import annotations

import math

import numpy as np
import pytest

from r2adapter.kway.model import KwayDecision
from r2adapter.route.family import Champion, Route

pytestmark = pytest.mark.unit

NAMES = ("dense@5", "graph@5", "graph+rw@5", "dense@20")


class FakeKway:
    """A k-way model whose heads' scores depend on the question: decide() as KwayRouter's."""

    calls = 0

    class cfg:  # noqa: N801 - the attribute the family reads
        encoder = "unused"

    tau = [0.5, 0.6, 0.7, 0.8]

    def decide(self, questions: list[str], qvecs: np.ndarray) -> KwayDecision:
        FakeKway.calls += 1
        p = np.array([[(len(q) * (j + 3)) % 7 / 7 for j in range(4)] for q in questions])
        picked = [NAMES[int(np.argmax(row))] for row in p]
        return KwayDecision(picked, [5] * len(questions), p, p.max(axis=1) < 0.5, NAMES)


def test_kway_routes_a_batch_in_one_decision_as_one_query_at_a_time() -> None:
    from r2adapter.kway.registry import KwayFamily

    fam = KwayFamily()
    qs = ["who is x", "a much longer question about y", "z?", "what did w write"]
    qv = np.arange(len(qs) * 3, dtype=np.float32).reshape(len(qs), 3)
    FakeKway.calls = 0
    batch = fam.route(FakeKway(), qs, qv, "7")
    assert FakeKway.calls == 1
    for i, q in enumerate(qs):
        (one,) = fam.route(FakeKway(), [q], qv[i : i + 1], "7")
        assert batch[i] == one
        assert np.array_equal(batch[i].qvec, qv[i])
    r = batch[1]
    assert r.strategy in NAMES and r.k == int(r.strategy.split("@")[1])
    assert r.side == ("graph" if r.strategy.startswith("graph") else "dense")
    assert r.rewrite == ("+rw" in r.strategy)
    assert r.threshold == FakeKway.tau[NAMES.index(r.strategy)]
    # p_dense / p_graph: the most confident head of each side
    assert r.p_dense == max(v for n, v in r.scores.items() if n.startswith("dense"))
    assert r.p_graph == max(v for n, v in r.scores.items() if n.startswith("graph"))
    assert (r.router, r.version) == ("kway", "7")


class FakeTwoWay:
    """A two-way model: Router.decide with eq. 4 at τ and eq. 7 at ε."""

    tau, epsilon, uses_embedding = 0.5, 0.9, True

    def decide(self, queries, qvecs=None, encode=None):  # type: ignore[no-untyped-def]
        from r2adapter.route.decision import decide

        if qvecs is None and encode is not None:
            qvecs = encode(list(queries))
        p_graph = np.array([len(q) / 40 for q in queries])
        return decide(1 - p_graph, p_graph, self.tau, self.epsilon, qvecs)


def test_two_way_routes_follow_eqs_4_and_7_and_carry_the_embedding() -> None:
    from r2adapter.route.kinds import TRAINED_ROUTERS
    from r2adapter.twoway.family import TwoWayFamily

    fam = TwoWayFamily(next(iter(TRAINED_ROUTERS.values())))
    qs = [
        "short",
        "a question of medium length",
        "which long question: who wrote it",
        "a question long enough for no rewrite",
    ]
    seen: list[list[str]] = []

    def encode(batch: list[str]) -> np.ndarray:
        seen.append(batch)
        return np.ones((len(batch), 4), dtype=np.float32)

    routes = fam.route(FakeTwoWay(), qs, None, "3", encode=encode)
    assert seen == [qs]  # one encode for the batch
    assert [(r.side, r.rewrite) for r in routes] == [
        ("dense", False), ("dense", False), ("graph", True), ("graph", False),
    ]  # fmt: skip
    for q, r in zip(qs, routes, strict=True):
        p_g = len(q) / 40
        graph = p_g - (1 - p_g) > 0.5  # eq. 4 at τ = .5
        assert r.side == r.mode == r.strategy == ("graph" if graph else "dense")
        assert r.rewrite == (r.side == "graph" and p_g < 0.9)  # eq. 7
        assert math.isclose(r.p_graph, p_g) and math.isclose(r.p_dense, 1 - p_g)
        assert (r.threshold, r.epsilon, r.k, r.version) == (0.5, 0.9, None, "3")
        assert r.qvec is not None and r.qvec.shape == (4,)


def test_the_service_answer_is_read_off_the_route() -> None:
    from serving.service import route_out

    two = Route("graph", "graph", None, True, {"dense": 0.3, "graph": 0.7}, 0.5, "r2a", "2",
                side="graph", p_dense=0.3, p_graph=0.7, epsilon=0.8)  # fmt: skip
    out = route_out(two)
    assert out == {
        "decision": "graph", "p_dense": 0.3, "p_graph": 0.7, "rewrite": True, "tau": 0.5,
        "epsilon": 0.8, "router_version": "2",
    }  # fmt: skip
    kway = Route("catrag@5", "catrag", 5, False, {"catrag@5": 0.9}, 0.4, "kway", "4",
                 side="graph", p_dense=0.1, p_graph=0.9)  # fmt: skip
    out = route_out(kway)
    assert out["epsilon"] == 0.0  # the strategy says whether to rewrite
    assert (out["strategy"], out["retriever"], out["k"], out["router"]) == (
        "catrag@5", "catrag", 5, "kway",
    )  # fmt: skip


def test_the_adapter_retrieves_what_the_route_says() -> None:
    """auto: the route's retriever, its k, its embedding reused; a fixed mode routes nothing."""
    from r2adapter.adapter import R2Adapter
    from r2adapter.retrieve.base import Hit

    class Recording:
        def __init__(self, name: str) -> None:
            self.name, self.calls = name, []

        def retrieve(self, q, k, qvec=None):  # type: ignore[no-untyped-def]
            self.calls.append((q, k, qvec))
            return [Hit(f"{self.name}-{i}", 1.0, "t", "x") for i in range(k)]

    class Enc:
        encoded: list[str] = []

        def encode(self, qs):  # type: ignore[no-untyped-def]
            return np.zeros((len(qs), 4), dtype=np.float32)

        def encode_query(self, q):  # type: ignore[no-untyped-def]
            Enc.encoded.append(q)
            return np.zeros(4, dtype=np.float32)

    class Fam:
        name = "kway"

        def route(self, model, queries, qvecs=None, version="", encode=None):  # type: ignore[no-untyped-def]
            vec = encode(list(queries))
            return [Route("catrag@8", "catrag", 8, False, {}, 0.5, "kway", version,
                          side="graph", p_dense=0.2, p_graph=0.8, qvec=vec[i])  # fmt: skip
                    for i in range(len(queries))]  # fmt: skip

    dense, graph, catrag = Recording("d"), Recording("g"), Recording("c")
    adapter = R2Adapter(
        Champion(Fam(), None, "9"),  # type: ignore[arg-type]
        dense, graph, Enc(), others={"catrag": catrag},  # type: ignore[arg-type]
    )  # fmt: skip
    res = adapter.run("who wrote the book?", "auto", 5)
    assert (res.decision, res.strategy, res.k, len(res.passages)) == ("catrag", "catrag@8", 8, 8)
    assert catrag.calls and catrag.calls[0][2] is not None and not Enc.encoded  # reused
    assert (res.p_dense, res.p_graph) == (0.2, 0.8)
    res = adapter.run("who wrote the book?", "dense", 3)
    assert (res.decision, res.strategy, len(res.passages)) == ("dense", None, 3)
    assert res.p_graph is None and res.p_dense is None
