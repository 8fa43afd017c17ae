"""A trained router ready for inference: network + tokenizer (or encoder) + τ* and ε.

Saved as a folder (config.json + weights) that the MLflow model wraps."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from r2adapter.errors import R2AError
from r2adapter.route.base import Router
from r2adapter.route.model import EmbeddingRouter, TransformerRouter, backbone_path


@dataclass(frozen=True)
class RouterConfig:
    backbone: str  # "embedding" or a transformer backbone
    tau: float
    epsilon: float
    max_length: int = 64
    dim: int = 384
    hidden: int = 0
    encoder: str = "all-MiniLM-L6-v2"  # the retrieval encoder an embedding router reads


def build_net(cfg: RouterConfig) -> torch.nn.Module:
    if cfg.backbone == "embedding":
        return EmbeddingRouter(cfg.dim, cfg.hidden)
    return TransformerRouter(cfg.backbone)


class TrainedRouter(Router):
    def __init__(self, cfg: RouterConfig, net: torch.nn.Module) -> None:
        self.cfg = cfg
        self.name = "r2a_embed" if cfg.backbone == "embedding" else "r2a"
        self.tau = cfg.tau
        self.epsilon = cfg.epsilon
        self.net = net.eval()
        self._tokenizer = None
        self._lock = threading.Lock()
        if cfg.backbone != "embedding":
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(backbone_path(cfg.backbone))

    @property
    def uses_embedding(self) -> bool:
        return self.cfg.backbone == "embedding"

    @torch.inference_mode()
    def score(self, queries: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        if not queries:
            return np.zeros(0), np.zeros(0)
        if self.cfg.backbone == "embedding":
            from r2adapter.index.encoder import get_encoder

            return self.score_embeddings(get_encoder(self.cfg.encoder).encode(list(queries)))
        assert self._tokenizer is not None
        with self._lock:  # the fast tokenizer is not safe to share across threads either
            batch = self._tokenizer(
                list(queries),
                padding=True,
                truncation=True,
                max_length=self.cfg.max_length,
                return_tensors="pt",
            )
            probs = self.net(batch["input_ids"], batch["attention_mask"]).numpy()
        return probs[:, 0].astype(np.float64), probs[:, 1].astype(np.float64)

    @torch.inference_mode()
    def score_embeddings(self, emb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For the embedding router: reuse the retrieval query embedding."""
        probs = self.net(torch.from_numpy(np.asarray(emb, dtype=np.float32))).numpy()
        return probs[:, 0].astype(np.float64), probs[:, 1].astype(np.float64)

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(asdict(self.cfg), indent=2))
        torch.save(self.net.state_dict(), folder / "weights.pt")

    @classmethod
    def load(cls, folder: Path) -> TrainedRouter:
        try:
            cfg = RouterConfig(**json.loads((folder / "config.json").read_text()))
            net = build_net(cfg)
            net.load_state_dict(torch.load(folder / "weights.pt", map_location="cpu"))
        except (OSError, json.JSONDecodeError, TypeError, RuntimeError) as e:
            raise R2AError(f"{folder}: not a saved router ({str(e).splitlines()[0]})") from None
        return cls(cfg, net)
