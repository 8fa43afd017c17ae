"""ADR's operator retrieval forms (`adr.passage_rank`, issue 26) on a hand-made hypergraph
and graph index, no database: the ranking functions, the version check and what each form
changes (the passages) and keeps (the reader's facts, narratives and tokens)."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from r2adapter.adr import operators as ops_mod
from r2adapter.adr.forms import PASSAGE_RANKS, PassageRanker, fact_entities, ranker_for
from r2adapter.adr.operators import OPERATORS, AdrIndex, AdrOperators
from r2adapter.config import adr_params, graph_params
from r2adapter.errors import R2AError
from r2adapter.retrieve.graph_index import PASSAGE_EDGE, Edges, GraphIndex
from r2adapter.retrieve.ppr import Transition
from r2adapter.store.graph_store import IndexVersion

pytestmark = pytest.mark.unit

NAMES = ["a", "b", "c", "d", "e", "f"]
ENDS = [(0, 1), (1, 2), (2, 3), (4, 5)]  # facts 0 a-b, 1 b-c, 2 c-d, 3 e-f
PASSAGES = {"p1": [0, 1, 2], "p2": [2, 3, 4], "p3": [4, 5]}  # the phrases each holds
Q = np.array([1.0, 0.0])


def _unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float64)
    return v / np.linalg.norm(v)


FACT_EMB = np.stack([_unit(1, 0), _unit(1, 1), _unit(0, 1), _unit(1, -1)])


def _graph(version: int = 1) -> GraphIndex:
    """Phrase nodes a..f (0-5), passages p1..p3 (6-8); by dense cosine to Q the passages
    rank p2 (.995), p1 (.196), p3 (-1)."""
    n_e, pids = len(NAMES), list(PASSAGES)
    src, dst, w, kind = [], [], [], []
    for s, o in ENDS:
        src.append(s), dst.append(o), w.append(1.0), kind.append(0)
    count = np.zeros(n_e)
    for i, pid in enumerate(pids):
        for e in PASSAGES[pid]:
            src.append(n_e + i), dst.append(e), w.append(1.0), kind.append(PASSAGE_EDGE)
            count[e] += 1
    edges = Edges(np.array(src), np.array(dst), np.array(w), np.array(kind))
    t = Transition.from_edges(n_e + len(pids), edges.src, edges.dst, edges.weight)
    v = IndexVersion(version, "toy", "enc", 2, "spacy", "sig", {})
    pemb = np.stack([_unit(0.2, 1), _unit(1, 0.1), _unit(-1, 0)])
    return GraphIndex(
        v, n_e, pids, pids, pemb, FACT_EMB, np.array(ENDS), count, t, 0.0, list(NAMES), edges
    )


def _index() -> AdrIndex:
    """The hypergraph of test_adr_context.py: one sentence of p1 relates a, b, c
    (hyperedge 0: facts 0, 1), one of p2 c, d, e (hyperedge 1: fact 2); deep edge 0 holds
    insight 0, deep edge 1 insight 1."""
    facts: list[list[int]] = [[] for _ in NAMES]
    for f, (s, o) in enumerate(ENDS):
        facts[s].append(f)
        facts[o].append(f)
    return AdrIndex(
        version=1, dim=2, entity_names=list(NAMES), entity_id={n: i for i, n in enumerate(NAMES)},
        fact_emb=FACT_EMB, fact_lines=["a r b", "b r c", "c r d", "e r f"],
        fact_tokens=np.array([3, 3, 3, 3]), fact_passages=[["p1"], ["p1"], ["p2"], ["p3"]],
        entity_facts=facts, entity_hyperedges=[[0], [0], [0, 1], [1], [1], []],
        hyperedge_passage=["p1", "p2"], hyperedge_facts=[[0, 1], [2]],
        insight_emb=np.stack([_unit(1, 0), _unit(0, 1)]), vertex_edge=np.array([0, 1]),
        edge_members=[[0], [1]], edge_shown=[[0], [1]], narratives=["N0", "N1"],
        narrative_tokens=np.array([10, 20]), narrative_emb=np.stack([_unit(1, 0), _unit(0, 1)]),
        passage_tokens={"p1": 100, "p2": 100, "p3": 100},
        entity_specific=np.ones(len(NAMES), dtype=bool),
    )  # fmt: skip


@pytest.fixture
def ranker() -> PassageRanker:
    return PassageRanker(_graph(), graph_params())


def _ops(monkeypatch: pytest.MonkeyPatch, anchor: int = 0) -> AdrOperators:
    """Operators whose eq. 2 finds entity `anchor` (-1: none) and eq. 6 insight 1."""
    o = object.__new__(AdrOperators)
    o.p = replace(adr_params(), k_e=1, k_d=1, anchor="embedding", edge_match="member",
                  fact_tokens=0, context_passages=0, max_up_edges=0)  # fmt: skip
    o.dataset, o.ix = "toy", _index()
    o._ranker = PassageRanker(_graph(), graph_params())
    near = {
        "adr_entity_embeddings": [(anchor, 0.9)] if anchor >= 0 else [],
        "adr_insight_vertices": [(1, 0.8)],
    }
    monkeypatch.setattr(ops_mod, "connection", nullcontext)
    monkeypatch.setattr(ops_mod.store, "nearest", lambda c, table, *a: near[table])
    return o


def test_passage_rank_is_checked_and_similarity_by_default() -> None:
    assert adr_params().passage_rank == "similarity"
    for form in PASSAGE_RANKS:
        assert adr_params(passage_rank=form).passage_rank == form
    with pytest.raises(R2AError, match="adr.passage_rank must be similarity, ppr"):
        adr_params(passage_rank="pagerank")


def test_dense_reranks_every_candidate_by_passage_cosine(ranker) -> None:
    ranked, fb = ranker.dense(Q, {"p1": 0.9, "p3": 0.5, "p2": 0.1, "zz": 1.0}, 2)
    assert [p for p, _ in ranked] == ["p2", "p1"] and not fb  # "zz": no passage, left out
    assert ranked[0][1] == pytest.approx(float(_unit(1, 0.1) @ Q))
    corpus, fb = ranker.dense(Q, ["zz"], 5)  # no candidate: dense over the corpus
    assert [p for p, _ in corpus] == ["p2", "p1", "p3"] and fb


def test_ppr_walks_from_the_seeded_entities(ranker) -> None:
    ranked, fb = ranker.ppr(Q, {0: 1.0}, 3)  # a, only in p1
    assert ranked[0][0] == "p1" and not fb
    ranked, fb = ranker.ppr(Q, {5: 1.0}, 3)  # f, only in p3 (dense's last)
    assert ranked[0][0] == "p3" and not fb
    for nothing in ({}, {0: 0.0}, {0: -0.4}):  # no positive seed: dense, counted
        ranked, fb = ranker.ppr(Q, nothing, 3)
        assert [p for p, _ in ranked] == ["p2", "p1", "p3"] and fb


def test_ppr_weighs_a_seed_by_score_over_its_passages(ranker, monkeypatch) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(ranker, "walk", lambda q, w, k: seen.setdefault("w", w))
    ranker.ppr(Q, {2: 0.8, 5: 0.6}, 3)  # c in p1 and p2, f in p3 only
    assert seen["w"] == pytest.approx({2: 0.4, 5: 0.6})


def test_ppr_facts_seeds_the_ends_of_the_operators_best_facts(ranker) -> None:
    ranked, fb = ranker.ppr_facts(Q, [3], 3)  # e-f: p3 holds both ends
    assert ranked[0][0] == "p3" and not fb
    ranked, fb = ranker.ppr_facts(Q, [0], 3)  # a-b: p1
    assert ranked[0][0] == "p1" and not fb
    ranked, fb = ranker.ppr_facts(Q, [], 3)
    assert [p for p, _ in ranked] == ["p2", "p1", "p3"] and fb
    # only the first fact_top_k facts seed: with 1, fact 3 (listed first) decides
    assert ranker.ppr_facts(Q, [3, 0], 3)[0][0][0] == "p1"  # both: a and b outweigh e, f
    one = PassageRanker(ranker.g, replace(graph_params(), fact_top_k=1))
    assert one.ppr_facts(Q, [3, 0], 3)[0][0][0] == "p3"


def test_fact_entities_take_the_best_fact_score_clipped_at_zero() -> None:
    got = fact_entities(np.array(ENDS), [1, 2, 3], [0.7, 0.2, -0.5])
    assert got == {1: 0.7, 2: 0.7, 3: 0.2, 4: 0.0, 5: 0.0}


def test_the_graph_must_be_the_hypergraphs_version() -> None:
    class Cache:
        def __init__(self, g: Any) -> None:
            self.g = g

        def get(self, dataset: str) -> Any:
            if isinstance(self.g, Exception):
                raise self.g
            return self.g

    assert ranker_for("toy", 1, list(NAMES), Cache(_graph(1))).g.version.id == 1  # type: ignore[arg-type]
    fix = r"rebuild with `r2a index --dataset toy --adr`"
    with pytest.raises(R2AError, match=f"version 2.*version 1.*{fix}"):
        ranker_for("toy", 1, list(NAMES), Cache(_graph(2)))  # type: ignore[arg-type]
    with pytest.raises(R2AError, match=fix):
        ranker_for("toy", 1, [*NAMES[:-1], "g"], Cache(_graph(1)))  # type: ignore[arg-type]
    with pytest.raises(R2AError, match=f"no graph index of 'toy'.*{fix}"):
        ranker_for("toy", 1, list(NAMES), Cache(R2AError("not indexed")))  # type: ignore[arg-type]


def test_a_form_changes_the_passages_only(monkeypatch) -> None:
    """Anchor c: simple's candidates p1 (fact 1, .71) and p2 (fact 2, 0); with one passage
    similarity takes p1, dense p2; the reader's context is the same in every form."""
    ops = _ops(monkeypatch, anchor=2)
    ops.p = replace(ops.p, max_passages=1)
    got = {}
    for form in PASSAGE_RANKS:
        ops.p = replace(ops.p, passage_rank=form)
        got[form] = {n: ops.run(n, Q) for n in OPERATORS}
    for n in OPERATORS:
        ctx = {(tuple(c.facts), tuple(c.insights), c.tokens) for c in (got[f][n] for f in got)}
        assert len(ctx) == 1, n
    for n in ("simple", "moderate"):
        assert not any(got[f][n].fallback for f in got), n
    assert got["similarity"]["simple"].passage_ids == ["p1"]
    assert got["dense"]["simple"].passage_ids == ["p2"]
    assert got["similarity"]["moderate"].passage_ids == ["p1"]
    assert got["dense"]["moderate"].passage_ids == ["p2"]


