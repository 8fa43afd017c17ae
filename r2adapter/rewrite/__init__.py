"""The query rewriter: triplet decomposition of a query (by an LLM or by its structure), with
fallback to the query."""

from r2adapter.rewrite.parse import (
    MAX_TRIPLETS,
    MalformedRewrite,
    Triplet,
    format_triplets,
    parse_triplets,
    rewritten_query,
)
from r2adapter.rewrite.rewriter import (
    BACKENDS,
    FALLBACK_REASONS,
    Rewriter,
    RewriteResult,
    default_backend,
)

__all__ = [
    "BACKENDS",
    "FALLBACK_REASONS",
    "MAX_TRIPLETS",
    "MalformedRewrite",
    "RewriteResult",
    "Rewriter",
    "Triplet",
    "default_backend",
    "format_triplets",
    "parse_triplets",
    "rewritten_query",
]
