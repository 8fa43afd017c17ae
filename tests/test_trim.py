"""The trim (issue 40, r2adapter/kway/trim.py): after retrieval, how many of the base
strategy's passages a query is handed, and the threshold chosen on nested transfers."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from r2adapter.config import KwayParams
from r2adapter.errors import R2AError
from r2adapter.kway.labels import StrategyLabel
from r2adapter.kway.trim import (
    WIDTH,
    choose_base,
    choose_trim,
    covered,
    fit_trim,
    pick_threshold,
    trim_features,
    trim_strategies,
)

PASSAGES = [f"p{i}" for i in range(30)]


def _view(dim: int = 8, seed: int = 0) -> SimpleNamespace:
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(len(PASSAGES), dim)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    return SimpleNamespace(passage_ids=PASSAGES, passage_emb=emb)


def _label(i: int, dense: list[str], base: list[str], question: str) -> StrategyLabel:
    return StrategyLabel(
        f"q{i}", question, "1hop", "train", [base[0]], {"dense": dense, "catrag": base}, {}, {}
    )


@pytest.mark.unit
def test_trim_strategies_are_the_base_retriever_at_each_count_and_the_base() -> None:
    assert trim_strategies("catrag+rw@5", (1, 2, 3)) == [
        "catrag+rw@1",
        "catrag+rw@2",
        "catrag+rw@3",
        "catrag+rw@5",
    ]
    assert trim_strategies("dense@5", (3, 1)) == ["dense@1", "dense@3", "dense@5"]
    assert trim_strategies("graph@3", (1, 5, 8)) == ["graph@1", "graph@3"]  # base stays last


@pytest.mark.unit
def test_features_read_agreement_between_dense_and_the_base() -> None:
    view = _view()
    agree = _label(0, PASSAGES[:20], PASSAGES[:20], "Who directed Alien?")
    apart = _label(1, PASSAGES[:20], PASSAGES[10:30], "Who is the father of the director of Alien?")
    qv = view.passage_emb[[0, 0]]
    x = trim_features([agree, apart], qv, view, "catrag@5")
    assert x.shape == (2, WIDTH)
    assert x[0, :4].tolist() == [1.0, 1.0, 1.0, 1.0]  # top 1, 2, 3, 5 alike
    assert x[1, :4].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert x[0, 4] == 0.0 and x[1, 4] == 1.0  # base's first passage: dense's first / absent
    assert x[0, 10] == pytest.approx(0.0, abs=1e-6)  # base's first is dense's top passage


@pytest.mark.unit
def test_a_trim_hands_fewer_passages_where_the_classifier_is_sure_and_more_as_t_rises() -> None:
    rng = np.random.default_rng(1)
    n = 400
    x = rng.normal(size=(n, 3)).astype(np.float32)
    easy = x[:, 0] > 0
    # columns: base@1, base@2, base@5; base@1 recalls what base@5 does on the easy half
    rec5 = np.ones(n)
    m = {"recall": np.stack([np.where(easy, 1.0, 0.0), np.where(easy, 1.0, 0.5), rec5], 1)}
    assert covered(m, 0, 2).tolist() == easy.astype(int).tolist()
    trim = fit_trim(x, m, [0, 1, 2], seed=0)
    picked = trim.decide(x, 0.9)
    assert (picked[easy] == 0).mean() > 0.9 and (picked[~easy] == 2).mean() > 0.9
    shares = [float((trim.decide(x, t) == 2).mean()) for t in (0.5, 0.9, 0.99, 1.0)]
    assert shares == sorted(shares) and shares[-1] == 1.0  # t 1: every query gets base@5


@pytest.mark.unit
def test_the_threshold_is_the_cheapest_whose_worst_nested_gap_holds() -> None:
    def row(t: float, gap: float, ratio: float, to: str) -> dict[str, object]:
        return {
            "threshold": t,
            "transfer_to": to,
            "recall": 0.8 + gap,
            "best_fixed_recall": 0.8,
            "mean_cost": ratio * 100,
            "best_fixed_cost": 100.0,
        }

    rows = [
        row(0.8, -0.03, 0.6, "A"),
        row(0.8, 0.0, 0.5, "B"),  # its worst gap is A's: -.03
        row(0.9, -0.005, 0.75, "A"),
        row(0.9, -0.008, 0.7, "B"),  # mean ratio .725
        row(0.95, 0.0, 0.9, "A"),
        row(0.95, 0.0, 0.85, "B"),
    ]
    assert pick_threshold(rows, 0.01) == 0.9
    assert pick_threshold(rows, 0.001) == 0.95
    assert pick_threshold([row(0.9, -0.05, 0.5, "A")], 0.01) is None


@pytest.mark.unit
def test_choose_trim_picks_the_base_and_a_threshold_on_the_training_corpora_alone() -> None:
    names = ["catrag@1", "catrag@2", "catrag@3", "catrag@5", "dense@5"]
    rng = np.random.default_rng(2)

    def group(n: int) -> SimpleNamespace:
        x = rng.normal(size=(n, 4)).astype(np.float32)
        x[:, 0] += np.sign(x[:, 0])  # easy and hard a clear step apart
        easy = x[:, 0] > 0
        r5 = np.ones(n)
        one, two = np.where(easy, 1.0, 0.0), np.where(easy, 1.0, 0.5)
        rec = np.stack([one, two, r5 * 0.9, r5, r5 * 0.7], 1)
        m = {
            "recall": rec,
            "cost": np.tile([20.0, 30.0, 40.0, 60.0, 55.0], (n, 1)),
            "passages": np.tile([1.0, 2.0, 3.0, 5.0, 5.0], (n, 1)),
            "ms": np.zeros((n, 5)),
        }
        return SimpleNamespace(labels=list(range(n)), m=m), x

    (a, xa), (b, xb) = group(300), group(300)
    every = KwayParams(
        strategies=tuple(names), route=(), trim_bases=("dense@5", "catrag@5"), trim_ks=(1, 2, 3)
    )
    base = choose_base({"A": a, "B": b}, names, every.trim_bases)
    assert base == "catrag@5"  # the better recall of the two bases
    point, rows = choose_trim({"A": a, "B": b}, names, every, base, {"A": xa, "B": xb})
    assert point.base == base
    assert point.threshold in every.trim_thresholds
    assert {(r["train"], r["transfer_to"]) for r in rows} == {("A", "B"), ("B", "A")}
    held = [r for r in rows if r["threshold"] == point.threshold]
    assert min(r["recall"] - r["best_fixed_recall"] for r in held) >= -every.loco_tolerance - 1e-9
    assert all(r["mean_cost"] < r["best_fixed_cost"] for r in held)


@pytest.mark.unit
def test_bad_trim_settings_are_one_line() -> None:
    with pytest.raises(R2AError, match="kway.trim_ks"):
        KwayParams(trim_ks=(0, 2)).check()
    with pytest.raises(R2AError, match="kway.trim_thresholds"):
        KwayParams(trim_thresholds=(0.9, 1.5)).check()


@pytest.mark.unit
def test_the_loco_trim_row_is_chosen_on_the_training_corpora_and_scored_on_the_held_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from r2adapter.kway.strategies import strategy_table
    from r2adapter.kway.transfer import _Corpus
    from r2adapter.reports import loco

    names = ["catrag@1", "catrag@2", "catrag@3", "catrag@5", "dense@5"]
    view = _view(seed=3)
    rng = np.random.default_rng(4)

    def corpus(n: int) -> _Corpus:
        labels, rec = [], []
        for i in range(n):
            easy = i % 2 == 0
            base = PASSAGES[:20] if easy else PASSAGES[10:30]
            lab = _label(i, PASSAGES[:20], base, "Who directed Alien?" if easy else "Who is it?")
            lab.qtype = "1hop" if easy else "2hop"
            lab.median_cpu_ms = {"dense": 2.0}
            labels.append(lab)
            rec.append([1.0, 1.0, 1.0, 1.0, 0.8] if easy else [0.0, 0.5, 0.5, 1.0, 0.5])
        r = np.array(rec)
        m = {
            "recall": r,
            "full": r,
            "passages": np.tile([1.0, 2.0, 3.0, 5.0, 5.0], (n, 1)),
            "tokens": np.tile([100.0, 200.0, 300.0, 500.0, 500.0], (n, 1)),
            "prompt_tokens": np.tile([180.0, 280.0, 380.0, 580.0, 560.0], (n, 1)),
            "ms": np.full((n, 5), 10.0),
            "cost": np.tile([40.0, 62.0, 84.0, 128.0, 123.0], (n, 1)),
            "ms_price": np.full(n, 0.001),
        }
        qv = view.passage_emb[rng.integers(0, len(PASSAGES), n)]
        return _Corpus(labels, m, qv, np.zeros((n, 0)), np.array(["train"] * n))

    groups = {"a": corpus(120), "b": corpus(120)}
    held = corpus(80)
    monkeypatch.setattr(loco, "graphs", lambda: SimpleNamespace(get=lambda name: view))
    every = KwayParams(strategies=tuple(names), route=(), trim_bases=("catrag@5",))
    routers: dict[str, object] = {}
    choices: dict[str, np.ndarray] = {}
    lat: dict[str, np.ndarray] = {}
    points: dict[str, dict[str, object]] = {}
    notes: list[str] = []
    qt = [lab.qtype for lab in held.labels]
    table = strategy_table(names)
    loco.trim_row("held", groups, held, names, table, every, qt, routers, choices, lat, points,
                  notes)  # fmt: skip
    row = routers["trim"]
    assert isinstance(row, dict) and points["trim"]["base"] == "catrag@5"
    assert points["trim"]["threshold"] in every.trim_thresholds  # the agreement tells apart
    assert row["by_type"]["1hop"]["mean_passages"] == 1.0  # the easy half: base@1
    assert row["by_type"]["2hop"]["mean_passages"] == 5.0
    assert row["recall"] == pytest.approx(1.0)
    assert (lat["trim"] == 2.0).all() and "held held out" in notes[-1]
