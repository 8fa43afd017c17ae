"""ADR (Asymmetric Dynamic Routing, seeds/adr-…): the dual hypergraph built by the index
step, three traversal operators over it, and the intent router with conservative fallback
(docs/adr.md)."""

from r2adapter.errors import R2AError


class AdrUnavailable(R2AError):
    """What an ADR query needs is not built (the hypergraph, the registered classifier):
    the service answers 503 with the message (it names the command), the CLI exits 1."""
