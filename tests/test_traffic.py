"""Issue 40: what a query costs the user (cost profiles, the reader's prompt), figures per
query type, the operating point chosen inside a leave-one-out fold, and a query set over an
already indexed corpus served from that index."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from r2adapter.config import COST_PROFILES, CostParams, cost_params, kway_params
from r2adapter.errors import R2AError
from r2adapter.evaluate.routing_report import router_figures, type_groups
from r2adapter.kway import transfer as loco
from r2adapter.kway.labels import StrategyLabel, evaluate_outcomes, outcome_matrix
from r2adapter.kway.strategies import strategy_table


def _label(qtype: str, reader: dict[str, int], overhead: int = 70) -> StrategyLabel:
    lab = StrategyLabel(
        "q-" + qtype,
        "Who directed X?",
        qtype,
        "test",
        ["p0"],
        {"dense": [f"p{i}" for i in range(8)], "graph": [f"p{i}" for i in range(8)]},
        {"embed": 1.0, "dense": 2.0, "graph": 10.0},
        {f"p{i}": 100 for i in range(8)},
    )
    lab.reader_tokens, lab.overhead_tokens = reader, overhead
    return lab


@pytest.mark.unit
def test_every_profile_prices_a_query_and_an_unknown_one_is_one_line() -> None:
    c = CostParams()
    tokens = c.priced("tokens")
    # 700 prompt and 8 answer tokens at $0.22 per 1M tokens: $155.76 per 1M queries, plus
    # 10 ms of CPU at $0.04 an hour
    assert tokens.price(10.0, 700, 8) == pytest.approx(0.22 * 708 + 0.04 / 3600 * 10 * 1000)
    gpu = c.priced("gpu")
    assert gpu.price(10.0, 700, 8) == pytest.approx(10 + 700 / 7.0 + 8 / 0.075)
    assert c.priced("retrieval").price(10.0, 700, 8) == 10.0
    assert set(COST_PROFILES) == {"retrieval", "tokens", "gpu", "local"}
    with pytest.raises(R2AError, match="unknown cost profile 'cheap'"):
        c.priced("cheap")
    with pytest.raises(R2AError, match="cost.tokens_usd_per_1m_input must be > 0"):
        cost_params(tokens_usd_per_1m_input=-1.0)
    with pytest.raises(R2AError, match="cost.profile must be one of"):
        cost_params(profile="dollars")


@pytest.mark.unit
def test_the_reader_prompt_prices_passages_not_retrievers() -> None:
    """dense@5 and graph@5 hand the reader the same tokens: under `tokens` they cost the same
    but for retrieval CPU; dense@2 hands fewer and costs less; under `retrieval` graph costs
    more whatever k."""
    table = strategy_table(["dense@2", "dense@5", "graph@5"])
    lab = _label("1hop", {f"p{i}": 130 for i in range(8)})
    evaluate_outcomes(lab, table, 60)
    assert [lab.outcomes[s.name].prompt_tokens for s in table] == [70 + 260, 70 + 650, 70 + 650]
    tok = outcome_matrix([lab], table, "tokens")["cost"][0]
    assert tok[0] < tok[1] and tok[1] == pytest.approx(tok[2], rel=1e-3)
    ret = outcome_matrix([lab], table, "retrieval")["cost"][0]
    assert ret[2] > ret[1] == ret[0]


@pytest.mark.unit
def test_figures_per_query_type_and_the_multihop_group() -> None:
    table = strategy_table(["dense@2", "graph@5"])
    labs = [_label(t, {f"p{i}": 100 for i in range(8)}) for t in ("1hop", "1hop_template", "2hop")]
    labs[2].gold = ["p0", "p6"]  # reached at 5? no: p6 is 7th; graph@5 gets p0 only
    for lab in labs:
        evaluate_outcomes(lab, table, 60)
    m = outcome_matrix(labs, table, "tokens")
    choice = np.array([0, 0, 1])
    qt = [lab.qtype for lab in labs]
    fig = router_figures(choice, np.zeros(3), m, table, qt)
    assert set(type_groups(qt)) == {"1hop", "1hop_template", "2hop", "1hop_all", "multihop"}
    assert fig["by_type"]["1hop_all"]["mean_passages"] == 2.0
    assert fig["by_type"]["multihop"]["mean_passages"] == 5.0
    assert fig["by_type"]["multihop"]["recall"] == 0.5
    assert fig["mean_cost"] == pytest.approx(m["cost"][[0, 1, 2], choice].mean())


@pytest.mark.unit
def test_the_fold_point_holds_recall_then_saves_cost() -> None:
    def row(route: str, budget: float, margin: float, rec: float, cost: float) -> dict:
        return {
            "route": route.split(","),
            "budget": budget,
            "margin": margin,
            "recall": rec,
            "mean_cost": cost,
            "best_fixed_recall": 0.80,
            "best_fixed_cost": 100.0,
        }

    rows = [
        row("dense@2,graph@5", 0.3, 0.0, 0.70, 40.0),  # cheapest, loses .10: does not hold
        row("dense@2,graph@5", 0.5, 0.0, 0.795, 60.0),  # holds at 60%
        row("dense@2,graph@5", 0.5, 0.1, 0.80, 75.0),  # holds, dearer
        row("dense@5,graph@5", 1.0, 0.0, 0.81, 100.0),
    ]
    assert loco.pick_point(rows, 0.01) == loco.Point(("dense@2", "graph@5"), 0.5, 0.0)
    # nothing holds: the best worst gap
    assert loco.pick_point(rows[:1], 0.01).budget == 0.3


@pytest.mark.unit
def test_training_joins_query_sets_over_one_corpus_and_counts_a_query_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def corpus(ids: list[str]) -> loco._Corpus:
        n = len(ids)
        labs = [_label("1hop", {}) for _ in ids]
        for lab, i in zip(labs, ids, strict=True):
            lab.query_id = i
        m = {"recall": np.zeros((n, 2)), "ms_price": np.ones(n)}
        return loco._Corpus(labs, m, np.zeros((n, 3)), np.zeros((n, 4)), np.array(["train"] * n))

    keys = {"wiki": "K1", "wiki_mixed": "K1", "hotpot": "K2"}
    monkeypatch.setattr(loco, "corpus_key", lambda c: keys[c])
    data = {"wiki": corpus(["a", "b"]), "wiki_mixed": corpus(["a", "b", "a1", "b1"]),
            "hotpot": corpus(["h"])}  # fmt: skip
    groups = loco.corpus_groups(["wiki", "wiki_mixed", "hotpot"], data)
    assert set(groups) == {"wiki_mixed+wiki", "hotpot"}
    assert [lab.query_id for lab in groups["wiki_mixed+wiki"].labels] == ["a", "b", "a1", "b1"]
    assert groups["wiki_mixed+wiki"].x.shape == (4, 4)


@pytest.mark.unit
def test_candidate_points_default_to_the_quality_point() -> None:
    table = ("dense@2", "dense@5", "graph@5", "graph+rw@5")
    every = kway_params(
        strategies=table, route=(), route_candidates=(), quality_route=("dense@5", "graph+rw@5")
    )
    assert loco.candidate_points(every) == [(("dense@5", "graph+rw@5"), every.quality_budget)]
    two = kway_params(
        strategies=table,
        route=("dense@5",),
        quality_route=(),
        route_candidates=("dense@2,graph@5", "dense@5"),
        budget_candidates=(0.5,),
    )
    assert loco.candidate_points(two) == [(("dense@2", "graph@5"), 0.5), (("dense@5",), 0.5)]


@pytest.mark.integration
def test_a_query_set_over_an_indexed_corpus_is_served_from_its_index(
    pg_env: dict[str, str], sample_dataset: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder whose passages are the indexed sample's, under another name: `r2a index`
    embeds and extracts nothing, the report names the index it shares, dense and graph
    retrieval answer on it, and leave-one-out holds both out together."""
    monkeypatch.setenv("R2A_SHARE_INDEX", "1")  # the default outside the test suite
    from r2adapter.config import settings
    from r2adapter.index.build import build_index
    from r2adapter.retrieve.strategies import make_retriever
    from r2adapter.store import graph_store as gs

    src = settings().data_dir / "sample"
    twin = tmp_path / "sample_traffic"
    twin.mkdir()
    shutil.copy(src / "sample_corpus.json", twin / "sample_traffic_corpus.json")
    queries = json.loads((src / "sample.json").read_text())
    (twin / "sample_traffic.json").write_text(json.dumps(queries))
    logs: list[str] = []
    r = build_index(str(twin), "precomputed", log=logs.append, share=True)
    # the sample's index, or another test's copy of the same passages indexed earlier
    assert r.shares_index_of and not r.created
    assert gs.corpus_key(r.shares_index_of) == gs.corpus_key(sample_dataset)
    assert r.to_report()["shares_index_of"] == r.shares_index_of
    assert any("served from its index" in line for line in logs)
    assert gs.own_version("sample_traffic") is None
    assert gs.latest_version("sample_traffic").dataset == r.shares_index_of  # type: ignore[union-attr]
    assert gs.corpus_key("sample_traffic") == gs.corpus_key(sample_dataset)
    for mode in ("dense", "graph"):
        hits = make_retriever(mode, "sample_traffic").retrieve(queries[0]["question"], 2)
        assert hits and hits[0].passage_id.startswith("chunk-")
    assert loco.corpus_key("sample_traffic") == loco.corpus_key(sample_dataset)
    # a question labelled over the same passages is not ranked again
    from r2adapter.kway.labels import (
        export_strategy_labels,
        rank_strategies,
        strategy_label_path,
    )

    p = kway_params(strategies=("dense@1", "dense@2", "graph@2"), route=())
    first = rank_strategies(sample_dataset, p)
    export_strategy_labels(strategy_label_path(sample_dataset), first, strategy_table(p.strategies))
    again = rank_strategies("sample_traffic", p)
    assert [lab.rankings for lab in again] == [lab.rankings for lab in first]
    assert [lab.cpu_ms for lab in again] == [lab.cpu_ms for lab in first]
    strategy_label_path(sample_dataset).unlink()


