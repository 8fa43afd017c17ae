"""The router as an MLflow model: predict returns p_dense, p_graph and the decision, with τ*
and ε inside the model."""

from __future__ import annotations

from pathlib import Path

import mlflow.pyfunc
import numpy as np
import pandas as pd


class RouterModel(mlflow.pyfunc.PythonModel):
    def load_context(self, context):  # type: ignore[no-untyped-def]
        from r2adapter.route.trained import TrainedRouter

        self.router = TrainedRouter.load(Path(context.artifacts["router"]))

    # no type hints on predict: MLflow would read them as a (wrong) schema
    def predict(self, context, model_input, params=None):  # type: ignore[no-untyped-def]
        queries = (
            list(model_input["query"])
            if isinstance(model_input, pd.DataFrame)
            else list(model_input)
        )
        p_dense, p_graph = self.router.score(queries)
        graph = (p_graph - p_dense) > self.router.tau  # R²Adapter eq. 4
        return pd.DataFrame(
            {
                "p_dense": p_dense,
                "p_graph": p_graph,
                "decision": np.where(graph, "graph", "dense"),
                "rewrite": graph & (p_graph < self.router.epsilon),  # eq. 7
                "tau": self.router.tau,
                "epsilon": self.router.epsilon,
            }
        )