def test_ppr_seeds_are_the_anchors_or_complexs_grounded_fact_entities(monkeypatch) -> None:
    ops = _ops(monkeypatch, anchor=0)
    ops.p = replace(ops.p, passage_rank="ppr")
    seen: list[dict[int, float]] = []
    walk = ops.ranker().ppr
    monkeypatch.setattr(ops.ranker(), "ppr", lambda q, e, k: seen.append(e) or walk(q, e, k))
    s, m, c = (ops.run(n, Q) for n in OPERATORS)
    assert seen[0] == {0: 0.9} and seen[1] == {0: 0.9}  # the anchor a at its cosine
    # complex: E_ground is hyperedge 1 (insight 1), its fact 2 (c-d, cosine 0 to Q)
    assert seen[2] == {2: 0.0, 3: 0.0} and c.fallback  # no positive seed: dense
    assert s.passage_ids[0] == "p1" and len(s.passage_ids) == 3  # the walk reaches all three
    assert c.passage_ids == ["p2", "p1", "p3"]


def test_no_anchor_falls_back_to_dense_and_is_counted(monkeypatch) -> None:
    ops = _ops(monkeypatch, anchor=-1)
    ops.p = replace(ops.p, passage_rank="similarity")
    assert ops.run("simple", Q).passage_ids == [] and not ops.run("simple", Q).fallback
    for form in ("ppr", "ppr_facts", "dense"):
        ops.p = replace(ops.p, passage_rank=form)
        c = ops.run("simple", Q)
        assert c.fallback and c.passage_ids == ["p2", "p1", "p3"], form


def test_named_anchors_that_fill_k_e_skip_the_hnsw_round_trip(monkeypatch) -> None:
    o = _ops(monkeypatch)
    o.p = replace(o.p, anchor="lexical", k_e=2)
    calls: list[str] = []
    monkeypatch.setattr(
        ops_mod.store, "nearest", lambda c, table, *a: calls.append(table) or [(4, 0.9)]
    )
    anchors, _, _ = o._anchor(Q, "how are a and b related")  # names a and b: k_e filled
    assert [e for e, _ in anchors] == [0, 1] and calls == []
    anchors, _, _ = o._anchor(Q, "what is a")  # one named: the nearest fill the rest
    assert [e for e, _ in anchors] == [0, 4] and calls == ["adr_entity_embeddings"]
