"""The sentence encoder's transformer run by ONNX Runtime: the same embeddings (max
difference about 1e-7, so an index built either way serves either way) at about a third of
PyTorch's time for one short query on 2 CPU cores (`benchmarks/bench_dense.py`).

The model is exported once, from the loaded sentence-transformers model, into
`<root>/.cache/onnx/`, and reused; a failed export or a missing onnxruntime leaves the
PyTorch path in charge (the encoder logs why).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

OPSET = 17


class _Pooled:  # built lazily: torch.nn is imported only when exporting
    @staticmethod
    def module(transformer: Any) -> Any:
        import torch

        class Pooled(torch.nn.Module):
            """Transformer → masked mean pooling → L2 normalisation (all-MiniLM's head)."""

            def __init__(self) -> None:
                super().__init__()
                self.t = transformer

            def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
                h = self.t(input_ids=ids, attention_mask=mask).last_hidden_state
                m = mask.unsqueeze(-1).to(h.dtype)
                v = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
                return torch.nn.functional.normalize(v, dim=1)

        return Pooled().eval()


def cache_path(model_dir: str, cache_dir: Path) -> Path:
    """One file per model folder and weights (their size and mtime) and opset."""
    h = hashlib.sha256(f"{Path(model_dir).resolve()}|{OPSET}".encode())
    for f in sorted(Path(model_dir).glob("*.safetensors")) + sorted(Path(model_dir).glob("*.bin")):
        st = f.stat()
        h.update(f"{f.name}:{st.st_size}:{int(st.st_mtime)}".encode())
    return cache_dir / f"{Path(model_dir).name}-{h.hexdigest()[:12]}.onnx"


def export(st_model: Any, path: Path) -> Path:
    """Export the pooled transformer of a SentenceTransformer; atomic (tmp file + rename)."""
    import torch

    net = _Pooled.module(st_model[0].auto_model)
    batch = st_model.tokenizer(["an example query"], return_tensors="pt")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".onnx", dir=path.parent)
    os.close(fd)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer notices about the attention mask code
        torch.onnx.export(
            net,
            (batch["input_ids"], batch["attention_mask"]),
            tmp,
            input_names=["ids", "mask"],
            output_names=["emb"],
            dynamic_axes={"ids": {0: "b", 1: "s"}, "mask": {0: "b", 1: "s"}, "emb": {0: "b"}},
            opset_version=OPSET,
            dynamo=False,
        )
    os.replace(tmp, path)
    return path


class OnnxPooledEncoder:
    """`run(texts)` → normalised float32 embeddings, tokenised by the model's own tokenizer."""

    def __init__(self, st_model: Any, model_dir: str, cache_dir: Path, threads: int) -> None:
        import onnxruntime as ort

        path = cache_path(model_dir, cache_dir)
        if not path.is_file():
            export(st_model, path)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self.tokenizer = st_model.tokenizer
        self.max_length = int(st_model.max_seq_length)
        self.path = path

    def run(self, texts: list[str]) -> np.ndarray:
        b = self.tokenizer(
            texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="np"
        )
        feeds = {
            "ids": b["input_ids"].astype(np.int64),
            "mask": b["attention_mask"].astype(np.int64),
        }
        return np.asarray(self.session.run(None, feeds)[0], dtype=np.float32)
