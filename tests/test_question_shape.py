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


class _Index:
    """An in-memory index as GraphCache holds one (version, titles, embeddings)."""

    class version:  # noqa: N801 - the attribute GraphIndex has
        id = 1

    passage_titles = ["Alien (film)", "Ridley Scott", "Paris"]
    passage_emb = np.eye(3, 4, dtype=np.float32)


class _Source:
    """A GraphSource whose database goes down after `up` reads."""

    def __init__(self, up: int) -> None:
        self.up = up

    def get(self, dataset: str) -> _Index:
        from r2adapter.errors import DatabaseError

        if self.up <= 0:
            raise DatabaseError("database error at postgresql://…: connection refused")
        self.up -= 1
        return _Index()


def test_features_from_the_index_in_memory_while_the_database_is_down() -> None:
    """Routing decides in memory with the database down (the two-way router does too); with
    no index read yet there is nothing to decide from, and the error says the database."""
    from r2adapter.errors import DatabaseError
    from r2adapter.kway.features import KwayFeatures

    names = ("question_shape", "title_cover", "dense_scores")
    q = ["Who directed Alien?"]
    qv = np.array([[0.9, 0.1, 0.0, 0.0]], dtype=np.float32)
    f = KwayFeatures("toy", _Source(up=1), names)
    before = f(q, qv)
    after = f(q, qv)  # the source now raises: the index last read serves
    assert np.array_equal(before, after) and before.shape == (1, width(names, 4))
    with pytest.raises(DatabaseError, match="connection refused"):
        KwayFeatures("toy", _Source(up=0), names)(q, qv)
