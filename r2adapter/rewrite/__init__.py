"""The query rewriter: triplet decomposition of a query by an LLM, with fallback to the query."""

from r2adapter.rewrite.parse import (
    MAX_TRIPLETS,
    MalformedRewrite,
    Triplet,
    format_triplets,
    parse_triplets,
    rewritten_query,
)
from r2adapter.rewrite.rewriter import FALLBACK_REASONS, Rewriter, RewriteResult, needs_rewrite

__all__ = [
    "FALLBACK_REASONS",
    "MAX_TRIPLETS",
    "MalformedRewrite",
    "RewriteResult",
    "Rewriter",
    "Triplet",
    "format_triplets",
    "needs_rewrite",
    "parse_triplets",
    "rewritten_query",
]
