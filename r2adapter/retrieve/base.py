"""The Retriever protocol: `retrieve(query, k) -> list[Hit]`."""

from __future__ import annotations

import unicodedata
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from r2adapter.errors import R2AError

MAX_QUERY_CHARS = 2000


@dataclass(frozen=True)
class Hit:
    passage_id: str
    score: float
    title: str = ""
    text: str = ""


class Retriever(ABC):
    mode: str = ""

    @abstractmethod
    def retrieve(self, query: str, k: int = 5, qvec: np.ndarray | None = None) -> list[Hit]:
        """Top-k passages; `qvec` is the query embedding when the caller already has it.
        `query` was checked at its caller's door (`check_query`: the service's request
        model, `r2a retrieve`'s steps.retrieve, stored questions at load: data/validate.py):
        a retriever does not check it again."""


# Unicode categories a reader can see: letters, numbers, punctuation, symbols. A query of
# only whitespace, controls (NUL), format characters (zero-width space and joiners, BOM) or
# lone combining marks asks nothing, yet embeds to a vector that retrieves passages.
_VISIBLE = ("L", "N", "P", "S")


def query_problem(query: object) -> str | None:
    """Why `query` is not a question (one line), or None. The one check the CLI, the
    library and the service share."""
    if not isinstance(query, str):
        return f"the query must be text, not {type(query).__name__}"
    if len(query) > MAX_QUERY_CHARS:
        return f"the query has {len(query)} characters; the limit is {MAX_QUERY_CHARS}"
    if "\x00" in query:
        return "the query contains a NUL character"
    if not any(unicodedata.category(ch)[0] in _VISIBLE for ch in query):
        return "the query is empty: it has no visible character; give a question"
    return None


def check_query(query: str) -> str:
    """The query stripped, or R2AError saying why it is no question: a library door's one
    check (steps.retrieve, r2adapter/adr/service.py `answer`)."""
    problem = query_problem(query)
    if problem:
        raise R2AError(problem)
    return query.strip()
