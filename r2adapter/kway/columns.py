"""The k-way router's columns in its registered MLflow model (the one pyfunc,
r2adapter/registry/pyfunc.py): the chosen strategy, its k, whether the conservative
fallback decided, and each head's score."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from r2adapter.kway.model import KwayRouter


class KwayColumns:
    output: ClassVar[dict[str, str]] = {
        "strategy": "string",
        "k": "long",
        "fallback": "boolean",
        "scores": "string",  # JSON: strategy -> score
    }

    def load(self, folder: Path) -> KwayRouter:
        from r2adapter.retrieve.graph_index import GRAPHS

        router = KwayRouter.load(folder)
        if router.cfg.corpus:
            router.bind(router.cfg.corpus, GRAPHS)
        return router

    def frame(self, router: KwayRouter, queries: list[str]) -> dict[str, Any]:
        from r2adapter.index.encoder import get_encoder

        d = router.decide(queries, get_encoder(router.cfg.encoder).encode(queries))
        return {
            "strategy": list(d.strategy),
            "k": np.asarray(d.k, dtype=np.int64),
            "fallback": np.asarray(d.fallback, dtype=bool),
            "scores": [
                json.dumps(dict(zip(d.strategies, map(float, row), strict=True)))
                for row in d.scores
            ],
        }


KWAY_COLUMNS = KwayColumns()
