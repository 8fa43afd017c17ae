"""ADR's trained intent classifier as an MLflow model: predict returns the operator that
runs, the classifier's class, its confidence and whether eq. 1's fallback decided."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pandas as pd

from r2adapter.registry.pyfunc import RouterPyfunc


class AdrModel(RouterPyfunc):
    OUTPUT: ClassVar[dict[str, str]] = {
        "operator": "string",
        "predicted": "string",
        "confidence": "double",
        "fallback": "boolean",
    }

    def load_context(self, context):
        from r2adapter.adr.router import AdrRouter

        self.router = AdrRouter.load(Path(context.artifacts["router"]))

    # no type hints on predict: MLflow would read them as a (wrong) schema
    def predict(self, context, model_input, params=None):
        from r2adapter.index.encoder import get_encoder

        queries = self.queries(model_input)
        ds = self.router.decide(get_encoder(self.router.encoder).encode(queries))
        return pd.DataFrame(
            {
                "operator": [d.operator for d in ds],
                "predicted": [d.predicted for d in ds],
                "confidence": [float(d.confidence) for d in ds],
                "fallback": [bool(d.fallback) for d in ds],
            }
        )
