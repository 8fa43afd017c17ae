"""The retrieval strategies by name: the one table `r2a retrieve --mode`, `r2a evaluate
retrieval`, the adapter and the service's `/retrieve` `mode` read.

The table holds this floor's strategies; a family above adds its own with
`register_strategy` (ADR's four: r2adapter/adr/strategies.py, registered by the floors that
enter the house, r2adapter/steps.py, r2adapter/adapter.py and r2adapter/cli.py), so no name
here points upward."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from r2adapter.config import CATRAG_PARTS
from r2adapter.errors import R2AError

if TYPE_CHECKING:
    from r2adapter.index.encoder import Encoder
    from r2adapter.retrieve.base import Retriever

# (dataset, encoder, **options) → the retriever; each imports its module on use
Factory = Callable[..., "Retriever"]


@dataclass(frozen=True)
class Strategy:
    make: Factory
    options: bool = False  # takes `make_retriever`'s options (else they are dropped)
    ablate: bool = False  # `ablate` among them (catrag's components)
    default: bool = True  # in `r2a evaluate retrieval`'s default set
    # a composite: the strategies whose rankings it fuses, and how it is put together from
    # their retrievers (the adapter composes it from the ones it already holds)
    bases: tuple[str, ...] = ()
    compose: Callable[..., Retriever] | None = None
    # the router family whose champion decides (ADR's `adr`): `make_retriever` hands the
    # factory `champion`, a source of the one its caller serves (without one, it loads its own)
    family: str = ""


def _dense(dataset: str, encoder: Encoder | None) -> Retriever:
    from r2adapter.retrieve.dense import DenseRetriever

    return DenseRetriever(dataset, encoder)


def _graph(dataset: str, encoder: Encoder | None, **options: Any) -> Retriever:
    from r2adapter.retrieve.graph import GraphRetriever

    return GraphRetriever(dataset, encoder, **options)


def _catrag(dataset: str, encoder: Encoder | None, **options: Any) -> Retriever:
    from r2adapter.retrieve.catrag import CatragRetriever

    return CatragRetriever(dataset, encoder, **options)


def _lexical(dataset: str, encoder: Encoder | None) -> Retriever:
    from r2adapter.retrieve.lexical import LexicalRetriever

    return LexicalRetriever(dataset, encoder)


def _fuse(dense: Retriever, graph: Retriever) -> Retriever:
    from r2adapter.retrieve.fusion import FusionRetriever

    return FusionRetriever(dense, graph)


def _fusion(dataset: str, encoder: Encoder | None) -> Retriever:
    return _fuse(_dense(dataset, encoder), _graph(dataset, encoder))


def _fuse_hybrid(dense: Retriever, lexical: Retriever) -> Retriever:
    from r2adapter.retrieve.fusion import FusionRetriever

    return FusionRetriever(dense, lexical, mode="hybrid")


def _hybrid(dataset: str, encoder: Encoder | None) -> Retriever:
    return _fuse_hybrid(_dense(dataset, encoder), _lexical(dataset, encoder))


# name → its strategy; the order is the report's (registered ones follow this floor's).
# dense: cosine top-k in pgvector; graph: HippoRAG 2 (facts → phrase seeds → PPR);
# catrag: CatRAG, the graph search on a query-adapted graph; fusion: dense ∪ graph,
# reciprocal-rank fused (a k-way strategy; off the default set); lexical: BM25 over the
# index's lexicon; hybrid: dense ∪ lexical, reciprocal-rank fused (both off the default set
# and the k-way table: docs/retrieval.md "Lexical and hybrid"). ADR registers adr_simple,
# adr_moderate, adr_complex (one of its three operators over the index's dual hypergraph)
# and adr (the registered ADR classifier chooses), off the default set: they need the
# hypergraph (`r2a index --adr`), and their figures are `r2a adr label`'s
STRATEGIES: dict[str, Strategy] = {
    "dense": Strategy(_dense),
    "graph": Strategy(_graph, options=True),
    "catrag": Strategy(_catrag, options=True, ablate=True),
    "fusion": Strategy(_fusion, default=False, bases=("dense", "graph"), compose=_fuse),
    "lexical": Strategy(_lexical, default=False),
    "hybrid": Strategy(_hybrid, default=False, bases=("dense", "lexical"), compose=_fuse_hybrid),
}
# strategies that walk the graph (they read a rewrite's triplets and report PPR structure)
GRAPH_STRATEGIES = ("graph", "catrag")
# catrag's components, each of which `--ablate` (or graph.catrag_ablate) turns off
ABLATIONS = CATRAG_PARTS


def register_strategy(name: str, strategy: Strategy) -> None:
    """A strategy of a floor above joins the table (again: the same entry, no change)."""
    known = STRATEGIES.get(name)
    if known is not None and known != strategy:
        raise R2AError(f"retrieval strategy {name!r} is already registered")
    STRATEGIES[name] = strategy


def check_strategy(mode: str) -> str:
    if mode not in STRATEGIES:
        raise R2AError(f"unknown retrieval mode {mode!r}: choose {', '.join(STRATEGIES)}")
    return mode


def check_strategies(modes: Iterable[str] | None) -> tuple[str, ...]:
    """A subset of STRATEGIES in the table's order (None or empty: the default ones)."""
    chosen = tuple(dict.fromkeys(modes or ()))
    for m in chosen:
        check_strategy(m)
    if not chosen:
        return tuple(m for m, s in STRATEGIES.items() if s.default)
    return tuple(m for m in STRATEGIES if m in chosen)


def make_retriever(
    mode: str,
    dataset: str,
    encoder: Encoder | None = None,
    champions: Callable[[str], Any] | None = None,
    **options: Any,
) -> Retriever:
    """The retriever of `mode` over an indexed `dataset`; `options` go to graph-walking
    strategies (`seed_triplets`, `params`, `cache`; catrag also `ablate`); `champions`: the
    champion a family serves now, by name (the service's table; a `Champion` of
    r2adapter/route/family.py, a room this one does not import), for a strategy that family
    decides."""
    s = STRATEGIES[check_strategy(mode)]
    kw = dict(options) if s.options else {}
    if not s.ablate:
        kw.pop("ablate", None)
    if s.family and champions is not None:
        kw["champion"] = partial(champions, s.family)
    return s.make(dataset, encoder, **kw)
