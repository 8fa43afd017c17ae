"""Figure names as MLflow metric keys: every strategy name of the k-way table must log."""

from __future__ import annotations

import pytest
from mlflow.exceptions import MlflowException
from mlflow.utils.validation import _validate_metric_name

from r2adapter.config import kway_params
from r2adapter.data.metrics import metric_key

pytestmark = pytest.mark.unit


def test_the_raw_strategy_names_are_not_valid_metric_names() -> None:
    # why metric_key exists: MLflow refuses '+' (graph+rw@5), the failure the LOCO report hit
    with pytest.raises(MlflowException):
        _validate_metric_name("graph+rw@5.recall")


@pytest.mark.parametrize("name", [*kway_params().strategies, "recall@5", "a:b|c"])
def test_every_key_is_a_valid_mlflow_metric_name(name: str) -> None:
    key = metric_key(f"{name}.recall")
    _validate_metric_name(key)  # raises on an invalid name
    assert "@" not in key and "+" not in key


def test_keys_stay_readable_and_distinct() -> None:
    assert metric_key("recall@5") == "recall_at_5"
    assert metric_key("graph+rw@5") == "graph_plus_rw_at_5"
    names = [*kway_params().strategies]
    assert len({metric_key(n) for n in names}) == len(names)
