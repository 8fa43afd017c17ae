"""The metrics moved to r2adapter.data.metrics (a leaf that label/ may import: issue 25).
`metric_key` is re-exported here only for registry/promote.py, components/register.py and
the compiled pipelines/retrain.yaml, which still import it from this module."""

from r2adapter.data.metrics import metric_key as metric_key
