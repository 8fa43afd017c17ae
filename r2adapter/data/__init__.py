"""Datasets: canonical schema, format adapters, validation suites."""

from r2adapter.data.adapters import load_dataset
from r2adapter.data.schema import Dataset, Passage, Query, passage_id

__all__ = ["Dataset", "Passage", "Query", "load_dataset", "passage_id"]
