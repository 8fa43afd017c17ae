"""Kubeflow components, one per pipeline step: thin wrappers over `r2adapter.steps` (the
functions the CLI calls), run in the project image. See components/README.md."""

from components.corpora import corpora
from components.deploy import deploy
from components.evaluate import evaluate
from components.family import label_family
from components.index import index, index_shard, index_shards
from components.label import label_merge, label_shard, label_shards
from components.promote import promote
from components.record import record_run
from components.register import register
from components.train import train
from components.validate import validate

__all__ = [
    "corpora",
    "deploy",
    "evaluate",
    "index",
    "index_shard",
    "index_shards",
    "label_family",
    "label_merge",
    "label_shard",
    "label_shards",
    "promote",
    "record_run",
    "register",
    "train",
    "validate",
]
