"""Each index step's throughput beside its limit on this machine (issue 42): the encoder's
tokens per second against what the machine's fp32 GEMM rate allows at the encoder's FLOPs
a token, OpenIE's passages per second on the one core it runs on.

The encoder's limit: a transformer layer costs 2·(4h² + 2h·i) FLOPs a token in its dense
matrices (the Q, K, V and output projections, the two feed-forward matrices; attention's
own scores, which grow with the sequence, are left out), so MiniLM-L6 (h 384, i 1,536,
6 layers) costs ≈ 21.2 MFLOPs a token, and a machine whose numpy sustains G GFLOPS in
fp32 GEMM embeds at most G·1e9 / 21.2e6 tokens a second. The GEMM rate is measured once
per process (a 1,024² float32 product, the best of five: ≈ 50 ms).
"""

from __future__ import annotations

import time
from functools import cache
from typing import Any

import numpy as np

MINILM_FLOPS_PER_TOKEN = 2 * (4 * 384**2 + 2 * 384 * 1536) * 6  # ≈ 21.2M


@cache
def gemm_gflops(n: int = 1024, repeats: int = 5) -> float:
    """This machine's fp32 GEMM rate through numpy's BLAS (all its threads), in GFLOPS."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    a @ b  # warm the BLAS threads
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best / 1e9


def flops_per_token(model: Any) -> float:
    """Dense-matrix FLOPs a token of a sentence-transformers model (its first module's
    config: layers, hidden and intermediate sizes); MiniLM-L6's when it has none."""
    try:
        cfg = model[0].auto_model.config
        h, i, n = int(cfg.hidden_size), int(cfg.intermediate_size), int(cfg.num_hidden_layers)
    except (AttributeError, TypeError, IndexError, KeyError):
        return float(MINILM_FLOPS_PER_TOKEN)
    return float(2 * (4 * h * h + 2 * h * i) * n)


def step_throughput(
    work: dict[str, dict[str, float]],
    timings: dict[str, float],
    flops_token: float,
    gflops: float,
) -> dict[str, dict[str, float]]:
    """`work[step]` (tokens, texts or passages done by the step) over the step's seconds,
    beside the step's limit: an encoder step's tokens/s against the GEMM rate's, OpenIE's
    passages/s on its one core (its own process's seconds when it ran beside the encoder)."""
    limit = gflops * 1e9 / flops_token
    out: dict[str, dict[str, float]] = {}
    for step, done in work.items():
        seconds = timings.get("openie_process" if step == "openie" else step) or timings.get(step)
        if not seconds or seconds <= 0:
            continue
        row = {k: round(v, 1) for k, v in done.items()}
        if done.get("tokens"):
            rate = done["tokens"] / seconds
            row |= {
                "tokens_per_s": round(rate, 1),
                "limit_tokens_per_s": round(limit, 1),
                "share_of_limit": round(rate / limit, 3),
            }
        if done.get("passages"):
            row["passages_per_s"] = round(done["passages"] / seconds, 2)
            row["cores"] = 1
        out[step] = row
    if out:
        out["machine"] = {
            "gemm_gflops_fp32": round(gflops, 1),
            "encoder_mflops_per_token": round(flops_token / 1e6, 2),
        }
    return out
