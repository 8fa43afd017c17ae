"""The router as an MLflow model: predict returns p_dense, p_graph and the decision, with τ*
and ε inside the model."""

from __future__ import annotations

from pathlib import Path

import mlflow.pyfunc
import numpy as np
import pandas as pd


class RouterModel(mlflow.pyfunc.PythonModel):  # type: ignore[name-defined]
    def load_context(self, context):
        from r2adapter.retrieve.graph_index import GRAPHS
        from r2adapter.route.trained import TrainedRouter

        self.router = TrainedRouter.load(Path(context.artifacts["router"]))
        if self.router.cfg.corpus:  # its features read the corpus it was trained on
            self.router.bind(self.router.cfg.corpus, GRAPHS)

    # no type hints on predict: MLflow would read them as a (wrong) schema
    def predict(self, context, model_input, params=None):
        queries = (
            list(model_input["query"])
            if isinstance(model_input, pd.DataFrame)
            else list(model_input)
        )
        d = self.router.decide(queries)  # R²Adapter eqs. 4 and 7
        return pd.DataFrame(
            {
                "p_dense": d.p_dense,
                "p_graph": d.p_graph,
                "decision": np.where(d.graph, "graph", "dense"),
                "rewrite": d.rewrite,
                "tau": d.tau,
                "epsilon": d.epsilon,
            }
        )
