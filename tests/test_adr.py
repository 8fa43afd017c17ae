"""ADR (issue 16): the pure parts — hyperedges from sentences, communities and narratives,
eq. 1's fallback, the softmax head, the label file's checks, the report's fields."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from r2adapter.adr.evaluate import figures
from r2adapter.adr.hypergraph import (
    communities,
    hyperedges,
    insight_links,
    narrative,
    narrative_members,
    sentence_of,
    split_sentences,
)
from r2adapter.adr.labels import AdrLabel, OperatorOutcome, outcome, read_adr_labels, rotated
from r2adapter.adr.operators import OPERATORS, check_operator
from r2adapter.adr.router import decide, fallback_share, fit_head
from r2adapter.config import adr_params
from r2adapter.data.schema import Extraction
from r2adapter.errors import R2AError

pytestmark = pytest.mark.unit


def test_sentences_split_at_ends_and_line_breaks() -> None:
    text = "Ann Lee was born in Oslo. She moved to Rome in 1990.\nLater work. e.g. not split"
    assert split_sentences(text) == [
        "Ann Lee was born in Oslo.",
        "She moved to Rome in 1990.",
        "Later work. e.g. not split",
    ]


def test_a_triple_goes_to_the_sentence_naming_both_ends() -> None:
    norm = [" ann lee was born in oslo ", " ann lee moved to rome from oslo "]
    assert sentence_of("Ann Lee", "Rome", norm) == 1  # both ends, though "ann lee" is in 0
    assert sentence_of("She", "Oslo", norm) == 0  # one end: the first sentence naming it
    assert sentence_of("Bob", "Paris", norm) is None


def test_higher_order_hyperedges_need_three_entities_of_one_sentence() -> None:
    text = "Ann Lee married Bob Ray in Oslo. Ann Lee liked tea."
    ex = Extraction(
        ["Ann Lee", "Bob Ray", "Oslo", "tea"],
        [
            ("Ann Lee", "married", "Bob Ray"),
            ("Ann Lee", "married in", "Oslo"),
            ("Ann Lee", "liked", "tea"),  # a pair: stays a fact, no hyperedge
            ("Zed", "saw", "Moon"),  # ends not in the graph: dropped
        ],
    )
    ids = {"ann lee": 0, "bob ray": 1, "oslo": 2, "tea": 3}
    out = hyperedges([("p1", "Ann Lee", text)], [ex], ids, min_size=3)
    assert [(e.passage_id, e.members) for e in out] == [("p1", (0, 1, 2))]
    assert out[0].sentence == "Ann Lee married Bob Ray in Oslo."
    assert out[0].insight == "Ann Lee: Ann Lee married Bob Ray in Oslo."
    assert hyperedges([("p1", "A", text)], [ex], ids, min_size=4) == []


def test_leiden_separates_two_cliques_and_ranks_the_hub_first() -> None:
    links = {(a, b): 1.0 for a in range(4) for b in range(a + 1, 4)}
    links.update({(a, b): 1.0 for a in range(4, 8) for b in range(a + 1, 8)})
    links[(3, 4)] = 0.1  # a weak bridge
    links[(0, 1)] = 3.0  # 0 and 1 are the most central of their clique
    for objective, res in (("modularity", 1.0), ("CPM", 0.5)):
        groups, _ = communities(8, links, resolution=res, seed=1, objective=objective)
        assert sorted(sorted(g) for g in groups) == [[0, 1, 2, 3], [4, 5, 6, 7]], objective
    groups, centrality = communities(8, links, resolution=0.5, seed=1)
    first = next(g for g in groups if 0 in g)
    assert set(first[:2]) == {0, 1} and centrality[0] == pytest.approx(1.0)
    assert all(0 < c <= 1 for c in centrality)


def test_shared_hub_entities_link_nothing_and_knn_links_once() -> None:
    from r2adapter.adr.hypergraph import Hyperedge

    edges = [Hyperedge("p", "s", (0, 1, 2), "x"), Hyperedge("q", "s", (0, 1, 3), "y")]
    emb = np.array([[1.0, 0.0], [0.8, 0.6]])
    links = insight_links(edges, emb, max_entity_insights=5, knn=1, threshold=0.5)
    assert links == {(0, 1): pytest.approx(2.0 + 0.8)}  # two shared entities + cosine once
    hubless = insight_links(edges, emb, max_entity_insights=1, knn=0)
    assert hubless == {}


def test_narrative_keeps_central_insights_within_the_budget() -> None:
    texts, tokens = ["a", "b", "c"], [5, 4, 2]
    assert narrative_members([0, 1, 2], tokens, 9) == [0, 1]
    assert narrative([0, 1, 2], texts, tokens, 11) == "a b c"
    assert narrative_members([0], [50], 10) == [0]  # the first always


def test_eq1_accepts_the_class_at_gamma_and_falls_back_below() -> None:
    probs = np.array([[0.75, 0.2, 0.05], [0.1, 0.15, 0.74], [0.05, 0.05, 0.9]])
    d = decide(probs, 0.75)
    assert [(x.operator, x.predicted, x.fallback) for x in d] == [
        ("simple", "simple", False),
        ("moderate", "complex", True),
        ("complex", "complex", False),
    ]
    assert fallback_share(probs, 0.75) == pytest.approx(1 / 3)
    assert fallback_share(probs, 0.95) == 1.0


def test_the_softmax_head_learns_separable_classes() -> None:
    rng = np.random.default_rng(0)
    centres = np.eye(3, 8) * 4
    y = np.repeat([0, 1, 2], 30)
    x = centres[y] + rng.normal(0, 0.3, (90, 8))
    names = [("simple", "moderate", "complex")[i] for i in y]
    head = fit_head(x, names, c=10.0)
    probs = head.probs(x)
    assert np.allclose(probs.sum(axis=1), 1.0)
    assert (probs.argmax(axis=1) == y).mean() > 0.95
    one = fit_head(x[:5], ["complex"] * 5)  # one class: that class, confident
    assert decide(one.probs(x[:1]), 0.75)[0].operator == "complex"
    binary = fit_head(x[:60], names[:60], c=10.0)  # two classes: the third never wins
    assert (binary.probs(x[:60]).argmax(axis=1) == y[:60]).mean() > 0.95
    assert binary.probs(x)[:, 2].max() < 1e-6


def test_a_class_outside_the_three_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(R2AError, match="unknown ADR class 'hard'"):
        check_operator("hard")
    with pytest.raises(R2AError, match="unknown ADR class"):
        fit_head(np.zeros((2, 3)), ["simple", "hard"])
    row = {
        "format": 1,
        "query_id": "q",
        "question": "?",
        "qtype": "",
        "split": "train",
        "gold": ["a"],
        "operators": {
            n: {"passages": ["a"], "recall": 1.0, "full": 1.0, "tokens": 3, "ms": 1.0}
            for n in ("simple", "moderate", "complex")
        },
        "label": "hard",
    }
    path = tmp_path / "x.adr.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(R2AError) as e:
        read_adr_labels("x", path)
    assert "class labels must be simple, moderate, complex" in str(e.value)
    assert "\n" not in str(e.value) and "r2a adr label" in str(e.value)


def _label(qid: str, recalls: tuple[float, float, float], tokens=(10, 20, 30)) -> AdrLabel:
    ops = ("simple", "moderate", "complex")
    return AdrLabel(
        qid, "?", "", "train", ["g"],
        {n: OperatorOutcome(["g"] if r else ["x"], r, r, t, 1.0 + i)
         for i, (n, r, t) in enumerate(zip(ops, recalls, tokens, strict=True))},
    )  # fmt: skip


def test_the_label_is_the_cheapest_operator_reaching_the_best_recall() -> None:
    assert _label("a", (0.5, 1.0, 1.0)).label == "moderate"
    assert _label("b", (0.0, 0.0, 0.0)).label == "simple"  # ties: the cheapest
    assert _label("c", (1.0, 1.0, 1.0), tokens=(50, 40, 30)).label == "complex"
    o = outcome(["a", "x", "b"], ["a", "b", "c"], 7, 2.0)
    assert (o.recall, o.full) == (pytest.approx(2 / 3), 0.0)


def test_each_operator_runs_first_after_the_embedding_in_turn() -> None:
    firsts = [rotated(OPERATORS, i)[0] for i in range(4)]
    assert firsts == ["simple", "moderate", "complex", "simple"]
    assert rotated(OPERATORS, 2) == ["complex", "simple", "moderate"]


def test_router_figures_count_fallbacks_and_add_routing_ms() -> None:
    labs = [_label("a", (1.0, 0.0, 0.0)), _label("b", (0.0, 1.0, 0.0))]
    fig = figures(labs, ["simple", "moderate"], np.array([1.0, 3.0]), ["simple", "fallback"])
    assert fig["share"] == {"simple": 0.5, "fallback": 0.5}
    assert fig["recall"] == 1.0 and fig["mean_tokens"] == 15.0
    assert fig["mean_ms"] == pytest.approx((1.0 + 2.0) / 2 + 2.0)
    assert fig["latency_ms_p50"] == 2.0
    keys = {"recall", "fcr", "mean_passages", "mean_tokens", "mean_ms", "share", "latency_ms_p50"}
    assert keys <= set(fig)


def test_adr_params_are_checked() -> None:
    assert adr_params(gamma=0.5).gamma == 0.5
    with pytest.raises(R2AError, match="must be in"):
        adr_params(gamma=1.5)
    with pytest.raises(R2AError, match="min_hyperedge"):
        adr_params(min_hyperedge=2)
    assert adr_params().anchor_filter == "specific"  # params.yaml's and the default
    assert adr_params(anchor_filter="none").anchor_filter == "none"
    with pytest.raises(R2AError, match="anchor_filter must be specific or none"):
        adr_params(anchor_filter="stopwords")


class _ScriptedLLM:
    """Replies in turn; an exception instance is raised instead (a timeout, say)."""

    def __init__(self, replies: list[object]) -> None:
        self.replies = replies

    def complete(self, messages, **kw) -> str:  # type: ignore[no-untyped-def]
        r = self.replies.pop(0)
        if isinstance(r, Exception):
            raise r
        return str(r)


def test_the_llm_classifier_falls_back_on_bad_or_late_replies() -> None:
    from r2adapter.adr.router import llm_probs, parse_llm_class
    from r2adapter.llm.base import LLMError

    assert parse_llm_class('Sure: {"class": "Complex", "confidence": 0.9}') == ("complex", 0.9)
    with pytest.raises(R2AError, match="not one of simple, moderate, complex"):
        parse_llm_class('{"class": "hard", "confidence": 1}')
    llm = _ScriptedLLM(
        ['{"class": "simple", "confidence": 0.8}', '{"class": "epic"}', LLMError("timed out")]
    )
    probs, failed = llm_probs(llm, ["a", "b", "c"], timeout=1.0)
    assert failed == 2
    assert [d.operator for d in decide(probs, 0.75)] == ["simple", "moderate", "moderate"]
    assert np.allclose(probs.sum(axis=1), 1.0)


def test_llm_insights_keep_the_extractive_text_when_a_call_fails() -> None:
    from r2adapter.adr.insights import write_with
    from r2adapter.llm.base import LLMError

    llm = _ScriptedLLM(["  Ann Lee married\nBob Ray. ", LLMError("timed out"), ""])
    out, fallbacks = write_with(llm, ["A: she married him.", "B: x.", "C: y."], timeout=1.0)
    assert out == ["Ann Lee married Bob Ray.", "B: x.", "C: y."]
    assert fallbacks == 2


def test_adr_rows_are_priced_under_each_cost_profile() -> None:
    """ADR's rows carry mean_cost and costs_by_profile beside the k-way rows (issue 40's
    R-traffic compares every always_* row by mean_cost): a dearer prompt costs more under
    `tokens`, and `retrieval` prices the ms alone."""
    from r2adapter.adr.evaluate import priced_rows
    from r2adapter.config import cost_params

    rows = {
        "always_adr_simple": {"mean_ms": 10.0, "mean_prompt_tokens": 200.0},
        "always_adr_complex": {"mean_ms": 10.0, "mean_prompt_tokens": 900.0},
        "no_prompt": {"mean_ms": 3.0},
    }
    out = priced_rows(rows, "tokens")
    simple, complex_ = out["always_adr_simple"], out["always_adr_complex"]
    assert complex_["mean_cost"] > simple["mean_cost"] > 0
    assert simple["costs_by_profile"]["retrieval"] == pytest.approx(10.0)
    tokens = cost_params().priced("tokens")
    want = tokens.price(10.0, 900.0, cost_params().answer_tokens)
    assert complex_["costs_by_profile"]["tokens"] == pytest.approx(want)
    assert "mean_cost" not in out["no_prompt"]
