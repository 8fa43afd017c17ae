"""LightningModule: the router network with the independent focal loss (eqs. 1–3)."""

from __future__ import annotations

from typing import Any

import lightning as L
import numpy as np
import torch

from r2adapter.route.loss import focal_bce


class RouterModule(L.LightningModule):
    def __init__(
        self,
        net: torch.nn.Module,
        lr: float = 1e-5,
        alpha: float = 0.25,
        gamma: float = 2.0,
        warmup_ratio: float = 0.1,
        weight_decay: float = 0.01,
        head_lr: float = 0.0,
    ) -> None:
        super().__init__()
        self.net = net
        self.save_hyperparameters(ignore=["net"])

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        feats = batch.get("features")
        if "embedding" in batch:
            return self.net(batch["embedding"], feats)
        return self.net(batch["input_ids"], batch["attention_mask"], feats)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        probs = self(batch)
        loss = focal_bce(probs, batch["y"], self.hparams["alpha"], self.hparams["gamma"])
        self.log("train_loss", loss, prog_bar=True, batch_size=len(batch["y"]))
        return loss

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = focal_bce(self(batch), batch["y"], self.hparams["alpha"], self.hparams["gamma"])
        self.log("val_loss", loss, prog_bar=True, batch_size=len(batch["y"]))
        return loss

    @torch.inference_mode()
    def predict_split(self, loader: Any) -> tuple[np.ndarray, np.ndarray]:
        was_training = self.training
        self.eval()
        out = [self({k: v.to(self.device) for k, v in b.items()}).cpu() for b in loader]
        if was_training:
            self.train()
        probs = torch.cat(out).numpy() if out else np.zeros((0, 2))
        return probs[:, 0], probs[:, 1]

    def configure_optimizers(self) -> Any:
        from transformers import get_linear_schedule_with_warmup

        lr, head_lr = self.hparams["lr"], self.hparams["head_lr"] or self.hparams["lr"]
        named = list(self.net.named_parameters())
        groups = [
            {"params": [p for n, p in named if not n.startswith("head.")], "lr": lr},
            {"params": [p for n, p in named if n.startswith("head.")], "lr": head_lr},
        ]
        opt = torch.optim.AdamW(
            [g for g in groups if g["params"]], lr=lr, weight_decay=self.hparams["weight_decay"]
        )
        total = max(int(self.trainer.estimated_stepping_batches), 1)
        sched = get_linear_schedule_with_warmup(
            opt, int(total * self.hparams["warmup_ratio"]), total
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
