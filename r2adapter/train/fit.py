"""Wire model, data and the threshold-search callback into a Lightning Trainer."""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass
from typing import Any

import lightning as L

from r2adapter.config import RouterParams
from r2adapter.errors import R2AError
from r2adapter.label.annotate import LabelRecord
from r2adapter.retrieve.graph_index import GRAPHS
from r2adapter.route.evidence import DenseEvidence
from r2adapter.route.threshold import SearchHistory
from r2adapter.route.trained import RouterConfig, TrainedRouter, build_net
from r2adapter.train.callbacks import PeriodicThresholdSearch
from r2adapter.train.data import RouterDataModule
from r2adapter.train.module import RouterModule


@dataclass
class TrainResult:
    router: TrainedRouter
    history: SearchHistory
    steps: int
    accelerator: str


def train_router(
    records: list[LabelRecord],
    p: RouterParams,
    logger: Any = None,
    progress: bool = True,
    dataset: str = "",
) -> TrainResult:
    """Train on the labelled splits of `dataset` (whose index the routing features read)."""
    L.seed_everything(p.seed, workers=True, verbose=False)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    from r2adapter.index.encoder import get_encoder

    if p.features and not dataset:
        raise R2AError("a router with corpus features needs the dataset it is trained on")
    enc = get_encoder() if p.backbone == "embedding" or p.features else None
    cfg = RouterConfig(
        backbone=p.backbone,
        tau=0.0,
        epsilon=p.epsilon,
        max_length=p.max_length,
        dim=enc.dim if enc else 384,
        encoder=enc.name if enc else "all-MiniLM-L6-v2",
        features=tuple(p.features),
        corpus=dataset,
        runtime=p.runtime,
        normalize=p.normalize,
        num_layers=p.num_layers,
    )
    evidence = DenseEvidence(dataset, GRAPHS, p.features) if p.features else None
    dm = RouterDataModule(
        records,
        p.backbone,
        p.batch_size,
        p.max_length,
        embed=enc.encode if enc else None,
        seed=p.seed,
        features=evidence,
    )
    module = RouterModule(
        build_net(cfg),
        lr=p.lr,
        alpha=p.alpha,
        gamma=p.gamma,
        warmup_ratio=p.warmup_ratio,
        head_lr=p.head_lr,
        weight_decay=p.weight_decay,
    )
    search = PeriodicThresholdSearch(
        p.eval_every_n_steps, p.tau_min, p.tau_max, p.tau_step, p.search_usage, p.patience
    )
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    trainer = L.Trainer(
        accelerator="auto",
        devices=1,
        max_epochs=p.epochs,
        logger=logger or False,
        callbacks=[search],
        enable_checkpointing=False,
        deterministic=True,
        enable_progress_bar=progress,
        enable_model_summary=False,
        log_every_n_steps=1,
        num_sanity_val_steps=0,
        check_val_every_n_epoch=1,
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*does not have many workers.*")
        warnings.filterwarnings("ignore", ".*smaller than the logging interval.*")
        trainer.fit(module, datamodule=dm)
    best = RouterConfig(**{**cfg.__dict__, "tau": search.history.best_tau})
    router = TrainedRouter(best, module.net.cpu()).bind(dataset, GRAPHS)  # its features' corpus
    return TrainResult(
        router, search.history, trainer.global_step, str(trainer.accelerator.__class__.__name__)
    )
