"""What the service holds: one champion per served router family (swapped without downtime
when the alias moves), the retrievers of the served dataset, the rewriter and the answering
LLM."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import bentoml

from r2adapter.adapter import R2Adapter, llm_answerer
from r2adapter.config import DEFAULT_DATASET
from r2adapter.errors import R2AError
from r2adapter.index.encoder import get_encoder
from r2adapter.registry.backoff import LoadBackoff
from r2adapter.route.family import Champion
from serving.errors import scrub

log = logging.getLogger("r2a.serving")

LOAD_FAILURES = bentoml.metrics.Counter(
    name="r2a_champion_load_failures_total",
    documentation="champion versions that failed to load (each retried after a backoff)",
    labelnames=["router"],
)
STALE = bentoml.metrics.Gauge(
    name="r2a_champion_stale",
    documentation="1 while the last good champion serves because the alias is gone, points "
    "at a version that failed to load, or the registry does not answer",
    labelnames=["router"],
    multiprocess_mode="max",
)


# what serves instead while a family beside the two-way one has no champion
WITHOUT = {"kway": ": auto follows the two-way champion"}


class Unavailable(Exception):
    """503: a dependency (database, champion model, index) is missing right now."""


_current: ServingState | None = None  # this worker's state, for the readiness probes


def probe(answer: bool) -> tuple[bool, dict[str, Any]]:
    """/readyz (routing and retrieval) or /readyz/answer (the LLM too): (ready, JSON body).
    Answered by the middleware, so that a not-ready 503 is JSON with a reason."""
    st = _current
    if st is None:
        return False, {"error": "the service is starting"}
    if st.champion is None:
        return False, {"error": st.champion_error or "no champion router"}
    if not st.database_ok():
        return False, {"error": "the database is unavailable"}
    answer_ok, why = st.answer_ready()
    if answer and not answer_ok:
        return False, {"error": why}
    return True, {"ready": True, "answer_ready": answer_ok, "router_version": st.champion.version}


# the registry as the service reads it: short, bounded waits (MLflow's own defaults, 120 s a
# request and 7 retries, held a /reload for 60 s while the registry was down: issue 44)
REGISTRY_TIMEOUT_S = 5  # MLFLOW_HTTP_REQUEST_TIMEOUT: a request's connect and read timeout
REGISTRY_RETRIES = 1  # MLFLOW_HTTP_REQUEST_MAX_RETRIES (backoff factor 1 s, no jitter)
RELOAD_WAIT_S = 5.0  # R2A_RELOAD_WAIT_S: /reload waits this long, then 503 + Retry-After
WARM_QUERY = "Who directed the film that won the award?"  # the warm-ups' one query


def bound_registry_waits() -> None:
    """MLflow's HTTP settings for this process, unless the environment sets them."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(REGISTRY_TIMEOUT_S))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", str(REGISTRY_RETRIES))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_JITTER", "0")


