"""ADR's four retrieval strategies, registered into the strategy table below it
(r2adapter/retrieve/strategies.py): adr_simple, adr_moderate and adr_complex run one of the
three operators over the index's dual hypergraph, adr lets the registered ADR classifier
choose (its champion: the caller's, `make_retriever`'s `champions`, else the registered one
loaded once). They need the hypergraph (`r2a index --adr`), so `r2a evaluate retrieval` runs them
only when named. `register()` is called by the floors that enter the house (r2adapter/steps.py,
r2adapter/adapter.py, r2adapter/cli.py) before they read the table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from r2adapter.retrieve.strategies import Strategy, register_strategy

if TYPE_CHECKING:
    from r2adapter.index.encoder import Encoder
    from r2adapter.retrieve.base import Retriever
    from r2adapter.route.family import ChampionSource


def _simple(dataset: str, encoder: Encoder | None) -> Retriever:
    from r2adapter.adr.retriever import AdrSimple

    return AdrSimple(dataset, encoder)


def _moderate(dataset: str, encoder: Encoder | None) -> Retriever:
    from r2adapter.adr.retriever import AdrModerate

    return AdrModerate(dataset, encoder)


def _complex(dataset: str, encoder: Encoder | None) -> Retriever:
    from r2adapter.adr.retriever import AdrComplex

    return AdrComplex(dataset, encoder)


def _routed(
    dataset: str, encoder: Encoder | None, champion: ChampionSource | None = None
) -> Retriever:
    from r2adapter.adr.retriever import AdrRetriever

    return AdrRetriever(dataset, encoder, champion)


ADR_STRATEGIES: dict[str, Strategy] = {
    "adr_simple": Strategy(_simple, default=False),
    "adr_moderate": Strategy(_moderate, default=False),
    "adr_complex": Strategy(_complex, default=False),
    "adr": Strategy(_routed, default=False, family="adr"),  # its champion decides
}


def register() -> None:
    """ADR's strategies join the table, after this floor's, in this order (idempotent)."""
    for name, strategy in ADR_STRATEGIES.items():
        register_strategy(name, strategy)
