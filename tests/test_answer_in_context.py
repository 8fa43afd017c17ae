"""Answer-in-context (data/metrics.py), the CPU stand-in for CatRAG's Joint Success
Rate: a gold answer or alias in the top 5's text and the full chain retrieved."""

from __future__ import annotations

import pytest

from r2adapter.data.metrics import answer_in_context, normalize_answer
from r2adapter.data.schema import Query
from r2adapter.evaluate.retrieval import RankedRun, answer_summary

pytestmark = pytest.mark.unit


def test_normalisation_is_squads() -> None:
    assert normalize_answer("The  Beatles!") == "beatles"
    assert normalize_answer("U.S.A.") == "usa"


def test_answer_and_full_chain_are_both_needed() -> None:
    ctx = "Night Harbour\nNight Harbour is a 1987 film directed by Ida Korr."
    gold = ["p1", "p2"]
    assert answer_in_context(ctx, ["Ida Korr"], ["p1", "p2", "p3"], gold, 5) == 1.0
    assert answer_in_context(ctx, ["Len Mace", "ida  korr."], ["p2", "p1"], gold, 5) == 1.0
    assert answer_in_context(ctx, ["Ida Korr"], ["p1", "p3"], gold, 5) == 0.0  # no full chain
    assert answer_in_context(ctx, ["Len Mace"], ["p1", "p2"], gold, 5) == 0.0  # no answer
    assert answer_in_context(ctx, ["198"], ["p1", "p2"], gold, 5) == 0.0  # whole words only
    assert answer_in_context(ctx, ["p2"], ["p1", "p3", "p4", "p5", "p6", "p2"], gold, 5) == 0.0
    # yes/no is no span: the full chain suffices
    assert answer_in_context("nothing", ["yes"], ["p1", "p2"], gold, 5) == 1.0


def test_the_summary_is_only_for_datasets_with_answers() -> None:
    run = RankedRun({"a": ["p1"], "b": ["p1"]}, {"a": 1.0, "b": 1.0}, {"a": "x Ida", "b": "y"})
    q = [Query("a", "?", ["Ida"], ["p1"], "t", "s"), Query("b", "?", ["Ida"], ["p1"], "t", "s")]
    assert answer_summary(run, q) == {"answer_in_context@5": 0.5}
    no_answers = [Query("a", "?", [], ["p1"], "t", "s")]
    assert answer_summary(run, no_answers) == {}
