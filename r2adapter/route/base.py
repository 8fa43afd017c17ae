"""The Router protocol: `score(queries) -> (p_dense, p_graph)`; graph iff p_g − p_d > τ."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

import numpy as np

from r2adapter.route.threshold import decide


class Router(ABC):
    name: str = ""
    tau: float = 0.0

    @abstractmethod
    def score(self, queries: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Suitability of dense and graph retrieval for each query, in [0, 1]."""

    def route(self, queries: Sequence[str]) -> np.ndarray:
        """True where the query goes to graph retrieval (R²Adapter eq. 4)."""
        p_dense, p_graph = self.score(queries)
        return decide(p_dense, p_graph, self.tau)


ROUTERS: dict[str, Callable[..., Router]] = {}


def register_router(name: str) -> Callable[[Callable[..., Router]], Callable[..., Router]]:
    def deco(factory: Callable[..., Router]) -> Callable[..., Router]:
        ROUTERS[name] = factory
        return factory

    return deco
