"""The k-way router as an MLflow model: predict returns the chosen strategy, its k, whether
the conservative fallback decided, and each head's score."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from r2adapter.registry.pyfunc import RouterPyfunc


class KwayModel(RouterPyfunc):
    OUTPUT: ClassVar[dict[str, str]] = {
        "strategy": "string",
        "k": "long",
        "fallback": "boolean",
        "scores": "string",  # JSON: strategy -> score
    }

    def load_context(self, context):
        from r2adapter.kway.model import KwayRouter
        from r2adapter.retrieve.graph_index import GRAPHS

        self.router = KwayRouter.load(Path(context.artifacts["router"]))
        if self.router.cfg.corpus:
            self.router.bind(self.router.cfg.corpus, GRAPHS)

    # no type hints on predict: MLflow would read them as a (wrong) schema
    def predict(self, context, model_input, params=None):
        from r2adapter.index.encoder import get_encoder

        queries = self.queries(model_input)
        qvecs = get_encoder(self.router.cfg.encoder).encode(queries)
        d = self.router.decide(queries, qvecs)
        return pd.DataFrame(
            {
                "strategy": list(d.strategy),
                "k": np.asarray(d.k, dtype=np.int64),
                "fallback": np.asarray(d.fallback, dtype=bool),
                "scores": [
                    json.dumps(dict(zip(d.strategies, map(float, row), strict=True)))
                    for row in d.scores
                ],
            }
        )