class ServingState:
    def __init__(self) -> None:
        bound_registry_waits()
        self.kind = os.environ.get("R2A_ROUTER", "r2a")
        self.dataset_env = os.environ.get("R2A_SERVE_DATASET")
        self.poll_s = float(os.environ.get("R2A_CHAMPION_POLL_S", "10"))
        self.encoder = get_encoder()
        # one champion per served family (r2adapter/families.py), loaded and swapped the
        # same way: the two-way kind (R2A_ROUTER) always; the cost-aware router over every
        # strategy too, which routes `auto` when it has a champion (R2A_KWAY=0 turns it
        # off); without one the two-way champion routes, and /info says so; ADR's intent
        # router, which the `adr` mode reads on each query (`champion_of`)
        self.kway_enabled = os.environ.get("R2A_KWAY", "1") not in ("0", "false", "no")
        self.served = [self.kind, *(["kway"] if self.kway_enabled else []), "adr"]
        self.champions: dict[str, Champion] = {}
        self.backoff = LoadBackoff()  # versions that failed to load wait before a retry
        self.unreachable: set[str] = set()  # families whose registry did not answer last
        self._reload_lock = threading.Lock()  # one reload at a time: the poll's or /reload's
        self._reload_guard = threading.Lock()
        self._reloading: threading.Thread | None = None
        self.errors: dict[str, str] = {name: "not loaded yet" for name in self.served}
        if not self.kway_enabled:
            self.errors["kway"] = "disabled by R2A_KWAY=0"
        self._adapter: R2Adapter | None = None
        self._adapter_key: tuple[str, str, str | None] | None = None
        self._lock = threading.Lock()
        self._rewriter: Any = None
        self._llm: Any = None
        self.llm_error = ""
        self.reload()
        self.warm_modes()
        self._stop = threading.Event()
        threading.Thread(target=self._poll, name="champion-poll", daemon=True).start()
        global _current
        _current = self

    # -- champions ----------------------------------------------------------------------

    @property
    def champion(self) -> Champion | None:
        """The two-way champion: readiness needs it, and it routes without a k-way one."""
        return self.champions.get(self.kind)

    @property
    def kway(self) -> Champion | None:
        return self.champions.get("kway")

    def champion_of(self, name: str) -> Champion:
        """Family `name`'s champion as served now: what a retrieval strategy that family
        decides reads on each query (the `adr` mode: `make_retriever`'s `champions`), so it
        follows this table's swaps. None loaded: Unavailable saying why (a 503)."""
        c = self.champions.get(name)
        if c is None:
            raise Unavailable(self.errors.get(name) or f"no {name} champion is loaded")
        return c

    @property
    def champion_error(self) -> str:
        return self.errors.get(self.kind, "")

    @property
    def kway_error(self) -> str:
        return self.errors.get("kway", "")

    def reload(self) -> dict[str, Any]:
        """Load each served family's champion if its version changed; the old one serves
        until the new one is bound and warm."""
        with self._reload_lock:
            for name in self.served:
                self._reload(name)
        return self.info()

    def reload_now(self, wait_s: float | None = None) -> dict[str, Any]:
        """/reload: a reload in a thread of its own (a second request joins the one under
        way), waited for at most `wait_s` (R2A_RELOAD_WAIT_S). Unavailable (503 with
        Retry-After) when it is still running then, or when the registry did not answer:
        a request never holds a worker thread for the registry's timeouts."""
        wait = (
            wait_s
            if wait_s is not None
            else float(os.environ.get("R2A_RELOAD_WAIT_S", RELOAD_WAIT_S))
        )
        with self._reload_guard:
            t = self._reloading
            if t is None or not t.is_alive():
                t = threading.Thread(target=self.reload, name="champion-reload", daemon=True)
                t.start()
                self._reloading = t
        t.join(wait)
        if t.is_alive():
            raise Unavailable("the model registry is slow to answer: the reload goes on")
        if self.kind in self.unreachable:
            raise Unavailable("the model registry is unavailable: the champion in memory serves")
        return self.info()

    def _reload(self, name: str) -> None:
        """Follow `name`'s champion alias. What is served stays unless a new version loads:
        a registry that does not answer, an alias that is gone, and a version that fails to
        load each keep the last good champion, and say so (`errors`, /info, one log line).
        A version that failed is not tried again before its backoff ends (`LoadBackoff`)."""
        from r2adapter.families import family
        from r2adapter.registry.models import version_by_alias

        fam = family(name)
        two_way = name == self.kind
        fallback = WITHOUT.get(name, "")
        current = self.champions.get(name)
        serving = f"; v{current.version} (the last good one) serves" if current else ""
        try:
            v = version_by_alias(fam.model, "champion")
        except R2AError as e:  # the registry does not answer: keep serving what we have
            self.unreachable.add(name)
            self._note(name, f"{name} registry error: {e}{serving or fallback}", logging.WARNING)
            return
        self.unreachable.discard(name)
        if v is None:
            if current is None:
                self.errors[name] = (
                    f"no {name} champion in the registry: run `{fam.train_command}` and "
                    f"`r2a promote{'' if name == 'r2a' else ' --router ' + name}`{fallback}"
                )
            else:  # deleted by hand, or a registry rebuilt: routing stays up
                self._note(name, f"the {name} champion alias is gone from the registry{serving}")
            return
        version = str(v.version)
        if current is not None and current.version == version:
            self.backoff.pop(name, None)
            self._note(name, "")
            return
        wait = self.backoff.wait_s(name, version)
        if wait > 0:  # failed to load a moment ago: not again on every poll
            return
        tag = v.tags.get("dataset") if two_way else getattr(self, "dataset_tag", None)
        try:
            model, version = fam.load("champion", version=version)
            champ = Champion(
                fam, fam.serve(model, self.dataset_env or tag or DEFAULT_DATASET), version
            )
        except Exception as e:  # a broken version, or the registry gone midway
            why = f"{type(e).__name__}: {e}" if not isinstance(e, R2AError) else str(e)
            wait = self.backoff.failed(name, version, why)
            LOAD_FAILURES.labels(router=name).inc()
            self._note(
                name,
                f"{name} champion v{version} failed to load ({why.splitlines()[0][:200]})"
                f"{serving or fallback}; next try in {wait:.0f} s",
                logging.WARNING,
            )
            return
        self._warm(champ)  # the old champion serves while the new one warms
        with self._lock:
            if two_way:
                self.dataset_tag = v.tags.get("dataset")
            self.champions[name] = champ
        self.backoff.pop(name, None)
        log.info(
            "serving %s champion v%s%s",
            name,
            version,
            f" (was v{current.version})" if current else "",
        )
        self._note(name, "")

    def _note(self, name: str, text: str, level: int = logging.INFO) -> None:
        """`name`'s state as /info says it; a change is one log line (not one a poll)."""
        if text and text != self.errors.get(name):
            log.log(level, "%s", scrub(text))
        self.errors[name] = text
        STALE.labels(router=name).set(int(bool(text) and name in self.champions))

    def _warm(self, champ: Champion) -> None:
        """One decision before the champion serves: its first call exports the fine-tuned
        encoder to ONNX (once per weights), loads the tokenizer and the corpus features, which
        took 33 s for the first /route after a fresh `make run`. /readyz turns 200 only after
        this, so the first client request does not pay it. A failure here (the database down)
        is logged, not fatal: the probe reports the database itself."""
        t0 = time.perf_counter()
        try:
            champ.route([WARM_QUERY], encode=self.encoder.encode)
        except Exception as e:
            log.warning("%s warm-up failed: %s: %s", champ.name, type(e).__name__, e)
            return
        log.info("%s champion warmed up in %.1f s", champ.name, time.perf_counter() - t0)

    def warm_modes(self) -> None:
        """One retrieval in each mode before /readyz turns 200 (under the startup probe):
        catrag's tiers and adr's champion and hypergraph are built on a mode's first query,
        which made the first `catrag` request after a start take 5.3 s and the first `adr`
        10.3 s (issue 44, item 15). A mode that cannot serve (no adr champion, the database
        down) is logged and left to say why on its own requests."""
        try:
            adapter = self.adapter()
        except Exception as e:  # no champion, or the database down: the probe says so
            log.warning(
                "retrieval warm-up skipped: %s",
                scrub(str(e).splitlines()[0] if str(e) else type(e).__name__),
            )
            return
        took = []
        for mode, retriever in adapter.retrievers.items():
            t0 = time.perf_counter()
            try:
                retriever.retrieve(WARM_QUERY, 5, qvec=self.encoder.encode_query(WARM_QUERY))
            except Exception as e:
                why = str(e).splitlines()[0] if str(e) else type(e).__name__
                log.info("retrieval mode %s not warmed: %s", mode, scrub(why))
                continue
            took.append(f"{mode} {time.perf_counter() - t0:.1f} s")
        log.info("retrieval modes warmed up: %s", ", ".join(took) or "none")

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.reload()

    @property
    def dataset(self) -> str:
        return self.dataset_env or getattr(self, "dataset_tag", None) or DEFAULT_DATASET

    def info(self) -> dict[str, Any]:
        c, k, a = self.champion, self.kway, self.champions.get("adr")
        return {
            "router": self.kind,
            "router_version": c.version if c else None,
            "dataset": self.dataset,
            "champion_error": scrub(self.champion_error) or None,
            "routing": "kway" if k is not None else self.kind,
            "kway_version": k.version if k else None,
            "kway_note": scrub(self.kway_error) or None,
            "adr_version": a.version if a else None,  # the `adr` mode's champion
            "adr_note": scrub(self.errors.get("adr", "")) or None,
            # versions that failed to load, each tried again after `retry_in_s`
            "failed_versions": self.backoff.report() or None,
        }

    # -- parts --------------------------------------------------------------------------

    def router(self) -> Champion:
        """The two-way champion (the service is not ready without it)."""
        c = self.champion
        if c is None:
            raise Unavailable(self.champion_error or "no champion router")
        return c

    def routing(self) -> Champion:
        """The champion that routes `auto`: the k-way one when loaded, else the two-way."""
        c = self.router()
        return self.kway or c

    def adapter(self) -> R2Adapter:
        routing = self.routing()
        key = (self.router().version, self.dataset, self.kway.version if self.kway else None)
        if self._adapter is not None and self._adapter_key == key:
            return self._adapter
        from r2adapter.retrieve.strategies import STRATEGIES, make_retriever

        with self._lock:
            # a DatabaseError goes up as is: the service answers 503 without its address
            dense = make_retriever("dense", self.dataset, self.encoder)
            graph = make_retriever("graph", self.dataset, self.encoder)
            others = {}
            for mode, strategy in STRATEGIES.items():
                if mode in ("dense", "graph") or strategy.compose is not None:
                    continue  # a composite (fusion): the adapter composes it from these
                try:  # a strategy its parameters rule out (not built yet) serves no request
                    # a family's strategy (adr) reads its champion from this table
                    others[mode] = make_retriever(
                        mode, self.dataset, self.encoder, champions=self.champion_of
                    )
                except R2AError as e:
                    log.warning("retrieval mode %s unavailable: %s", mode, e)
            self._adapter = R2Adapter(  # routed by the champion's family
                routing,
                dense,
                graph,
                self.encoder,
                self.rewriter(),
                self.answerer(),
                others,
            )
            self._adapter_key = key
        return self._adapter

    def rewriter(self) -> Any:
        if self._rewriter is None:
            from r2adapter.rewrite import Rewriter

            self._rewriter = Rewriter(
                self.llm(), budget_s=float(os.environ.get("R2A_REWRITE_BUDGET_S", "5"))
            )
        return self._rewriter

    def llm(self) -> Any:
        if self._llm is None:
            from r2adapter.llm import get_llm

            self._llm = get_llm(default_local=True)
        return self._llm

    def warm_llm(self) -> None:
        """Load the local LLM now (in a thread at start): /answer is ready once it is."""
        try:
            llm = self.llm()
            if llm is not None and hasattr(llm, "load"):
                llm.load()
        except Exception as e:  # rewriting then falls back; /answer says why it cannot
            self.llm_error = scrub(str(e).splitlines()[0] if str(e) else type(e).__name__)
            log.warning("could not preload the LLM: %s", e)

    def answer_ready(self) -> tuple[bool, str]:
        """Whether /answer can answer now, and why not."""
        if self.llm_error:
            return False, f"the answering LLM is unavailable: {self.llm_error}"
        llm = self._llm
        if llm is None or not getattr(llm, "loaded", True):
            return False, "the answering LLM is still loading"
        return True, ""

    def answerer(self) -> Any:
        return llm_answerer(self.llm()) if self.llm() is not None else None

    def database_ok(self) -> bool:
        from r2adapter.store.db import available

        return available()

    def ready(self) -> bool:
        return self.champion is not None and self.database_ok()

    def close(self) -> None:
        self._stop.set()
