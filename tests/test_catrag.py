"""CatRAG (retrieve/catrag.py) and the HippoRAG 2 options of the graph section: the edited
operator's PPR against igraph's prpack on the same edited directed graph, the edits one
by one, the parameters' one-line errors, and catrag on the shipped sample index."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import igraph as ig
import numpy as np
import pytest

from r2adapter.config import GraphParams, load_params, settings
from r2adapter.errors import R2AError
from r2adapter.retrieve.catrag import check_ablations, tier_source
from r2adapter.retrieve.catrag_graph import CatragMaps, build_maps
from r2adapter.retrieve.catrag_tiers import SimilarityTiers, Transitions
from r2adapter.retrieve.graph import Seeding, phrase_seeds
from r2adapter.retrieve.graph_index import (
    FACT_EDGE,
    PASSAGE_EDGE,
    SYNONYM_EDGE,
    Edges,
    Operator,
)
from r2adapter.retrieve.ppr import ColumnEdits, personalized_pagerank, ppr_edited
from r2adapter.retrieve.strategies import STRATEGIES, check_strategies, check_strategy

# ---- the edited operator against igraph -------------------------------------------------


def _random_graph(seed: int, n: int = 200, m: int = 700) -> tuple[int, Edges]:
    """A simple undirected weighted graph (no loops, no parallel pairs), the last nodes
    isolated, its edges of the three kinds."""
    rng = np.random.default_rng(seed)
    pairs: set[tuple[int, int]] = set()
    while len(pairs) < m:
        a, b = (int(x) for x in rng.integers(0, n - 3, 2))
        if a != b:
            pairs.add((min(a, b), max(a, b)))
    src, dst = (np.array(x, dtype=np.int64) for x in zip(*sorted(pairs), strict=True))
    kind = rng.choice([FACT_EDGE, PASSAGE_EDGE, SYNONYM_EDGE], len(src))
    return n, Edges(src, dst, rng.random(len(src)) * 3 + 0.05, kind.astype(np.int64))


def _igraph_ppr(
    n: int, out_weights: dict[int, dict[int, float]], reset: np.ndarray, damping: float
) -> np.ndarray:
    """prpack on the directed graph whose node u has out-edges `out_weights[u]`."""
    edges, weights = [], []
    for u, row in out_weights.items():
        for v, w in row.items():
            if w > 0:
                edges.append((u, v))
                weights.append(w)
    g = ig.Graph(n=n, edges=edges, directed=True)
    g.es["weight"] = weights
    return np.array(
        g.personalized_pagerank(
            directed=True,
            damping=damping,
            reset=reset.tolist(),
            weights="weight",
            implementation="prpack",
        )
    )


@pytest.mark.unit
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ppr_on_the_edited_operator_matches_igraph(seed: int) -> None:
    """A few nodes' out-edges rescaled (one to nothing: a dangling node) and normalised
    again, only their columns edited; our power iteration on P + Δ against prpack on the
    directed graph with exactly those out-weights."""
    n, edges = _random_graph(seed)
    op = Operator.build(n, edges, 1.0, 1.0)
    rng = np.random.default_rng(seed + 10)
    adj = op.adjacency.tocsr()
    out = {
        u: dict(zip(adj[u].indices.tolist(), adj[u].data.tolist(), strict=True)) for u in range(n)
    }
    degree = np.diff(adj.indptr)
    seeds = [int(u) for u in rng.choice(np.flatnonzero(degree >= 2), 4, replace=False)]
    columns = {}
    for i, u in enumerate(seeds):
        targets = adj[u].indices
        old = adj[u].data
        factor = (
            np.zeros(len(targets))
            if i == 0
            else rng.choice([0.0, 0.3, 0.5, 5.0, 10.0], len(targets))
        )
        if i == 1:
            factor[0] = 5.0  # at least one edge left
        new = old * factor
        out[u] = dict(zip(targets.tolist(), new.tolist(), strict=True))
        col = new / new.sum() if new.sum() > 0 else np.zeros_like(new)
        columns[u] = (targets, col - old / old.sum())
    reset = np.zeros(n)
    reset[rng.choice(n, 10, replace=False)] = rng.random(10)
    reset[seeds] += 0.5
    edits = ColumnEdits.from_columns(op.transition, columns)
    ref = _igraph_ppr(n, out, reset, 0.5)
    for method in ("chebyshev", "power"):
        ours, iterations = ppr_edited(op.transition, reset, edits, 0.5, 1e-8, method=method)
        assert np.abs(ours - ref).max() < 1e-6, (method, np.abs(ours - ref).max())
        assert ours.sum() == pytest.approx(1.0) and iterations < 100
    # no edits: the power iteration agrees with the Chebyshev solver
    none = ColumnEdits.from_columns(op.transition, {})
    plain, _ = ppr_edited(op.transition, reset, none, damping=0.5, tol=1e-8)
    cheb = personalized_pagerank(op.transition, reset, damping=0.5, tol=1e-8)
    assert np.abs(plain - cheb).max() < 1e-6


def _tiny_graph() -> tuple[SimpleNamespace, CatragMaps, Operator]:
    """Entities 0..4, passages 5..7. Facts: f0 (0, 1), f1 (0, 2), f2 (0, 3), f3 (3, 4);
    passage 5 holds f0 and f1, passage 6 holds f2, passage 7 holds f3; a synonym 1–4."""
    n_e, fact_ends = 5, np.array([[0, 1], [0, 2], [0, 3], [3, 4]])
    src = [0, 0, 0, 3, 5, 5, 5, 6, 6, 7, 7, 1]
    dst = [1, 2, 3, 4, 0, 1, 2, 0, 3, 3, 4, 4]
    kind = [FACT_EDGE] * 4 + [PASSAGE_EDGE] * 7 + [SYNONYM_EDGE]
    weight = [1.0, 2.0, 1.0, 1.0] + [1.0] * 7 + [0.9]
    edges = Edges(np.array(src), np.array(dst), np.array(weight), np.array(kind))
    op = Operator.build(8, edges, 1.0, 1.0)
    g = SimpleNamespace(
        n_entities=n_e,
        n_nodes=8,
        fact_ends=fact_ends,
        passage_ids=["p5", "p6", "p7"],
        entity_names=["a", "b", "c", "d", "e"],
        entity_passages=np.array([2.0, 1.0, 1.0, 2.0, 1.0]),
        version=SimpleNamespace(id=1, dataset="tiny"),
    )
    maps = build_maps(g, [(0, "p5"), (1, "p5"), (2, "p6"), (3, "p7")])  # type: ignore[arg-type]
    return g, maps, op


@pytest.mark.unit
def test_edge_tiers_prune_and_keyfact_keep_the_passage_total() -> None:
    """The edits as the retriever makes them for a query (CatragRetriever.adapt: Stage I,
    the similarity tiers, the pruning past k_edge, the key-fact passages) on the tiny graph,
    seeded at entity 0, then what each edit does to entity 0's column."""
    from r2adapter.retrieve.catrag import CatragRetriever

    g, maps, op = _tiny_graph()
    g.cached = lambda key, build: maps  # catrag_maps(g): this graph's maps
    g.operator = lambda *scales: op
    scores = np.array([0.97, 0.6, 0.3, 1.0])  # normalised query–fact scores
    p = GraphParams(k_edge=2)
    r = CatragRetriever.__new__(CatragRetriever)
    r.params, r.tiers = p, SimilarityTiers(p)

    def edits(ablate: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        r.ablate = ("anchoring", ablate)  # edges or keyfact off: the other one alone
        seeding = Seeding(np.zeros(8), True, scores, [2], {0: 1.0}, np.zeros(3))
        return r.adapt(g, seeding, None, np.zeros(4), "q").columns  # type: ignore[arg-type]

    bands = Transitions(*[np.zeros(4, dtype=np.int64)] * 3, np.array([1.0, 0.85, 0.5, 0.1]))
    assert SimilarityTiers(p).multipliers(None, bands).tolist() == [10.0, 5.0, 0.5, 0.0]  # type: ignore[arg-type]
    # key-fact: entity 0's top fact f2 lives in passage 6, which gets β; 0's passage total
    # (passages 5 and 6, weight 1 each) stays 2
    cols = edits("edges")
    assert set(cols) == {0, 3}  # f2 joins 0 and 3
    targets, change = cols[0]
    old = op.adjacency[0].toarray().ravel()
    new = old / old.sum() + np.bincount(targets, change, minlength=8)
    passages = new[5:] * old.sum()
    assert passages[:2].sum() == pytest.approx(2.0) and passages[1] / passages[0] == pytest.approx(
        2.5
    )
    assert new.sum() == pytest.approx(1.0) and (new >= -1e-12).all()
    # the edges tier: entity 0's neighbours ranked by the best joining fact, 1 (.97:
    # direct, ×10) and 2 (.6: weak, ×.5) within k_edge, 3 past it (pruned, ×.3); its
    # passage edges untouched, the column normalised again
    cols = edits("keyfact")
    assert set(cols) == {0}
    targets, change = cols[0]
    new = old / old.sum() + np.bincount(targets, change, minlength=8)
    assert (p.tier_direct, p.tier_weak, p.tier_pruned) == (10.0, 0.5, 0.3)
    want = old * np.array([1, 10.0, 0.5, 0.3, 1, 1, 1, 1])
    assert np.allclose(new, want / want.sum())


@pytest.mark.unit
def test_an_index_without_fact_passages_names_the_index_to_rebuild() -> None:
    g, _, _ = _tiny_graph()
    with pytest.raises(R2AError) as e:
        build_maps(g, [])  # type: ignore[arg-type]
    assert "\n" not in str(e.value) and "rebuild it with `r2a index --dataset tiny`" in str(e.value)


@pytest.mark.unit
def test_seed_weighting_released_and_averaged() -> None:
    """Phrase 0 is in both top facts (scores 1 and .5), passages per phrase 2, 1, 1."""
    g = SimpleNamespace(
        fact_ends=np.array([[0, 1], [0, 2]]), entity_passages=np.array([2.0, 1.0, 1.0])
    )
    scores, top = np.array([1.0, 0.5]), np.array([0, 1])
    released = phrase_seeds(g, scores, top, GraphParams(linking_top_k=3))  # type: ignore[arg-type]
    # the last fact's score ÷ passages; ranked by the mean fact score: 0 (.75), 1, 2
    assert released == {0: 0.25, 1: 1.0, 2: 0.5} and list(released) == [1, 0, 2]
    p = GraphParams(linking_top_k=2, seed_weighting="averaged")
    averaged = phrase_seeds(g, scores, top, p)  # type: ignore[arg-type]
    # mean of score ÷ passages: 0 → (.5 + .25)/2 = .375, 1 → 1, 2 → .5; the top two kept
    assert averaged == {1: 1.0, 2: 0.5}


# ---- names and parameters: one-line errors ---------------------------------------------


@pytest.mark.unit
def test_strategy_names_are_one_table() -> None:
    from r2adapter.adapter import MODES
    from serving.requests import Mode

    assert list(STRATEGIES)[:3] == ["dense", "graph", "catrag"]  # then ADR's (test_adr_context)
    assert MODES == ("auto", *STRATEGIES) and set(Mode.__args__) == set(MODES)  # type: ignore[attr-defined]
    assert check_strategies(["catrag", "graph"]) == ("graph", "catrag")
    assert check_strategies(None) == ("dense", "graph", "catrag")
    for bad in (lambda: check_strategy("bm42"), lambda: check_ablations(["hubs"])):
        with pytest.raises(R2AError) as e:
            bad()
        assert "\n" not in str(e.value) and "choose" in str(e.value)
    with pytest.raises(R2AError, match="unknown graph.tier_source 'oracle'"):
        tier_source(GraphParams(tier_source="oracle"))  # past the config's check


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("R2A_HOME", str(tmp_path))
    settings.cache_clear()
    yield tmp_path
    monkeypatch.undo()
    settings.cache_clear()


@pytest.mark.unit
@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("tier_source: oracle", "graph.tier_source"),
        ("seed_weighting: summed", "graph.seed_weighting"),
        ("fact_filter: gpt", "graph.fact_filter"),
        ("fact_edge_scale: 0", "graph.fact_edge_scale"),
        ("keyfact_beta: 0.5", "graph.keyfact_beta"),
        ("k_edge: 0", "graph.k_edge"),
        ("similarity_bands: [0.5, 0.8, 0.9]", "graph.similarity_bands"),
        ("tier_high: -1", "graph.tier_high"),
        ("entity_match: fuzzy", "graph.entity_match"),
        ("catrag_ablate: [hubs]", "graph.catrag_ablate"),
        ("catrag_synonym_scale: 0", "graph.catrag_synonym_scale"),
        ("anchor_phrases: nouns", "graph.anchor_phrases"),
    ],
)
def test_bad_graph_parameters_are_one_line(home: Path, line: str, named: str) -> None:
    (home / "params.yaml").write_text(f"graph:\n  {line}\n")
    with pytest.raises(R2AError) as e:
        load_params()
    assert "\n" not in str(e.value) and named in str(e.value)


