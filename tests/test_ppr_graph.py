"""Pure graph pieces: PPR against igraph's prpack, graph construction, synonyms, seeds."""

from __future__ import annotations

import igraph as ig
import numpy as np
import pytest

from r2adapter.config import GraphParams
from r2adapter.data.metrics import average_rank, full_chain, recall_at_k
from r2adapter.data.schema import Extraction
from r2adapter.index.graph import build_parts, synonym_edges
from r2adapter.index.openie import clean_triples, normalize_phrase
from r2adapter.retrieve.ppr import Transition, personalized_pagerank

pytestmark = pytest.mark.unit  # no Postgres, no server


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ppr_matches_igraph_prpack(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, m = 300, 900
    src, dst = rng.integers(0, n - 5, m), rng.integers(0, n - 5, m)  # last 5 nodes isolated
    keep = src != dst
    src, dst, w = src[keep], dst[keep], rng.random(keep.sum()) + 0.05
    reset = np.zeros(n)
    reset[rng.choice(n, 12, replace=False)] = rng.random(12)
    ours = personalized_pagerank(Transition.from_edges(n, src, dst, w), reset, damping=0.5)
    g = ig.Graph(n=n, edges=list(zip(src.tolist(), dst.tolist(), strict=True)), directed=False)
    g.es["weight"] = w.tolist()
    ref = np.array(
        g.personalized_pagerank(
            directed=False,
            damping=0.5,
            reset=reset.tolist(),
            weights="weight",
            implementation="prpack",
        )
    )
    assert np.abs(ours - ref).max() < 1e-6
    assert ours.sum() == pytest.approx(1.0)


def test_ppr_rejects_empty_reset() -> None:
    t = Transition.from_edges(2, np.array([0]), np.array([1]), np.array([1.0]))
    with pytest.raises(ValueError):
        personalized_pagerank(t, np.zeros(2))


def test_build_parts_known_answer() -> None:
    ex = [
        Extraction(
            [],
            [
                ("Lothair II", "mother", "Ermengarde of Tours"),
                ("Lothair II", "mother", "Ermengarde of Tours"),
                ("Lothair II", "king of", "Lotharingia"),
            ],
        ),
        Extraction(
            [], [("Ermengarde of Tours", "died on", "20 March 851"), ("X", "is", "x")]
        ),  # self-loop after normalisation: dropped
    ]
    parts = build_parts(["p1", "p2"], ex)
    assert parts.entities == ["lothair ii", "ermengarde of tours", "lotharingia", "20 march 851"]
    assert parts.facts == [(0, "mother", 1), (0, "king of", 2), (1, "died on", 3)]
    assert parts.fact_weight == [2, 1, 1]
    assert ("p2", 1) in parts.passage_entities and ("p1", 1) in parts.passage_entities
    assert len(parts.passage_entities) == 5
    assert parts.fact_texts()[2] == "ermengarde of tours died on 20 march 851"


def test_synonym_edges_threshold_and_short_names() -> None:
    v = np.array([[1, 0], [0.9, np.sqrt(1 - 0.81)], [0, 1], [1, 0]], dtype=np.float32)
    edges = synonym_edges(v, ["barack obama", "obama barack", "paris", "us"], threshold=0.8)
    assert [(a, b) for a, b, _ in edges] == [(0, 1)]  # "us" is too short for a synonym
    assert edges[0][2] == pytest.approx(0.9, abs=1e-6)


def test_normalisation_and_triple_cleaning() -> None:
    assert normalize_phrase("  Lothair  II's!") == "lothair ii s"
    assert clean_triples([["a", "r", "b"], ["a", "b"], ["", "r", "b"], [1, 2, 3], "x"]) == [
        ("a", "r", "b")
    ]


def test_metrics_known_answers() -> None:
    ranked = ["a", "b", "c", "d", "e", "f"]
    assert recall_at_k(ranked, ["a", "f"], 5) == 0.5
    assert recall_at_k(ranked, ["b", "a"], 2) == 1.0
    assert full_chain(ranked, ["a", "e"], 5) == 1.0 and full_chain(ranked, ["a", "f"], 5) == 0.0
    assert average_rank(ranked, ["b", "z"], depth=200) == (2 + 201) / 2


def test_params_are_hipporag2_defaults() -> None:
    p = GraphParams()
    assert (p.linking_top_k, p.passage_node_weight, p.damping, p.synonym_threshold) == (
        5,
        0.05,
        0.5,
        0.8,
    )
