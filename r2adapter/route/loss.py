"""Independent focal BCE per output, averaged (R²Adapter eqs. 2–3)."""

from __future__ import annotations

import torch


def focal_bce(
    probs: torch.Tensor,
    targets: torch.Tensor,
    alpha: float = 0.25,
    gamma: float = 2.0,
    eps: float = 1e-7,
) -> torch.Tensor:
    """probs, targets: (batch, 2) for [dense, graph]. L_k = α_t (1 − p_t)^γ BCE(p̂_k, y_k).

    α weights positives and 1 − α negatives (the usual focal-loss α_t); the mean over the
    batch and the two outputs is eq. 3's ½ Σ_k.
    """
    p = probs.clamp(eps, 1 - eps)
    bce = -(targets * torch.log(p) + (1 - targets) * torch.log(1 - p))
    p_t = targets * p + (1 - targets) * (1 - p)
    alpha_t = targets * alpha + (1 - targets) * (1 - alpha)
    return (alpha_t * (1 - p_t) ** gamma * bce).mean()