@pytest.mark.unit
def test_the_defaults_are_todays_graph_and_the_papers_catrag(home: Path) -> None:
    p = load_params().graph
    assert (p.fact_edge_scale, p.synonym_edge_scale, p.seed_weighting) == (1.0, 1.0, "released")
    assert (p.fact_filter, p.tier_source) == ("none", "similarity")
    assert (p.anchor_epsilon, p.keyfact_beta, p.n_seed, p.k_edge) == (0.2, 2.5, 5, 15)
    (home / "params.yaml").write_text("graph:\n  fact_edge_scale: 2\n  tier_source: learned\n")
    p = load_params().graph
    assert (p.fact_edge_scale, p.tier_source) == (2.0, "learned")


@pytest.mark.unit
def test_anchor_phrases_entities_leaves_noun_chunks_out() -> None:
    from r2adapter.nlp.ner import query_phrases

    q = "Who is the spouse of the director of the film Titanic?"
    both, named = query_phrases([q])[0], query_phrases([q], chunks=False)[0]
    assert set(named) < set(both)  # the chunks ("the spouse", ...) only with chunks
    assert any("spouse" in p for p in both) and not any("spouse" in p for p in named)


@pytest.mark.unit
def test_catrag_synonym_scale_multiplies_synonym_edges_and_names_the_rebuild() -> None:
    """graph.catrag_synonym_scale (CatRAG's released code: × 3) scales catrag's synonym
    edges only; on an index with no synonym edge it is one line naming the rebuild."""
    from r2adapter.retrieve.catrag import CatragRetriever

    _, _, op = _tiny_graph()
    edges = Edges(
        np.array([0, 5, 1]), np.array([1, 0, 4]), np.array([1.0, 1.0, 0.9]),
        np.array([FACT_EDGE, PASSAGE_EDGE, SYNONYM_EDGE]),
    )  # fmt: skip
    r = CatragRetriever.__new__(CatragRetriever)
    r.dataset = "tiny"
    r.params = GraphParams(synonym_edge_scale=2.0, catrag_synonym_scale=3.0)
    assert r.scales == (1.0, 6.0)
    tripled = Operator.build(8, edges, *r.scales)
    assert tripled.adjacency[1, 4] == pytest.approx(0.9 * 6.0)
    assert tripled.adjacency[0, 1] == pytest.approx(1.0)  # fact edges as they were
    g = SimpleNamespace(edges=edges, version=SimpleNamespace(id=4))
    r.cache = SimpleNamespace(get=lambda dataset: g)  # type: ignore[assignment]
    r.check_synonyms()  # a synonym edge exists: fine
    g.edges = Edges(edges.src[:2], edges.dst[:2], edges.weight[:2], edges.kind[:2])
    with pytest.raises(R2AError) as e:
        r.check_synonyms()
    msg = str(e.value)
    assert "\n" not in msg and "version 4 of tiny" in msg and "r2a index --dataset tiny" in msg
    r.params = GraphParams()  # 1.0: nothing to check
    r.check_synonyms()