@pytest.mark.integration
def test_a_twin_indexed_by_another_openie_backend_is_not_shared(
    pg_env: dict[str, str], sample_dataset: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sample is indexed from its precomputed triples; the same passages asked for with
    spaCy's get an index of their own (a graph of other triples), and the log says why."""
    monkeypatch.setenv("R2A_SHARE_INDEX", "1")
    from r2adapter.config import settings
    from r2adapter.index.build import build_index
    from r2adapter.store import graph_store as gs

    src = settings().data_dir / "sample"
    twin = tmp_path / "sample_spacy"
    twin.mkdir()
    shutil.copy(src / "sample_corpus.json", twin / "sample_spacy_corpus.json")
    shutil.copy(src / "sample.json", twin / "sample_spacy.json")
    assert gs.corpus_twin("sample_spacy") is None  # not loaded yet: no passages
    logs: list[str] = []
    r = build_index(str(twin), "spacy", log=logs.append, share=True)
    assert r.created and not r.shares_index_of
    assert any("another OpenIE backend" in line for line in logs)
    own = gs.own_version("sample_spacy")
    assert own is not None and own.openie.startswith("spacy:")
    assert gs.corpus_twin("sample_spacy", "precomputed") is not None  # the sample's
    twin_of_sample = gs.corpus_twin(sample_dataset, "spacy")  # this one, or another test's copy
    assert twin_of_sample is not None and gs.own_version(twin_of_sample).openie.startswith("spacy")  # type: ignore[union-attr]
