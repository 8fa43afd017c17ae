"""The one MLflow model of every router family: a column `query` of strings in; the family's
columns out, which the family names and fills (its `ModelColumns`: r2adapter/route/
family.py). The model knows its family by name (`family`, also the MLmodel's metadata) and
holds the family's columns object, pickled with it: the registry sits below the families
and never imports one; the family hands its columns in when it registers
(r2adapter/registry/training.py `Fitted`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import mlflow.pyfunc
import pandas as pd

if TYPE_CHECKING:
    from r2adapter.route.family import ModelColumns

QUERY = "query"  # every router model's one input column


class RouterModel(mlflow.pyfunc.PythonModel):  # type: ignore[name-defined]
    """A router family's MLflow model: `columns.output` names the columns (and their MLflow
    types) that predict returns; the registry writes both into the model's signature, so
    MLflow refuses an input without a string column `query` before predict runs."""

    def __init__(self, family: str, columns: ModelColumns) -> None:
        self.family = family  # the family's name in r2adapter/families.py
        self.columns = columns

    def signature(self) -> Any:
        from mlflow.models import ModelSignature
        from mlflow.types import ColSpec, Schema

        out = self.columns.output
        return ModelSignature(
            inputs=Schema([ColSpec("string", QUERY)]),
            outputs=Schema([ColSpec(t, n) for n, t in out.items()]) if out else None,
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

    def load_context(self, context):
        self.router = self.columns.load(Path(context.artifacts["router"]))

    # no type hints on predict: MLflow would read them as a (wrong) schema
    def predict(self, context, model_input, params=None):
        return pd.DataFrame(self.columns.frame(self.router, self.queries(model_input)))