# ---- on the shipped sample index ---------------------------------------------------------


@pytest.fixture
def sample_index(sample_dataset: str) -> str:
    return sample_dataset


@pytest.mark.integration
def test_catrag_retrieves_and_each_ablation_runs(sample_index: str) -> None:
    from r2adapter.retrieve.catrag import CatragRetriever
    from r2adapter.retrieve.graph import GraphRetriever

    seen: list[dict[str, float]] = []
    c = CatragRetriever(sample_index)
    c.observe = lambda ppr, op, info: seen.append(info)
    c.warmup()
    hits = c.retrieve("When was Thomas Christian Sudhof born?", 3)
    assert len(hits) == 3 and hits[0].title == "Thomas C. Sudhof"
    assert hits[0].score >= hits[1].score >= hits[2].score
    assert seen and seen[0]["edited_columns"] > 0 and seen[0]["edit_ms"] < 50
    q = "Who founded BrainCheck?"
    for ablate in (("anchoring",), ("edges",), ("keyfact",)):
        assert (
            CatragRetriever(sample_index, ablate=ablate).retrieve(q, 3)[0].title == "David Eagleman"
        )
    # every edit off: the static graph, to the solver's tolerance
    off = CatragRetriever(sample_index, ablate=("anchoring", "edges", "keyfact"))
    vec = off.encoder.encode_query(q)
    ours = off.scores(vec, None, q)[0]
    graph = GraphRetriever(sample_index).scores(vec)[0]
    assert np.abs(ours - graph).max() < 1e-5


