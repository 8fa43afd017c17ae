"""Request validation for the service: every bad input is a 422 with a JSON body."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from r2adapter.adapter import MODES
from r2adapter.retrieve.base import MAX_QUERY_CHARS

MAX_TOP_K = 100


class BadRequest(Exception):
    """One line for the client, with the field it concerns."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"error": self.message, "field": self.field}


@dataclass(frozen=True)
class QueryRequest:
    query: str
    mode: str = "auto"
    top_k: int = 5


def parse_request(query: Any, mode: Any = None, top_k: Any = None) -> QueryRequest:
    if query is None:
        raise BadRequest("query", "query is required")
    if not isinstance(query, str):
        raise BadRequest("query", f"query must be a string, not {type(query).__name__}")
    if not query.strip():
        raise BadRequest("query", "query is empty or whitespace")
    if len(query) > MAX_QUERY_CHARS:
        raise BadRequest(
            "query", f"query has {len(query)} characters; the limit is {MAX_QUERY_CHARS}"
        )
    mode = "auto" if mode is None else mode
    if not isinstance(mode, str) or mode not in MODES:
        raise BadRequest("mode", f"mode must be one of {', '.join(MODES)}")
    top_k = 5 if top_k is None else top_k
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise BadRequest("top_k", f"top_k must be an integer, not {type(top_k).__name__}")
    if not 1 <= top_k <= MAX_TOP_K:
        raise BadRequest("top_k", f"top_k must be between 1 and {MAX_TOP_K}, not {top_k}")
    return QueryRequest(query.strip(), mode, top_k)
