"""The retrieval strategies by name: the one table `r2a retrieve --mode`, `r2a evaluate
retrieval`, the adapter and the service's `/retrieve` `mode` read."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from r2adapter.config import CATRAG_PARTS
from r2adapter.errors import R2AError

if TYPE_CHECKING:
    from r2adapter.index.encoder import Encoder
    from r2adapter.retrieve.base import Retriever

# name → its retriever ("module:Class", imported on use); the order is the report's.
# dense: cosine top-k in pgvector; graph: HippoRAG 2 (facts → phrase seeds → PPR);
# catrag: CatRAG, the graph search on a query-adapted graph; adr_*: one of ADR's three
# operators over the index's dual hypergraph, adr: the registered ADR classifier chooses
STRATEGIES: dict[str, str] = {
    "dense": "r2adapter.retrieve.dense:DenseRetriever",
    "graph": "r2adapter.retrieve.graph:GraphRetriever",
    "catrag": "r2adapter.retrieve.catrag:CatragRetriever",
    "adr_simple": "r2adapter.adr.retriever:AdrSimple",
    "adr_moderate": "r2adapter.adr.retriever:AdrModerate",
    "adr_complex": "r2adapter.adr.retriever:AdrComplex",
    "adr": "r2adapter.adr.retriever:AdrRetriever",
}
# ADR's need the hypergraph (`r2a index --adr`): `r2a evaluate retrieval` runs them only
# when named (`--mode`); their figures are `r2a adr label`'s and the routing report's
ADR_STRATEGIES = ("adr_simple", "adr_moderate", "adr_complex", "adr")
# strategies that walk the graph (they read a rewrite's triplets and report PPR structure)
GRAPH_STRATEGIES = ("graph", "catrag")
# catrag's components, each of which `--ablate` (or graph.catrag_ablate) turns off
ABLATIONS = CATRAG_PARTS


def check_strategy(mode: str) -> str:
    if mode not in STRATEGIES:
        raise R2AError(f"unknown retrieval mode {mode!r}: choose {', '.join(STRATEGIES)}")
    return mode


def check_strategies(modes: Iterable[str] | None) -> tuple[str, ...]:
    """A subset of STRATEGIES in the table's order (None or empty: all but ADR's)."""
    chosen = tuple(dict.fromkeys(modes or ()))
    for m in chosen:
        check_strategy(m)
    if not chosen:
        return tuple(m for m in STRATEGIES if m not in ADR_STRATEGIES)
    return tuple(m for m in STRATEGIES if m in chosen)


def make_retriever(
    mode: str, dataset: str, encoder: Encoder | None = None, **options: Any
) -> Retriever:
    """The retriever of `mode` over an indexed `dataset`; `options` go to graph-walking
    strategies (`seed_triplets`, `params`, `cache`; catrag also `ablate`)."""
    import importlib

    module, _, name = STRATEGIES[check_strategy(mode)].partition(":")
    cls = getattr(importlib.import_module(module), name)
    if mode == "dense" or mode in ADR_STRATEGIES:
        return cls(dataset, encoder)
    if mode != "catrag":
        options = {k: v for k, v in options.items() if k != "ablate"}
    return cls(dataset, encoder, **options)
