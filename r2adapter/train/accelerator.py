"""Which torch build this process runs (the CPU wheel or a CUDA one) and whether a GPU is
visible, for the two places that must not guess: the image build (`python -m
r2adapter.train.accelerator --expect cpu|cuda`, the Dockerfile's per-variant check, so
`make image` cannot ship a CUDA torch and `make image-cuda` cannot ship a CPU one) and the
pipeline's GPU trainer (R2A_ACCELERATOR=gpu, set by pipelines/retrain.py: a CUDA image on a
node without a GPU would otherwise train on the CPU while it holds the GPU request)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from r2adapter.errors import R2AError

VARIANTS = ("cpu", "cuda")
ENV = "R2A_ACCELERATOR"  # "gpu": this task was scheduled for a GPU and must train on one


def torch_build() -> tuple[str, str | None]:
    """("cpu" | "cuda", the CUDA version torch was built with)."""
    import torch

    cuda = torch.version.cuda
    return ("cuda" if cuda else "cpu"), cuda


def check_build(expect: str) -> str:
    """One line naming torch's build when it is `expect`'s; an R2AError saying which
    otherwise."""
    import torch

    if expect not in VARIANTS:
        raise R2AError(f"unknown torch variant {expect!r}: choose one of {', '.join(VARIANTS)}")
    variant, cuda = torch_build()
    if variant != expect:
        source = "CUDA wheelhouse (make image-cuda)" if expect == "cuda" else "CPU wheelhouse"
        raise R2AError(
            f"torch {torch.__version__} is the {variant} build, not the {expect} one: the"
            f" {source} was not what the image installed"
        )
    return f"torch {torch.__version__} ({variant}{', CUDA ' + cuda if cuda else ''})"


def require_gpu() -> str | None:
    """When R2A_ACCELERATOR=gpu, a usable CUDA device or an R2AError saying which is missing:
    the CUDA build (a CPU image on the GPU node) or the GPU (a CUDA image on a node without
    one). Returns the device's name then, None when no GPU was asked for."""
    if os.environ.get(ENV, "").lower() != "gpu":
        return None
    import torch

    variant, _ = torch_build()
    if variant != "cuda":
        raise R2AError(
            f"{ENV}=gpu but torch {torch.__version__} is the CPU build: run this task in the"
            " CUDA image (make image-cuda, r2adapter-cuda:<version>)"
        )
    if not torch.cuda.is_available():
        raise R2AError(
            f"{ENV}=gpu and this is the CUDA image (torch {torch.__version__}), but no GPU is"
            " visible on this node: schedule the task on a GPU node (nvidia.com/gpu request,"
            " NVIDIA device plugin)"
        )
    return str(torch.cuda.get_device_name(0))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m r2adapter.train.accelerator",
        description="check torch's build (an image's variant); with R2A_ACCELERATOR=gpu, the GPU",
    )
    ap.add_argument("--expect", choices=VARIANTS, help="the build the image must hold")
    args = ap.parse_args(argv)
    try:
        if args.expect:
            print(check_build(args.expect))
        gpu = require_gpu()
        if gpu:
            print(f"GPU: {gpu}")
    except R2AError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
