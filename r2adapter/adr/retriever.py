"""ADR's operators and router as retrieval strategies (r2adapter/retrieve/strategies.py):
`adr_simple`, `adr_moderate`, `adr_complex` run one operator, `adr` lets the registered
classifier (`models:/r2a-router-adr@champion`) choose with eq. 1's fallback. Each returns
the operator's ranked passages (at most `adr.max_passages`, or `k` when smaller).

The hypergraph is read on the first query, once per dataset and index version for every
ADR strategy of the process; a dataset without one is an AdrUnavailable naming the command
that builds it (the service answers 503, the CLI one line and exit 1).

`adr` reads its champion from a source it is given (`make_retriever`'s `champions`): the
service hands it its one champion table (serving/state.py `ServingState.champion_of`), so a
promotion is served through the same poll, /reload, backoff and stale report as every
family's; elsewhere (`r2a retrieve`, `r2a evaluate retrieval`, the benchmarks) the
registered champion is loaded once, on the first `adr` query (`registered_champion`): a run
reads the champion of its start, and no thread follows the alias."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np

from r2adapter.adr.operators import AdrOperators
from r2adapter.retrieve.base import Hit, Retriever
from r2adapter.route.family import Champion, ChampionSource

if TYPE_CHECKING:
    from r2adapter.index.encoder import Encoder

_LOCK = threading.Lock()
_OPERATORS: dict[str, AdrOperators] = {}  # dataset → the loaded hypergraph's operators


def operators(dataset: str) -> AdrOperators:
    """The dataset's operators over its latest index version (loaded once per version)."""
    from r2adapter.adr.store import require_hypergraph

    v = require_hypergraph(dataset)  # none: AdrUnavailable naming `r2a index --adr`
    with _LOCK:
        ops = _OPERATORS.get(dataset)
        if ops is None or ops.ix.version != v.id:
            ops = _OPERATORS[dataset] = AdrOperators(dataset)
    return ops


def registered_champion() -> ChampionSource:
    """The registered champion, loaded on the first call and then kept (a plain load, no
    thread): what `adr` decides with outside the service. None registered: AdrUnavailable
    naming the commands that make one (asked again on the next call)."""
    loaded: list[Champion] = []
    lock = threading.Lock()

    def source() -> Champion:
        from r2adapter.adr.registry import AdrFamily, load_adr

        with lock:
            if not loaded:
                router, version = load_adr("champion")
                loaded.append(Champion(AdrFamily(), router, version))
            return loaded[0]

    return source


class AdrRetriever(Retriever):
    operator = ""  # simple | moderate | complex; "" for the router

    def __init__(
        self,
        dataset: str,
        encoder: Encoder | None = None,
        champion: ChampionSource | None = None,
    ) -> None:
        """`champion`: where `adr` reads the champion that decides, on each query (None:
        `registered_champion()`, loaded once)."""
        self.dataset = dataset
        self.champion = champion or registered_champion()
        self.mode = f"adr_{self.operator}" if self.operator else "adr"
        self._encoder = encoder
        self.last: dict[str, object] = {}  # the last query's operator, decision, tokens

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            from r2adapter.index.encoder import get_encoder

            self._encoder = get_encoder()
        return self._encoder

    def retrieve(self, query: str, k: int = 5, qvec: np.ndarray | None = None) -> list[Hit]:
        from r2adapter.store.graph_store import passages_by_id

        ops = operators(self.dataset)
        if qvec is None:
            qvec = self.encoder.encode_query(query)
        op, decision = self.operator, "forced"
        if not op:
            champ = self.champion()  # the one served now: a promotion is in on its next query
            (r,) = champ.route([query], qvec[None, :])
            op = r.strategy
            predicted = max(r.scores, key=r.scores.__getitem__)  # eq. 1's argmax, its p
            fallback = " fallback" if r.fallback else ""
            decision = f"{predicted} {r.scores[predicted]:.2f}{fallback}"
            decision += f" ({champ.family.model} v{champ.version})"
        c = ops.run(op, qvec, query)
        ranked = c.passages[:k]
        texts = passages_by_id(self.dataset, [pid for pid, _ in ranked])
        self.last = {"operator": op, "decision": decision, "tokens": c.tokens, "ms": c.ms}
        return [
            Hit(pid, s, texts[pid].title, texts[pid].text) if pid in texts else Hit(pid, s)
            for pid, s in ranked
        ]


class AdrSimple(AdrRetriever):
    operator = "simple"


class AdrModerate(AdrRetriever):
    operator = "moderate"


class AdrComplex(AdrRetriever):
    operator = "complex"
