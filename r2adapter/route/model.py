"""Router networks: an encoder + linear layer → two sigmoid outputs (R²Adapter eq. 1).

Two backbones share the heads and the loss:
- `TransformerRouter`: a fine-tuned transformer encoder (default the offline MiniLM; the
  paper's microsoft/deberta-v3-base where a hub is reachable), mean-pooled.
- `EmbeddingRouter`: our cheaper router, a head over the query embedding the dense
  retriever computes anyway, so routing costs almost nothing beyond retrieval.

Either may also read the dense-evidence features of r2adapter.route.evidence, appended to
the pooled query before the head.
"""

from __future__ import annotations

import torch
from torch import nn

from r2adapter.errors import R2AError


def backbone_path(name: str) -> str:
    if name == "minilm":
        from r2adapter.index.encoder import _minilm_path

        return str(_minilm_path())
    return name


class TransformerRouter(nn.Module):
    def __init__(
        self,
        backbone: str = "minilm",
        n_features: int = 0,
        normalize: bool = False,
        num_layers: int = 0,
    ) -> None:
        super().__init__()
        from transformers import AutoModel

        try:
            self.encoder = AutoModel.from_pretrained(backbone_path(backbone))
        except Exception as e:  # offline and not cached, or a bad path
            raise R2AError(
                f"cannot load router backbone '{backbone}': {str(e).splitlines()[0]}"
            ) from None
        if num_layers:  # keep the lower layers only: a cheaper router (0: all of them)
            layers = self.encoder.encoder.layer
            if not 0 < num_layers <= len(layers):
                raise R2AError(f"num_layers must be in 1..{len(layers)}, not {num_layers}")
            self.encoder.encoder.layer = layers[:num_layers]
            self.encoder.config.num_hidden_layers = num_layers
        self.encoder.train()  # from_pretrained returns eval mode; fine-tuning wants dropout
        self.head = nn.Linear(self.encoder.config.hidden_size + n_features, 2)
        self.normalize = normalize

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        features: torch.Tensor | None = None,
    ) -> torch.Tensor:
        out = self.encoder(input_ids=input_ids, attention_mask=attention_mask)
        mask = attention_mask.unsqueeze(-1).to(out.last_hidden_state.dtype)
        h = (out.last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        if self.normalize:  # the sentence embedding's scale: the head starts where
            h = nn.functional.normalize(h, dim=1)  # a head over frozen embeddings would
        return self.probs(h, features)

    def probs(self, pooled: torch.Tensor, features: torch.Tensor | None = None) -> torch.Tensor:
        """The head over a pooled query (what an exported encoder returns)."""
        return torch.sigmoid(self.head(_with(pooled, features)))  # [p_dense, p_graph]


class EmbeddingRouter(nn.Module):
    def __init__(
        self, dim: int = 384, hidden: int = 0, dropout: float = 0.1, n_features: int = 0
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Dropout(dropout)]
        if hidden:
            layers += [nn.Linear(dim + n_features, hidden), nn.GELU(), nn.Dropout(dropout)]
        layers.append(nn.Linear(hidden or dim + n_features, 2))
        self.head = nn.Sequential(*layers)

    def forward(
        self, embedding: torch.Tensor, features: torch.Tensor | None = None
    ) -> torch.Tensor:
        return torch.sigmoid(self.head(_with(embedding, features)))


def _with(h: torch.Tensor, features: torch.Tensor | None) -> torch.Tensor:
    """The pooled query, followed by the routing features (r2adapter.route.evidence)."""
    return h if features is None else torch.cat([h, features.to(h.dtype)], dim=1)
