"""The strategy table: what a router may choose, as data (params.yaml `kway.strategies`).

A strategy is `<retriever>@<k>`: a retriever of `r2a retrieve --mode` (dense, graph, catrag,
and whatever joins that table) or `fusion` (dense ∪ graph, reciprocal-rank fused), handing
the reader its top k passages. Every k of one retriever is a prefix of one ranking, so
labelling runs each base retriever once, to `kway.depth`. A strategy's cost per query is a
vector: milliseconds (the query embedding plus each base retriever it runs, measured while
labelling), context tokens (of the passages it delivers, in the encoder's tokenizer) and LLM
calls (none of today's strategies calls one).

A graph-walking retriever with the suffix `+rw` (`graph+rw@5`) runs on the query's
structural rewrite (issue 15: q′ = q + its triplets, each triplet with a named head a fact
query of its own); its milliseconds include the rewrite and q′'s embedding. Served, the
adapter rewrites with the service's rewriter before that retriever.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from r2adapter.errors import R2AError
from r2adapter.retrieve.fusion import rrf
from r2adapter.retrieve.strategies import GRAPH_STRATEGIES, STRATEGIES

REWRITTEN = "+rw"  # `<graph retriever>+rw`: that retriever on the query's structural rewrite


def fused_bases(retriever: str) -> tuple[str, ...]:
    """The base retrievers a composite retriever of the table fuses (fusion: dense, graph);
    () for a plain one."""
    known = STRATEGIES.get(retriever)
    return known.bases if known is not None else ()


def split_rewritten(retriever: str) -> tuple[str, bool]:
    """("graph", True) for "graph+rw"; (name, False) for a plain retriever."""
    if retriever.endswith(REWRITTEN):
        return retriever[: -len(REWRITTEN)], True
    return retriever, False


@dataclass(frozen=True)
class Strategy:
    name: str  # "graph@5"
    retriever: str  # "graph", "fusion", ...
    k: int

    @property
    def bases(self) -> tuple[str, ...]:
        """The base retrievers this strategy runs."""
        return fused_bases(self.retriever) or (self.retriever,)

    @property
    def graph_side(self) -> bool:
        """Whether it walks the graph (counted in a router's `graph_usage`)."""
        return any(split_rewritten(b)[0] in GRAPH_STRATEGIES for b in self.bases)

    @property
    def mode(self) -> str:
        """The `r2a retrieve` mode (or fusion) that serves it: "graph" for graph+rw@5."""
        return split_rewritten(self.retriever)[0]

    @property
    def rewritten(self) -> bool:
        """Whether the query is rewritten first (a `+rw` retriever)."""
        return split_rewritten(self.retriever)[1]


def parse_strategy(name: str) -> Strategy:
    retriever, _, k = name.partition("@")
    base, rewritten = split_rewritten(retriever)
    if base not in STRATEGIES:
        known = ", ".join(STRATEGIES)
        raise R2AError(
            f"kway.strategies: {name!r} names retriever {retriever!r}, which does not exist: "
            f"known are {known}, and {REWRITTEN} after a graph retriever"
        )
    if rewritten and base not in GRAPH_STRATEGIES:
        raise R2AError(
            f"kway.strategies: {name!r}: only a graph retriever ({', '.join(GRAPH_STRATEGIES)})"
            f" reads a rewrite's triplets, so only it takes {REWRITTEN}"
        )
    if not k.isdigit() or int(k) < 1:
        raise R2AError(f"kway.strategies: {name!r} is not <retriever>@<k> with k ≥ 1")
    return Strategy(name, retriever, int(k))


def strategy_table(names: Sequence[str]) -> list[Strategy]:
    """The table in params.yaml's order (every name checked)."""
    return [parse_strategy(n) for n in names]


def base_retrievers(table: Sequence[Strategy]) -> tuple[str, ...]:
    """The retrievers labelling runs, in r2a retrieve's table order (a rewritten one after
    its plain one)."""
    needed = {b for s in table for b in s.bases}
    order = [x for r in STRATEGIES for x in (r, r + REWRITTEN)]
    return tuple(r for r in order if r in needed)


def delivered(s: Strategy, rankings: Mapping[str, Sequence[str]], rrf_k: int = 60) -> list[str]:
    """The passages strategy `s` hands the reader, from the base retrievers' rankings."""
    if fused_bases(s.retriever):
        return rrf([rankings[b] for b in s.bases], rrf_k)[: s.k]
    return list(rankings[s.retriever][: s.k])


def strategy_ms(s: Strategy, ms: Mapping[str, float]) -> float:
    """A strategy's milliseconds for one query: the query embedding plus its retrievers."""
    return float(ms.get("embed", 0.0)) + sum(float(ms[b]) for b in s.bases)
