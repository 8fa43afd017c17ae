"""Kubeflow components, one per pipeline step: thin wrappers over `r2adapter.steps` (the
functions the CLI calls), run in the project image. See components/README.md."""

from components.adr import label_adr, promote_adr, train_adr
from components.corpora import corpora
from components.deploy import deploy
from components.evaluate import evaluate
from components.index import index, index_shard, index_shards
from components.kway import label_strategies, promote_kway, train_kway
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
    "label_adr",
    "label_merge",
    "label_strategies",
    "label_shard",
    "label_shards",
    "promote",
    "promote_adr",
    "promote_kway",
    "record_run",
    "register",
    "train",
    "train_adr",
    "train_kway",
    "validate",
]
