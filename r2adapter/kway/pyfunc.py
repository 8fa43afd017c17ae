"""The k-way router as an MLflow model: predict returns the chosen strategy, its k, whether
the conservative fallback decided, and each head's score."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow.pyfunc
import pandas as pd


class KwayModel(mlflow.pyfunc.PythonModel):  # type: ignore[name-defined]
    def load_context(self, context):
        from r2adapter.kway.model import KwayRouter
        from r2adapter.retrieve.graph_index import GRAPHS

        self.router = KwayRouter.load(Path(context.artifacts["router"]))
        if self.router.cfg.corpus:
            self.router.bind(self.router.cfg.corpus, GRAPHS)

    # no type hints on predict: MLflow would read them as a (wrong) schema
    def predict(self, context, model_input, params=None):
        from r2adapter.index.encoder import get_encoder

        queries = (
            list(model_input["query"])
            if isinstance(model_input, pd.DataFrame)
            else list(model_input)
        )
        qvecs = get_encoder(self.router.cfg.encoder).encode(queries)
        d = self.router.decide(queries, qvecs)
        return pd.DataFrame(
            {
                "strategy": d.strategy,
                "k": d.k,
                "fallback": d.fallback,
                "scores": [
                    json.dumps(dict(zip(d.strategies, map(float, row), strict=True)))
                    for row in d.scores
                ],
            }
        )
