"""The `question_shape` feature group of the k-way heads: the question's form from its words
alone (no parser, no corpus). No Postgres."""

from __future__ import annotations

import numpy as np
import pytest

from r2adapter.config import kway_params
from r2adapter.kway.features import SHAPE, WH, WIDTHS, question_shape, width

pytestmark = pytest.mark.unit
N = len(WH)


def test_wh_word_and_yes_no() -> None:
    assert question_shape("Who directed Alien?")[WH.index("who")] == 1.0
    assert question_shape("When did Rome fall?")[WH.index("when")] == 1.0
    yes_no = question_shape("Are Foo Bar and Baz Qux both American?")
    assert yes_no[WH.index("yesno")] == 1.0 and yes_no[:N].sum() == 1.0
    assert question_shape("In which year did it open?")[:N].sum() == 0.0


def test_comparison_of_two_named_things() -> None:
    v = question_shape("Who was born first, Alice Smith or Bob Jones?")
    assert v[N] == pytest.approx(2 / 4)  # two capitalised spans after the first word
    assert v[N + 4] == 1.0 and v[N + 5] == 1.0  # a comparison cue; "X or Y"


def test_chains_and_relative_clauses() -> None:
    v = question_shape("What is the nationality of the director of film The Big Sleep?")
    assert v[N + 1] == pytest.approx(2 / 3)  # two " of "
    assert v[N + 4] == 0.0 and v[N + 5] == 0.0
    r = question_shape("When did the man who founded Acme Corp die?")
    assert r[N + 3] == 1.0  # "who" inside the question: a relative clause
    assert question_shape("Who founded Acme Corp?")[N + 3] == 0.0
    p = question_shape("Where was Hamlet's author born?")
    assert p[N + 2] == pytest.approx(1 / 2)


def test_bounded_and_sized() -> None:
    long = "What " + " of the ".join(["Big Thing"] * 30) + "?"
    v = question_shape(long)
    assert v.shape == (SHAPE,) and np.all((v >= 0) & (v <= 1)) and v[-1] == 1.0
    assert question_shape("").sum() == 0.0
    assert WIDTHS["question_shape"] == SHAPE
    assert width(("query_embedding", "question_shape"), 384) == 384 + SHAPE


def test_a_known_group_not_in_the_default() -> None:
    p = kway_params(features=("query_embedding", "question_shape"))
    assert p.features == ("query_embedding", "question_shape")
    assert "question_shape" not in kway_params().features
