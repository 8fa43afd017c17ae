"""A trained router ready for inference: network + tokenizer (or encoder) + τ* and ε.

Saved as a folder (config.json + weights) that the MLflow model wraps."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from r2adapter.errors import R2AError
from r2adapter.route.base import Router
from r2adapter.route.evidence import DenseEvidence, GraphSource, n_features
from r2adapter.route.kinds import router_kind
from r2adapter.route.model import EmbeddingRouter, TransformerRouter, backbone_path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RouterConfig:
    backbone: str  # "embedding" or a transformer backbone
    tau: float
    epsilon: float
    max_length: int = 64
    dim: int = 384
    hidden: int = 0
    encoder: str = "all-MiniLM-L6-v2"  # the retrieval encoder an embedding router reads
    features: tuple[str, ...] = ()  # dense-evidence features (r2adapter.route.evidence)
    corpus: str = ""  # the dataset trained on: the features' corpus unless bound to another
    runtime: str = "torch"  # "onnx": the transformer runs in ONNX Runtime at inference
    normalize: bool = False  # L2-normalise the pooled transformer output before the head
    num_layers: int = 0  # the transformer's lower layers kept (0: all)


def build_net(cfg: RouterConfig) -> torch.nn.Module:
    nf = n_features(cfg.features)
    if cfg.backbone == "embedding":
        return EmbeddingRouter(cfg.dim, cfg.hidden, n_features=nf)
    return TransformerRouter(
        cfg.backbone, n_features=nf, normalize=cfg.normalize, num_layers=cfg.num_layers
    )


def onnx_pooled(net: TransformerRouter, tokenizer: object, max_length: int) -> object:
    """The router's fine-tuned encoder exported to ONNX Runtime (same scores, ~2× faster for
    one query on 2 cores); cached by a hash of its weights."""
    from r2adapter.config import settings
    from r2adapter.index.onnx_encoder import OnnxPooled, weights_key

    return OnnxPooled(
        net.encoder,
        tokenizer,
        "router",
        weights_key(net.encoder),
        settings().root / ".cache" / "onnx",
        torch.get_num_threads(),
        max_length,
        normalize=net.normalize,
    )


class TrainedRouter(Router):
    def __init__(self, cfg: RouterConfig, net: torch.nn.Module) -> None:
        self.cfg = cfg
        self.name = router_kind(cfg.backbone)
        self.tau = cfg.tau
        self.epsilon = cfg.epsilon
        self.net = net.eval()
        self._tokenizer = None
        self._lock = threading.Lock()
        self._evidence: DenseEvidence | None = None
        self._graphs: GraphSource | None = None
        self._onnx = None
        self.runtime = "torch"
        if cfg.backbone != "embedding":
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(backbone_path(cfg.backbone))
            if cfg.runtime == "onnx" and not next(net.parameters()).is_cuda:
                try:
                    self._onnx = onnx_pooled(net, self._tokenizer, cfg.max_length)  # type: ignore[arg-type]
                    head: Any = net.head
                    self._head = (
                        head.weight.detach().double().numpy(),
                        head.bias.detach().double().numpy(),
                    )
                    self.runtime = "onnx"
                except Exception as e:  # no onnxruntime, an export the model refuses
                    log.warning("router stays on torch: %s", str(e).splitlines()[0])

    @property
    def uses_embedding(self) -> bool:
        """Whether scoring reads the retrieval query embedding (pass it as `qvecs`)."""
        return self.cfg.backbone == "embedding" or bool(self.cfg.features)

    def bind(self, dataset: str, graphs: GraphSource | None = None) -> TrainedRouter:
        """Read the dense-evidence features from this corpus's index, which `graphs` holds
        (the retrievers' graph cache; without it, the one of the last bind)."""
        self._graphs = graphs or self._graphs
        if self.cfg.features:
            if self._graphs is None:
                raise R2AError(
                    "this router reads corpus features: bind it with the graph cache that "
                    "holds the corpus"
                )
            self._evidence = DenseEvidence(dataset, self._graphs, self.cfg.features)
        return self

    def calibrate(
        self, questions: Sequence[str], usage: float, qvecs: np.ndarray | None = None
    ) -> float:
        """Set τ so that at most `usage` of these questions go to graph, and return it.

        Label-free: for a corpus without labels (one the router was not trained on), whose
        score distribution differs from the validation split's, the graph budget is met on
        the corpus's own questions instead of carried over from validation as τ*."""
        if not questions:
            raise R2AError("no questions to calibrate the router's threshold on")
        if not 0.0 <= usage <= 1.0:
            raise R2AError(f"graph usage must be in [0, 1], not {usage}")
        p_dense, p_graph = self.score(questions, qvecs)
        margins = np.sort(p_graph - p_dense)[::-1]
        k = int(np.floor(usage * len(margins) + 1e-9))  # questions allowed to graph
        # τ halfway between the k-th margin (the last sent) and the next (the first kept): a
        # question scored again later (another batch, one at a time, ONNX) moves by ~1e-7,
        # and at τ = margins[k] exactly that was enough to send one question too many
        if k >= len(margins):
            self.tau = float(margins[-1]) - 1e-6
        elif k == 0:
            self.tau = float(margins[0]) + 1e-6
        else:
            self.tau = float(margins[k - 1] + margins[k]) / 2
        return self.tau

    def features(self, queries: Sequence[str], qvecs: np.ndarray) -> torch.Tensor | None:
        if not self.cfg.features:
            return None
        if self._evidence is None:
            raise R2AError("this router reads corpus features: bind it to a dataset")
        return torch.from_numpy(self._evidence(queries, qvecs))

    @torch.inference_mode()
    def score(
        self, queries: Sequence[str], qvecs: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """p_dense, p_graph. `qvecs`, the retrieval embeddings of the queries, are computed
        here when the router needs them and the caller has none."""
        if not queries:
            return np.zeros(0), np.zeros(0)
        if self.uses_embedding and qvecs is None:
            from r2adapter.index.encoder import get_encoder

            qvecs = get_encoder(self.cfg.encoder).encode(list(queries))
        feats = self.features(queries, qvecs) if qvecs is not None else None
        if self.cfg.backbone == "embedding":
            assert qvecs is not None
            emb = torch.from_numpy(np.asarray(qvecs, dtype=np.float32))
            probs = self.net(emb, feats).numpy()
            return probs[:, 0].astype(np.float64), probs[:, 1].astype(np.float64)
        if self._onnx is not None:  # the head in numpy: no torch thread pool per query
            with self._lock:  # the tokenizer inside is shared across service threads
                pooled = self._onnx.run(list(queries))  # type: ignore[attr-defined]
            x = pooled if feats is None else np.hstack([pooled, feats.numpy()])
            w, b = self._head
            probs = 1.0 / (1.0 + np.exp(-(x.astype(np.float64) @ w.T + b)))
            return probs[:, 0], probs[:, 1]
        assert self._tokenizer is not None
        with self._lock:  # the fast tokenizer is not safe to share across threads either
            batch = self._tokenizer(
                list(queries),
                padding=True,
                truncation=True,
                max_length=self.cfg.max_length,
                return_tensors="pt",
            )
            probs = self.net(batch["input_ids"], batch["attention_mask"], feats).numpy()
        return probs[:, 0].astype(np.float64), probs[:, 1].astype(np.float64)

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(asdict(self.cfg), indent=2))
        torch.save(self.net.state_dict(), folder / "weights.pt")

    @classmethod
    def load(cls, folder: Path) -> TrainedRouter:
        try:
            raw = json.loads((folder / "config.json").read_text())
            known = {f.name for f in fields(RouterConfig)}
            if set(raw) - known:  # a runtime setting of an older version (e.g. quantize)
                log.warning("router %s: ignoring %s", folder, sorted(set(raw) - known))
            raw = {k: v for k, v in raw.items() if k in known}
            cfg = RouterConfig(**{**raw, "features": tuple(raw.get("features", ()))})
            net = build_net(cfg)
            net.load_state_dict(torch.load(folder / "weights.pt", map_location="cpu"))
        except (OSError, json.JSONDecodeError, TypeError, AttributeError, RuntimeError) as e:
            raise R2AError(f"{folder}: not a saved router ({str(e).splitlines()[0]})") from None
        return cls(cfg, net)
