"""What the service holds: the champion router (swapped without downtime when the alias
moves), the retrievers of the served dataset, the rewriter and the answering LLM."""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from r2adapter.adapter import R2Adapter, llm_answerer
from r2adapter.config import RouterParams
from r2adapter.errors import DatabaseError, R2AError
from r2adapter.index.encoder import get_encoder

log = logging.getLogger("r2a.serving")


class Unavailable(Exception):
    """503: a dependency (database, champion model, index) is missing right now."""


@dataclass
class Champion:
    router: Any
    version: str
    kind: str


class ServingState:
    def __init__(self) -> None:
        self.kind = os.environ.get("R2A_ROUTER", "r2a")
        self.dataset_env = os.environ.get("R2A_SERVE_DATASET")
        self.poll_s = float(os.environ.get("R2A_CHAMPION_POLL_S", "10"))
        self.encoder = get_encoder()
        self.champion: Champion | None = None
        self.champion_error = "not loaded yet"
        self._adapter: R2Adapter | None = None
        self._adapter_key: tuple[str, str] | None = None
        self._lock = threading.Lock()
        self._rewriter: Any = None
        self._llm: Any = None
        self.reload()
        self._stop = threading.Event()
        threading.Thread(target=self._poll, name="champion-poll", daemon=True).start()

    # -- champion -----------------------------------------------------------------------

    def reload(self) -> dict[str, Any]:
        """Load the champion if its version changed; the old one serves until then."""
        from r2adapter.registry.models import alias_version, load_router

        try:
            v = alias_version(self.kind, "champion")
            if v is None:
                self.champion_error = (
                    "no champion router in the registry: run `r2a train` and `r2a promote`"
                )
                return self.info()
            if self.champion is None or self.champion.version != str(v.version):
                router, version = load_router(self.kind, "champion")
                with self._lock:
                    self.dataset_tag = v.tags.get("dataset")
                    router.bind(self.dataset)  # the corpus its features are read from
                    self.champion = Champion(router, version, self.kind)
                log.info("serving %s champion v%s", self.kind, version)
            self.champion_error = ""
        except R2AError as e:
            self.champion_error = str(e)
        except Exception as e:  # registry unreachable: keep serving the model we have
            self.champion_error = f"registry error: {type(e).__name__}: {e}"
        return self.info()

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.reload()

    @property
    def dataset(self) -> str:
        return self.dataset_env or getattr(self, "dataset_tag", None) or "2wikimultihopqa"

    def info(self) -> dict[str, Any]:
        c = self.champion
        return {
            "router": self.kind,
            "router_version": c.version if c else None,
            "dataset": self.dataset,
            "champion_error": self.champion_error or None,
        }

    # -- parts --------------------------------------------------------------------------

    def router(self) -> Champion:
        c = self.champion
        if c is None:
            raise Unavailable(self.champion_error or "no champion router")
        return c

    def adapter(self) -> R2Adapter:
        c = self.router()
        key = (c.version, self.dataset)
        if self._adapter is not None and self._adapter_key == key:
            return self._adapter
        from r2adapter.retrieve.dense import DenseRetriever
        from r2adapter.retrieve.graph import GraphRetriever

        with self._lock:
            try:
                dense = DenseRetriever(self.dataset, self.encoder)
                graph = GraphRetriever(self.dataset, self.encoder)
            except DatabaseError as e:
                raise Unavailable(str(e)) from None
            eps = getattr(c.router, "epsilon", RouterParams().epsilon)
            self._adapter = R2Adapter(
                c.router, dense, graph, self.encoder, self.rewriter(), eps, self.answerer()
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

    def answerer(self) -> Any:
        return llm_answerer(self.llm()) if self.llm() is not None else None

    def database_ok(self) -> bool:
        from r2adapter.store.db import ping

        return ping()

    def ready(self) -> bool:
        return self.champion is not None and self.database_ok()

    def close(self) -> None:
        self._stop.set()


def timed(f: Any, *args: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = f(*args)
    return out, (time.perf_counter() - t0) * 1000
