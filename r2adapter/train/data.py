"""LightningDataModule over a label file: train/val/test splits → tensors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from r2adapter.errors import R2AError
from r2adapter.label.annotate import LabelRecord


class _Rows(Dataset):
    def __init__(self, rows: Sequence[Any]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> Any:
        return self.rows[i]


def targets(records: Sequence[LabelRecord]) -> torch.Tensor:
    return torch.tensor([[float(r.y_dense), float(r.y_graph)] for r in records])


class RouterDataModule(L.LightningDataModule):
    """Batches are dicts: model inputs + `y` (suitability [y_dense, y_graph])."""

    def __init__(
        self,
        records: Sequence[LabelRecord],
        backbone: str,
        batch_size: int = 64,
        max_length: int = 64,
        embed: Callable[[list[str]], np.ndarray] | None = None,
        seed: int = 13,
        features: Callable[[list[str], np.ndarray], np.ndarray] | None = None,
    ) -> None:
        super().__init__()
        self.splits = {s: [r for r in records if r.split == s] for s in ("train", "val", "test")}
        for s in ("train", "val"):
            if not self.splits[s]:
                raise R2AError(f"the {s} split is empty: label more queries")
        train = self.splits["train"]
        if len({r.y_graph for r in train}) < 2 or len({r.preference for r in train}) < 2:
            raise R2AError(
                "the training labels have a single class: nothing to learn "
                "(check the label rule and the index)"
            )
        self.backbone, self.batch_size, self.max_length = backbone, batch_size, max_length
        self.seed = seed
        self._tokenizer = None
        self._emb: dict[str, np.ndarray] = {}
        self._feats: dict[str, np.ndarray] = {}
        if backbone == "embedding" or features is not None:
            if embed is None:
                raise R2AError("the router's inputs need the retrieval encoder")
            questions = [r.question for r in records]
            vecs = embed(questions)
            self._emb = dict(zip(questions, vecs, strict=True))
            if features is not None:
                self._feats = dict(zip(questions, features(questions, vecs), strict=True))
        if backbone != "embedding":
            from transformers import AutoTokenizer

            from r2adapter.route.model import backbone_path

            self._tokenizer = AutoTokenizer.from_pretrained(backbone_path(backbone))

    def collate(self, rows: list[LabelRecord]) -> dict[str, torch.Tensor]:
        batch: dict[str, torch.Tensor] = {"y": targets(rows)}
        if self._feats:
            batch["features"] = torch.from_numpy(
                np.stack([self._feats[r.question] for r in rows]).astype(np.float32)
            )
        if self._tokenizer is None:
            batch["embedding"] = torch.from_numpy(
                np.stack([self._emb[r.question] for r in rows]).astype(np.float32)
            )
        else:
            enc = self._tokenizer(
                [r.question for r in rows],
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            )
            batch["input_ids"], batch["attention_mask"] = enc["input_ids"], enc["attention_mask"]
        return batch

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        g = torch.Generator().manual_seed(self.seed)
        return DataLoader(
            _Rows(self.splits[split]),
            batch_size=self.batch_size,
            shuffle=shuffle,
            collate_fn=self.collate,
            generator=g,
            num_workers=0,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", False)