@pytest.mark.integration
def test_cli_catrag_retrieve_and_evaluate(
    sample_index: str, pg_env: dict[str, str], tmp_path: Path
) -> None:
    from tests.conftest import run_cli

    r = run_cli(
        [
            "retrieve",
            "--dataset",
            "sample",
            "--mode",
            "catrag",
            "--json",
            "Who founded BrainCheck?",
        ],
        pg_env,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["mode"] == "catrag" and out["hits"][0]["title"] == "David Eagleman"
    r = run_cli(["retrieve", "--dataset", "sample", "--mode", "bm42", "Who?"], pg_env)
    assert r.returncode != 0 and "invalid choice: 'bm42'" in r.stderr
    args = ["evaluate", "retrieval", "--dataset", "sample", "--mode", "graph", "--mode", "catrag"]
    r = run_cli([*args, "--ablate", "keyfact", "--json"], pg_env)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert list(report["modes"]) == ["graph", "catrag"]
    for m in report["modes"].values():
        assert {"recall@5", "fcr@2", "fcr@5", "hub_mass", "ppr_weighted_strength"} <= set(m)
        assert 0 <= m["hub_mass"] <= 1 and m["ppr_weighted_strength"] > 0
    assert report["modes"]["catrag"]["ablate"] == ["keyfact"]
    r = run_cli(
        ["evaluate", "retrieval", "--dataset", "sample", "--mode", "dense", "--ablate", "edges"],
        pg_env,
    )
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0
    assert "include catrag in --mode" in r.stderr
    # the learned tier source on a fresh home: a retrieval only loads a model, so without
    # one it is a one-line error naming the command that trains it; after that command,
    # retrieval loads the one saved file (issue 25: no request trains a model)
    home = tmp_path / "home"
    home.mkdir()
    (home / "params.yaml").write_text("graph:\n  tier_source: learned\n")
    env = {**pg_env, "R2A_HOME": str(home)}
    ask = [
        "retrieve",
        "--dataset",
        "sample",
        "--mode",
        "catrag",
        "--json",
        "Who founded BrainCheck?",
    ]
    r = run_cli(ask, env)
    last = r.stderr.strip().splitlines()[-1]  # after the encoder's load bar: one error line
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert last.startswith("error:") and "r2a catrag train-tiers --dataset sample" in last
    assert not list((home / ".cache").glob("catrag/sample/tiers-v*.json"))
    r = run_cli(["catrag", "train-tiers", "--dataset", "sample", "--json"], env)
    assert r.returncode == 0, r.stderr
    r = run_cli(ask, env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["hits"]
    assert len(list((home / ".cache" / "catrag" / "sample").glob("tiers-v*.json"))) == 1
    (home / "params.yaml").write_text("graph:\n  tier_source: magic\n")
    r = run_cli(
        ["retrieve", "--dataset", "sample", "--mode", "catrag", "Who?"],
        {**pg_env, "R2A_HOME": str(home)},
    )
    assert r.returncode == 1 and "graph.tier_source must be one of" in r.stderr
