"""Which triplets of a rewritten query q′ seed the graph walk (issue 24).

The graph search turns each triplet line of q′ into a fact query "head relation"
(r2adapter/rewrite/parse.py `triplet_queries`). On 2Wiki, whose names are page titles, the
heads are nodes of the graph; on free-form questions a parse's head is often a fragment
("Cannibal", "Shake It") whose fact query pulls in unrelated facts. With `rewrite.link_heads`
a triplet seeds only when its head, normalised as the index normalises a phrase, is a phrase
node of this graph: the graph itself says the head is a thing it knows.
"""

from __future__ import annotations

from typing import Any

from r2adapter.config import rewrite_params


def _names(g: Any) -> frozenset[str]:
    """The graph's phrase nodes as a set, built once per graph version."""
    key = ("rewrite", "entity_names")
    names = g.extras.get(key)
    if names is None:
        names = frozenset(g.entity_names)
        g.extras[key] = names
    return frozenset(names)


def linked(head: str, g: Any) -> bool:
    """The head is a phrase node of graph `g` (a GraphIndex)."""
    from r2adapter.index.openie import normalize_phrase

    return normalize_phrase(head) in _names(g)


def seed_texts(query: str, g: Any, link_heads: bool | None = None) -> list[str]:
    """q′'s fact queries (`triplet_queries`), with `link_heads` (None: params.yaml
    rewrite.link_heads) only those whose head is a node of `g`."""
    from r2adapter.rewrite.parse import triplet_queries

    texts = triplet_queries(query)
    if not texts:
        return texts
    if link_heads is None:
        link_heads = rewrite_params().link_heads
    if not link_heads:
        return texts
    heads = triplet_heads(query)
    return [t for t in texts if linked(heads.get(t, t), g)]


def triplet_heads(query: str) -> dict[str, str]:
    """Each fact query of q′ → the head it was built from (a line read as
    `triplet_queries` reads it)."""
    from r2adapter.rewrite.parse import triplet_queries

    out: dict[str, str] = {}
    for line in query.splitlines()[1:]:
        body = line.strip()[1:-1]
        cut = body.rfind(", <") if body.endswith(">") else body.rfind(", ")
        head = body[:cut].rpartition(", ")[0] if cut > 0 else ""
        for text in triplet_queries(f"q\n{line}"):
            out.setdefault(text, head)
    return out
