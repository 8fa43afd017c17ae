"""ADR (Asymmetric Dynamic Routing, seeds/adr-…): the dual hypergraph built by the index
step, three traversal operators over it, and the intent router with conservative fallback
(docs/adr.md)."""
