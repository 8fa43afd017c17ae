"""The Retriever protocol: `retrieve(query, k) -> list[Hit]`."""

from __future__ import annotations

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
        """Top-k passages; `qvec` is the query embedding when the caller already has it."""


def check_query(query: str) -> str:
    if not isinstance(query, str) or not query.strip():
        raise R2AError("the query is empty: give a question")
    if len(query) > MAX_QUERY_CHARS:
        raise R2AError(f"the query has {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    return query.strip()
