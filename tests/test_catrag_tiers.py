"""CatRAG's tier sources (retrieve/catrag_tiers.py, catrag_train.py): the learned scorer's
fit and bands on crafted data, its file's one-line errors, Stage I's kept transitions on a
tiny graph, and on the sample index the features, training, caching and lazy training."""

from __future__ import annotations

import json

import numpy as np
import pytest

from r2adapter.config import GraphParams
from r2adapter.errors import R2AError
from r2adapter.retrieve.catrag import stage_one_kept
from r2adapter.retrieve.catrag_tiers import (
    FEATURES,
    TierModel,
    banded,
    fit_tiers,
    tier_multipliers,
)
from tests.test_catrag import _tiny_graph

# ---- the learned scorer: pure ---------------------------------------------------------------


def _crafted(n: int = 4000, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Transitions whose label follows the query–neighbour similarity (feature 1) and not
    the fact score (feature 0), which the reference (similarity) tiers band."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, len(FEATURES)))
    x[:, 3] = rng.random(n) < 0.1
    y = (rng.random(n) < 1 / (1 + np.exp(-(8 * x[:, 1] - 6)))).astype(np.int64)
    reference = banded(x[:, 0], (0.95, 0.8, 0.5))
    return x, y, reference


@pytest.mark.unit
def test_the_scorer_learns_the_label_and_keeps_the_reference_tier_shares() -> None:
    x, y, reference = _crafted()
    model = fit_tiers(x, y, reference)
    assert int(np.argmax(np.abs(model.coef))) == 1 and model.coef[1] > 0
    learned = banded(model.proba(x), model.bands)
    for tier in (3, 2, 1):  # as many transitions at each tier or above as the reference
        assert abs(np.mean(learned >= tier) - np.mean(reference >= tier)) < 0.002
    # its direct tier holds more gold neighbours than the reference's
    assert y[learned == 3].mean() > y[reference == 3].mean() + 0.2
    assert model.meta["transitions"] == len(y)
    assert model.meta["positive_rate"] == pytest.approx(y.mean())


@pytest.mark.unit
def test_the_scorer_needs_both_labels_and_its_file_is_checked() -> None:
    x, y, reference = _crafted(200)
    with pytest.raises(R2AError) as e:
        fit_tiers(x, np.zeros_like(y), reference)
    assert "\n" not in str(e.value) and "both labels" in str(e.value)
    model = fit_tiers(x, y, reference)
    back = TierModel.from_json(json.loads(json.dumps(model.to_json())))
    assert np.allclose(back.proba(x), model.proba(x)) and back.bands == model.bands
    bad = {**model.to_json(), "coef": [1.0, 2.0]}
    with pytest.raises(R2AError, match="wrong shape: delete it to retrain"):
        TierModel.from_json(bad, "m.json")
    with pytest.raises(R2AError, match="is not a tier model"):
        TierModel.from_json({**model.to_json(), "features": ["x"]}, "m.json")


@pytest.mark.unit
def test_stage_one_keeps_the_first_k_edge_neighbours_of_the_top_seeds() -> None:
    g, maps, _ = _tiny_graph()
    scores = np.array([0.97, 0.6, 0.3, 1.0])
    p = GraphParams(k_edge=2, n_seed=2)
    # three seeds by weight: 0, 3, then 1 (beyond n_seed)
    kept, ranked = stage_one_kept(g, maps, {3: 0.5, 0: 0.9, 1: 0.1}, scores, p)  # type: ignore[arg-type]
    assert list(ranked) == [0, 3]
    assert ranked[0].tolist() == [1, 2, 3] and ranked[3].tolist() == [4, 0]
    assert kept.seeds.tolist() == [0, 0, 3, 3]
    assert kept.nbrs.tolist() == [1, 2, 4, 0]
    assert kept.facts.tolist() == [0, 1, 3, 2]
    assert np.allclose(kept.scores, [0.97, 0.6, 1.0, 0.3])
    assert tier_multipliers(p)[banded(kept.scores, p.similarity_bands)].tolist() == [
        10.0,
        0.5,
        10.0,
        0.0,
    ]


# ---- on the sample index -----------------------------------------------------------------


@pytest.fixture
def sample_index(sample_dataset: str) -> str:
    return sample_dataset


@pytest.mark.integration
def test_features_and_a_handmade_model_tier_the_dense_top_titles(sample_index: str) -> None:
    """A scorer that reads only "is a dense top-5 title" puts exactly those neighbours
    in the direct tier; the features are what they say."""
    from r2adapter.retrieve.catrag import CatragRetriever
    from r2adapter.retrieve.catrag_tiers import (
        LearnedTiers,
        TierQuery,
        Transitions,
        features,
        title_entities,
    )
    from r2adapter.retrieve.graph import seed_graph

    p = GraphParams(tier_source="learned")
    model = TierModel((0.0,) * 4, (1.0,) * 4, (0.0, 0.0, 0.0, 20.0), -10.0, (0.9, 0.5, 0.1))
    source = LearnedTiers(p, model)
    r = CatragRetriever(sample_index, params=p, tiers=source)
    g = r.cache.get(sample_index)
    op = g.operator()
    q = "Who founded BrainCheck?"
    vec = r.encoder.encode_query(q)
    seeding = seed_graph(g, vec, p)
    titled = title_entities(g)
    top5 = np.argsort(-seeding.passage_scores)[:5]
    on_top = sorted({int(e) for e in titled[top5] if e >= 0})
    assert on_top, "the sample's top passages are titled by entities"
    nbrs = np.array([on_top[0], *[e for e in range(g.n_entities) if e not in on_top][:3]])
    t = Transitions(
        np.zeros(4, np.int64), nbrs, np.zeros(4, np.int64), np.array([0.1, 0.2, 0.3, 0.4])
    )
    tq = TierQuery(g, op, vec, q, seeding.passage_scores)
    x = features(tq, t)
    assert x[:, 0].tolist() == [0.1, 0.2, 0.3, 0.4] and x[:, 3].tolist() == [1, 0, 0, 0]
    assert np.allclose(x[:, 2], np.log1p(op.strength[nbrs]))
    from r2adapter.retrieve.catrag import entity_embeddings

    assert np.allclose(x[:, 1], entity_embeddings(g)[nbrs] @ vec, atol=1e-5)
    assert source.tiers(tq, t).tolist() == [3, 0, 0, 0]
    assert source.multipliers(tq, t).tolist() == [p.tier_direct] + [p.tier_irrelevant] * 3


@pytest.mark.integration
def test_train_tiers_caches_and_the_learned_source_loads_it(
    sample_index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from r2adapter.retrieve import catrag_train
    from r2adapter.retrieve.catrag import CatragRetriever, similarity_retriever
    from r2adapter.retrieve.catrag_tiers import LearnedTiers, model_path

    p = GraphParams(tier_source="learned")
    model, path = catrag_train.train_tiers(similarity_retriever(sample_index, p))
    assert path.is_file() and path.parent.name == sample_index
    assert model.meta["queries"] == 1 and 0 < model.meta["positive_rate"] < 1
    assert TierModel.from_json(json.loads(path.read_text())).coef == model.coef

    def no_training(*a: object, **k: object) -> None:
        raise AssertionError("retrained although the model is cached")

    monkeypatch.setattr(catrag_train, "train_tiers", no_training)
    r = CatragRetriever(sample_index, params=p)
    assert isinstance(r.tiers, LearnedTiers)
    r.warmup()
    assert r.tiers.model is not None and r.tiers.model.coef == model.coef
    assert r.retrieve("Who founded BrainCheck?", 3)[0].title == "David Eagleman"
    # other parameters that shape the transitions: another file
    other = model_path(r.cache.get(sample_index), GraphParams(k_edge=3), [])
    assert other != path


@pytest.mark.integration
def test_no_training_labels_is_one_line(sample_index: str) -> None:
    from r2adapter.retrieve.catrag_tiers import training_queries

    with pytest.raises(R2AError) as e:
        training_queries("no-such-dataset")
    assert "\n" not in str(e.value) and "no training labels" in str(e.value)
    assert "tier_source to similarity" in str(e.value)


@pytest.mark.integration
def test_cli_train_tiers(sample_index: str, pg_env: dict[str, str]) -> None:
    from tests.conftest import run_cli

    r = run_cli(["catrag", "train-tiers", "--dataset", sample_index, "--json"], pg_env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["features"] == list(FEATURES) and len(out["coef"]) == 4
    assert out["path"].endswith(".json") and out["meta"]["queries"] == 1
    r = run_cli(["catrag", "train-tiers", "--dataset", "nope"], pg_env)
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0
    assert "no training labels" in r.stderr
