"""ADR's trained intent classifier as an MLflow model: predict returns the operator that
runs, the classifier's class, its confidence and whether eq. 1's fallback decided."""

from __future__ import annotations

from pathlib import Path

import mlflow.pyfunc
import pandas as pd


class AdrModel(mlflow.pyfunc.PythonModel):  # type: ignore[name-defined]
    def load_context(self, context):
        from r2adapter.adr.router import AdrRouter

        self.router = AdrRouter.load(Path(context.artifacts["router"]))

    # no type hints on predict: MLflow would read them as a (wrong) schema
    def predict(self, context, model_input, params=None):
        from r2adapter.index.encoder import get_encoder

        queries = (
            list(model_input["query"])
            if isinstance(model_input, pd.DataFrame)
            else list(model_input)
        )
        ds = self.router.decide(get_encoder(self.router.encoder).encode(queries))
        return pd.DataFrame(
            {
                "operator": [d.operator for d in ds],
                "predicted": [d.predicted for d in ds],
                "confidence": [d.confidence for d in ds],
                "fallback": [d.fallback for d in ds],
            }
        )
