"""ADR's operators as the paper defines their contexts (on a hand-made hypergraph, no
database), the trained classifier's saved form and gate, and the ADR strategies' place in
the strategy table, the service's modes and DVC's index stage."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from r2adapter.adr import operators as ops_mod
from r2adapter.adr.operators import NEAR_POOL, AdrIndex, AdrOperators, specific_entities
from r2adapter.adr.router import AdrRouter, SoftmaxHead
from r2adapter.config import adr_params

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[1]


def _unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float64)
    return v / np.linalg.norm(v)


def _index() -> AdrIndex:
    """Entities a..f; facts 0 (a-b), 1 (b-c), 2 (c-d), 3 (e-f); one sentence of p1 relates
    a, b, c (hyperedge 0: facts 0, 1) and one of p2 c, d, e (hyperedge 1: fact 2); deep
    edge 0 holds insight 0, deep edge 1 insight 1."""
    names = ["a", "b", "c", "d", "e", "f"]
    ends = [(0, 1), (1, 2), (2, 3), (4, 5)]
    facts = [[] for _ in names]
    for f, (s, o) in enumerate(ends):
        facts[s].append(f)
        facts[o].append(f)
    return AdrIndex(
        version=1, dim=2, entity_names=names, entity_id={n: i for i, n in enumerate(names)},
        fact_emb=np.stack([_unit(1, 0), _unit(1, 1), _unit(0, 1), _unit(1, -1)]),
        fact_lines=["a r b", "b r c", "c r d", "e r f"], fact_tokens=np.array([3, 3, 3, 3]),
        fact_passages=[["p1"], ["p1"], ["p2"], ["p3"]], entity_facts=facts,
        entity_hyperedges=[[0], [0], [0, 1], [1], [1], []],
        hyperedge_passage=["p1", "p2"], hyperedge_facts=[[0, 1], [2]],
        insight_emb=np.stack([_unit(1, 0), _unit(0, 1)]), vertex_edge=np.array([0, 1]),
        edge_members=[[0], [1]], edge_shown=[[0], [1]], narratives=["N0", "N1"],
        narrative_tokens=np.array([10, 20]), narrative_emb=np.stack([_unit(1, 0), _unit(0, 1)]),
        passage_tokens={"p1": 100, "p2": 100, "p3": 100},
        entity_specific=np.ones(len(names), dtype=bool),
    )  # fmt: skip


@pytest.fixture
def ops(monkeypatch: pytest.MonkeyPatch) -> AdrOperators:
    """Operators whose eq. 2 finds entity a and eq. 6 insight 1 (deep edge 1)."""
    o = object.__new__(AdrOperators)
    o.p = replace(adr_params(), k_e=1, k_d=1, anchor="embedding", edge_match="member",
                  fact_tokens=0, context_passages=0, max_up_edges=0)  # fmt: skip
    o.dataset, o.ix = "toy", _index()
    nearest = {"adr_entity_embeddings": [(0, 0.9)], "adr_insight_vertices": [(1, 0.8)]}
    monkeypatch.setattr(ops_mod, "connection", nullcontext)
    monkeypatch.setattr(ops_mod.store, "nearest", lambda c, table, *a: nearest[table])
    return o


def test_the_contexts_are_the_papers_facts_and_narratives_without_passages(ops) -> None:
    q = _unit(1, 0)
    s, m, c = (ops.run(n, q) for n in ("simple", "moderate", "complex"))
    # simple, eq. 3: the facts touching a (0) and those of hyperedge 0 holding a (0, 1)
    assert s.facts == ["a r b", "b r c"] and s.insights == [] and s.tokens == 6
    assert s.passage_ids == ["p1"]  # ranked by the facts touching the anchors
    # moderate, eq. 4-5: + the narrative of the deep edge above hyperedge 0
    assert m.facts == s.facts and m.insights == ["N0"] and m.tokens == 6 + 10
    # complex, eq. 6-7: edge 1's narrative and the facts of hyperedge 1 (π⁻¹ of insight 1)
    assert c.insights == ["N1"] and c.facts == ["c r d"] and c.tokens == 20 + 3
    assert c.passage_ids == ["p2"]


def test_the_budgets_bound_the_context_only_when_set(ops) -> None:
    q = _unit(1, 0)
    ops.p = replace(ops.p, fact_tokens=3, context_passages=1)
    s = ops.run("simple", q)
    assert s.facts == ["a r b"] and s.tokens == 3 + 100  # one fact, one passage's text
    ops.p = replace(ops.p, fact_tokens=0, context_passages=0, max_up_edges=1, k_e=2)
    ops.ix.entity_hyperedges[0] = [0, 1]  # a also in hyperedge 1: two edges above
    m = ops.run("moderate", q)
    assert m.insights == ["N0"]  # the one most query-similar of the two


def test_a_specific_entity_is_neither_function_words_nor_a_hub() -> None:
    names = ["of", "the first", "film", "ann lee", "of oslo", "1977", ""]
    insights = [1, 1, 103, 2, 3, 50, 0]
    # stop words only: out; "film" in 103 > 50 insights: a hub, out; 50 insights: in
    assert specific_entities(names, insights, 50).tolist() == [
        False, False, False, True, True, True, False,
    ]  # fmt: skip
    # the same limit as the Leiden step's hubs: 0 leaves no entity that is in an insight
    assert specific_entities(["ann lee", "bob"], [1, 0], 0).tolist() == [False, True]


def test_only_specific_entities_anchor_named_or_nearest(ops, monkeypatch) -> None:
    """With `anchor_filter: specific` an unspecific entity (here c, in both hyperedges)
    anchors neither as named in the question nor as a nearest one, whose pool is
    NEAR_POOL × k_e deep so that k_e remain; `none` keeps the old anchors and E_sub.
    A question whose named entities fill k_e makes no nearest-entity query at all."""
    asked: list[int] = []

    def nearest(conn, table, version, dim, qvec, k):  # type: ignore[no-untyped-def]
        asked.append(k)
        return [(2, 0.9), (3, 0.8), (0, 0.7), (5, 0.6)][:k]

    monkeypatch.setattr(ops_mod.store, "nearest", nearest)
    ops.ix.entity_specific = np.array([True, True, False, True, True, True])
    q = _unit(1, 0)
    old = {}
    for flt in ("none", "specific"):
        ops.p = replace(ops.p, anchor="lexical", k_e=1, anchor_filter=flt)
        asked.clear()
        old[flt] = (ops.run("simple", q, "did c meet d?"), ops.run("simple", q, ""), asked[:])
    named, near, pools = old["none"]
    # none: c, named first, anchors; E_sub its facts and those of hyperedges 0 and 1;
    # only the question without names asked for the nearest entities
    assert named.anchors == ["c"] and near.anchors == ["c"] and pools == [1]
    assert named.facts == ["a r b", "b r c", "c r d"] and named.tokens == 9
    named, near, pools = old["specific"]
    # specific: d, the next named one, and the nearest specific one; E_sub hyperedge 1 only
    assert named.anchors == ["d"] and near.anchors == ["d"] and pools == [NEAR_POOL]
    assert named.facts == ["c r d"] and named.tokens == 3


def test_the_saved_router_round_trips(tmp_path: Path) -> None:
    head = SoftmaxHead(np.array([[1.0, 0], [0, 1.0], [0, 0]]), np.zeros(3))
    r = AdrRouter(head, 0.75, "minilm", "toy")
    r.save(tmp_path / "r")
    back = AdrRouter.load(tmp_path / "r")
    assert (back.gamma, back.encoder, back.dataset) == (0.75, "minilm", "toy")
    x = np.array([[5.0, 0.0], [0.1, 0.0]])
    assert [d.operator for d in back.decide(x)] == ["simple", "moderate"]  # 2nd: fallback
    from r2adapter.errors import R2AError

    with pytest.raises(R2AError, match="not a saved ADR router"):
        AdrRouter.load(tmp_path / "nothing")


def test_the_gate_holds_quality_and_every_cost() -> None:
    from r2adapter.adr.registry import gate

    champ = {"recall": 0.66, "fcr": 0.35, "mean_ms": 22.0, "mean_passages": 5.0,
             "mean_tokens": 1000.0}  # fmt: skip
    assert gate(dict(champ), champ) == (True, [])
    ok, why = gate({**champ, "mean_tokens": 1100.0, "fcr": 0.30}, champ)
    assert not ok and len(why) == 2 and "mean_tokens" in why[1] and "fcr" in why[0]


def test_the_adr_strategies_are_modes_but_not_the_evaluation_default() -> None:
    from r2adapter.adapter import MODES
    from r2adapter.adr.strategies import ADR_STRATEGIES
    from r2adapter.retrieve.strategies import STRATEGIES, check_strategies, make_retriever
    from serving.requests import parse_request

    assert set(ADR_STRATEGIES) <= set(STRATEGIES) and set(ADR_STRATEGIES) <= set(MODES)
    assert not set(check_strategies(None)) & set(ADR_STRATEGIES)
    assert check_strategies(["adr", "dense"]) == ("dense", "adr")
    r = make_retriever("adr_complex", "toy", seed_triplets=True)  # no load until a query
    assert (r.mode, r.operator) == ("adr_complex", "complex")
    assert make_retriever("adr", "toy").mode == "adr"
    assert parse_request("who?", "adr_simple").mode == "adr_simple"


def test_dvc_index_stage_reruns_on_the_hypergraph_build_params() -> None:
    from r2adapter.adr.store import BUILD_FIELDS

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    adr = yaml.safe_load((ROOT / "params.yaml").read_text())["adr"]
    index = set(stages["index"]["params"])
    assert "adr.enabled" in index
    for name in BUILD_FIELDS:
        if name in adr:  # DVC reads only what params.yaml holds
            assert f"adr.{name}" in index, name
    assert all(p.split(".", 1)[1] in adr for p in index if p.startswith("adr."))
