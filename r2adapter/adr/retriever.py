"""ADR's operators and router as retrieval strategies (r2adapter/retrieve/strategies.py):
`adr_simple`, `adr_moderate`, `adr_complex` run one operator, `adr` lets the registered
classifier (`models:/r2a-router-adr@champion`) choose with eq. 1's fallback. Each returns
the operator's ranked passages (at most `adr.max_passages`, or `k` when smaller).

The hypergraph is read on the first query, once per dataset and index version for every
ADR strategy of the process; a dataset without one is an AdrUnavailable naming the command
that builds it (the service answers 503, the CLI one line and exit 1).

The champion classifier is read on the first `adr` query and then follows promotions as the
service's R²Adapter champion does (serving/state.py): a thread re-reads the alias every
R2A_CHAMPION_POLL_S seconds (10 by default) and, when its version changed, loads the new
one while the old one serves; `refresh_champion()` does the same at once (the service's
POST /reload can call it). A registry error or a removed alias keeps the model served."""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING

import numpy as np

from r2adapter.adr.operators import AdrOperators
from r2adapter.registry.backoff import LoadBackoff
from r2adapter.retrieve.base import Hit, Retriever

if TYPE_CHECKING:
    from r2adapter.adr.router import AdrRouter
    from r2adapter.index.encoder import Encoder

log = logging.getLogger(__name__)
_LOCK = threading.Lock()
_LOADING = threading.Lock()  # one champion load at a time (the first query's, or the poll's)
_OPERATORS: dict[str, AdrOperators] = {}  # dataset → the loaded hypergraph's operators
_ROUTER: dict[str, tuple[AdrRouter, str]] = {}  # "champion" → (router, version)
_BACKOFF = LoadBackoff()  # a champion version that failed to load waits before a retry
# "champion" → the thread following promotions and the event that stops it
_POLL: dict[str, tuple[threading.Thread, threading.Event]] = {}


def operators(dataset: str) -> AdrOperators:
    """The dataset's operators over its latest index version (loaded once per version)."""
    from r2adapter.adr.store import require_hypergraph

    v = require_hypergraph(dataset)  # none: AdrUnavailable naming `r2a index --adr`
    with _LOCK:
        ops = _OPERATORS.get(dataset)
        if ops is None or ops.ix.version != v.id:
            ops = _OPERATORS[dataset] = AdrOperators(dataset)
    return ops


def poll_seconds() -> float:
    """R2A_CHAMPION_POLL_S, as the service polls the R²Adapter champion (10 s by default)."""
    return float(os.environ.get("R2A_CHAMPION_POLL_S", "10"))


def champion() -> tuple[AdrRouter, str]:
    """The champion classifier and its version: read on the first call (none registered: an
    AdrUnavailable naming the commands), then kept current by the poll thread."""
    from r2adapter.adr.registry import load_adr

    with _LOCK:
        served = _ROUTER.get("champion")
    if served is not None:
        return served
    with _LOADING:
        with _LOCK:
            served = _ROUTER.get("champion")
        if served is None:
            served = load_adr("champion")
            with _LOCK:
                _ROUTER["champion"] = served
    _start_poll()
    return served


def refresh_champion() -> str | None:
    """Re-read the champion alias now; when its version differs from the one served, load
    the new one (the old one serves until it is loaded). Returns the version served (None:
    none loaded yet, and none registered). A registry error or a removed alias keeps what
    is served, logged."""
    from r2adapter.adr.registry import MODEL, load_adr
    from r2adapter.registry.models import version_by_alias

    with _LOCK:
        served = _ROUTER.get("champion")
    current = served[1] if served else None
    v = None
    try:
        v = version_by_alias(MODEL, "champion")
        if v is None or str(v.version) == current:
            return current
        if _BACKOFF.wait_s("adr", str(v.version)) > 0:  # failed a moment ago: not every poll
            return current
        with _LOADING:
            router, version = load_adr("champion", str(v.version))
            with _LOCK:
                _ROUTER["champion"] = (router, version)
        _BACKOFF.pop("adr")
        log.info("adr: serving %s v%s (was v%s)", MODEL, version, current)
        return version
    except Exception as e:  # the registry unreachable: keep serving the model we have
        if v is not None:  # the version itself failed to load: back off from it
            wait = _BACKOFF.failed("adr", str(v.version), str(e))
            log.warning(
                "adr: champion v%s failed to load (%s: %s); v%s serves, next try in %.0f s",
                v.version, type(e).__name__, e, current, wait,
            )  # fmt: skip
            return current
        log.warning("adr: champion not re-read (%s: %s); v%s serves", type(e).__name__, e, current)
        return current


def _start_poll() -> None:
    every = poll_seconds()
    with _LOCK:
        if "champion" in _POLL or every <= 0:  # R2A_CHAMPION_POLL_S=0: no polling
            return
        stop = threading.Event()
        t = threading.Thread(
            target=_poll, args=(every, stop), name="adr-champion-poll", daemon=True
        )
        _POLL["champion"] = (t, stop)
    t.start()


def stop_poll() -> None:
    """Stop following promotions (the next champion() starts again)."""
    with _LOCK:
        polling = _POLL.pop("champion", None)
    if polling is not None:
        polling[1].set()
        polling[0].join()


def _poll(every: float, stop: threading.Event) -> None:
    while not stop.wait(every):
        refresh_champion()


class AdrRetriever(Retriever):
    operator = ""  # simple | moderate | complex; "" for the router

    def __init__(self, dataset: str, encoder: Encoder | None = None) -> None:
        self.dataset = dataset
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
            router, version = champion()
            d = router.decide(qvec[None, :])[0]
            op = d.operator
            decision = f"{d.predicted} {d.confidence:.2f}" + (" fallback" if d.fallback else "")
            decision += f" (r2a-router-adr v{version})"
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
