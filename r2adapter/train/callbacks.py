"""The periodic threshold search as a Lightning Callback (R²Adapter Algorithm 2)."""

from __future__ import annotations

import copy
from typing import Any

import lightning as L
import numpy as np

from r2adapter.route.threshold import SearchHistory, SearchPoint, f1_recall, search_threshold


class PeriodicThresholdSearch(L.Callback):
    """Every N_eval steps: predict the validation split, search τ for the best
    Score(τ) = (F1 + Recall)/2 of the graph class, keep the best model state and τ*."""

    def __init__(
        self,
        every_n_steps: int = 50,
        tau_min: float = 0.0,
        tau_max: float = 0.5,
        tau_step: float = 0.02,
        max_graph_usage: float = 1.0,
        patience: int = 0,
    ) -> None:
        if every_n_steps < 1:
            raise ValueError("every_n_steps must be ≥ 1")
        self.every, self.tau_min, self.tau_max, self.tau_step = (
            every_n_steps,
            tau_min,
            tau_max,
            tau_step,
        )
        self.max_graph_usage = max_graph_usage
        self.patience = patience  # searches without a better score before stopping (0: never)
        self.history = SearchHistory()
        self.best_state: dict[str, Any] | None = None

    def _evaluate(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        step = trainer.global_step
        if self.history.points and self.history.points[-1].step == step:
            return
        dm = trainer.datamodule  # type: ignore[attr-defined]
        p_dense, p_graph = module.predict_split(dm.val_dataloader())  # type: ignore[operator]
        truth = np.array([r.preference == "graph" for r in dm.splits["val"]])
        s = search_threshold(
            p_dense,
            p_graph,
            truth,
            self.tau_min,
            self.tau_max,
            self.tau_step,
            self.max_graph_usage,
        )
        margins = np.asarray(p_graph) - np.asarray(p_dense)
        cuts = np.unique(margins)
        pr = np.array([f1_recall(margins >= c, truth)[:2] for c in cuts]).reshape(-1, 2)
        self.history.points.append(SearchPoint(step, s, (pr[:, 0], pr[:, 1])))
        best_i = int(np.argmin(np.abs(s.taus - s.best_tau)))
        metrics = {
            "val_score": s.best_score,
            "val_tau": s.best_tau,
            "val_f1_graph": float(s.f1[best_i]),
            "val_recall_graph": float(s.recall[best_i]),
            "val_graph_usage": float(np.mean(margins > s.best_tau)),
        }
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=step)
        if s.best_score > self.history.best_score:  # strict: Algorithm 2 line 14
            self.history.best_score, self.history.best_tau = s.best_score, s.best_tau
            self.history.best_step = step
            self.best_state = copy.deepcopy(
                {k: v.detach().cpu() for k, v in module.state_dict().items()}
            )

    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if trainer.global_step % self.every == 0:
            self._evaluate(trainer, pl_module)
            if self.patience and self._stale() >= self.patience and not trainer.should_stop:
                self.history.stopped_at = trainer.global_step
                trainer.should_stop = True

    def _stale(self) -> int:
        """Searches since the one that found the best score."""
        return sum(p.step > self.history.best_step for p in self.history.points)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._evaluate(trainer, pl_module)  # the final state is a candidate too
        if self.best_state is not None:
            pl_module.load_state_dict(self.best_state)
