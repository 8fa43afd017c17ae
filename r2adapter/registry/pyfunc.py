"""The routers as MLflow models: what every family's pyfunc shares (its input, a column
`query` of strings; its signature), and the two-way router's, whose predict returns p_dense,
p_graph and the decision, with τ* and ε inside the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import mlflow.pyfunc
import numpy as np
import pandas as pd

QUERY = "query"  # every router model's one input column


class RouterPyfunc(mlflow.pyfunc.PythonModel):  # type: ignore[name-defined]
    """A router family's MLflow model: `OUTPUT` names the columns (and their MLflow types)
    that its predict returns; the registry writes both into the model's signature, so
    MLflow refuses an input without a string column `query` before predict runs."""

    OUTPUT: ClassVar[dict[str, str]] = {}

    @classmethod
    def signature(cls) -> Any:
        from mlflow.models import ModelSignature
        from mlflow.types import ColSpec, Schema

        return ModelSignature(
            inputs=Schema([ColSpec("string", QUERY)]),
            outputs=Schema([ColSpec(t, n) for n, t in cls.OUTPUT.items()]) if cls.OUTPUT else None,
        )

    @staticmethod
    def queries(model_input: pd.DataFrame) -> list[str]:
        """The queries of an input the signature let through; a missing one (the schema
        allows None in a string column) is MLflow's one-line invalid-input error."""
        from mlflow.exceptions import MlflowException

        queries = list(model_input[QUERY])
        bad = [i for i, q in enumerate(queries) if not isinstance(q, str) or not q.strip()]
        if bad:
            raise MlflowException.invalid_parameter_value(
                f"column '{QUERY}' must hold non-empty strings: row {bad[0]} is {queries[bad[0]]!r}"
            )
        return queries


class RouterModel(RouterPyfunc):
    OUTPUT: ClassVar[dict[str, str]] = {
        "p_dense": "double",
        "p_graph": "double",
        "decision": "string",
        "rewrite": "boolean",
        "tau": "double",
        "epsilon": "double",
    }

    def load_context(self, context):
        from r2adapter.retrieve.graph_index import GRAPHS
        from r2adapter.route.trained import TrainedRouter

        self.router = TrainedRouter.load(Path(context.artifacts["router"]))
        if self.router.cfg.corpus:  # its features read the corpus it was trained on
            self.router.bind(self.router.cfg.corpus, GRAPHS)

    # no type hints on predict: MLflow would read them as a (wrong) schema
    def predict(self, context, model_input, params=None):
        d = self.router.decide(self.queries(model_input))  # R²Adapter eqs. 4 and 7
        return pd.DataFrame(
            {
                "p_dense": np.asarray(d.p_dense, dtype=np.float64),
                "p_graph": np.asarray(d.p_graph, dtype=np.float64),
                "decision": np.where(d.graph, "graph", "dense"),
                "rewrite": np.asarray(d.rewrite, dtype=bool),
                "tau": float(d.tau),
                "epsilon": float(d.epsilon),
            }
        )
