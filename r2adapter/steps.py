"""The pipeline's steps as plain functions: the one room the CLI, DVC and Kubeflow enter."""

from __future__ import annotations

from r2adapter.data.adapters import load_dataset
from r2adapter.data.validate import Report
from r2adapter.data.validate import validate as _validate
from r2adapter.store.load import LoadResult
from r2adapter.store.load import load as _load

SHIPPED_DATASETS = ("sample", "musique", "hotpotqa", "2wikimultihopqa")


def validate(dataset: str) -> Report:
    """Great Expectations suites over corpus and queries (ARCHITECTURE.md step 1)."""
    return _validate(load_dataset(dataset))


def load(dataset: str) -> LoadResult:
    """Passages and queries into Postgres in one transaction."""
    return _load(load_dataset(dataset))
