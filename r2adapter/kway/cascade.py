"""The k-way decision: a cascade ordered by cost, and its thresholds' search.

Heads give each query a suitability p_s for every strategy s. The cascade walks the
strategies from the cheapest (by mean ms on the training labels) and takes the first whose
head clears its threshold τ_s; when none does, no head is confident and the query gets the
best single strategy (highest mean recall within the passage budget), not the cheapest:
ADR's conservative fallback. Thresholds start at γ (`kway.confidence`, 0.75).

The search generalises Algorithm 2 of R²Adapter to the cascade: on the validation queries,
coordinate ascent over the τ grid, strategy by strategy in cost order, maximising recall of
the delivered passages subject to the budget (mean ms ≤ the cap, mean passages ≤
`max_passages`); it runs periodically during training and the best (state, τ) is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from r2adapter.config import KwayParams


@dataclass(frozen=True)
class Costs:
    """Per-strategy outcomes on labelled queries, (n, S) each."""

    recall: np.ndarray
    ms: np.ndarray
    passages: np.ndarray


def cost_cap(mean_ms: np.ndarray, budget: float) -> float:
    """The mean-ms cap a budget in [0, 1] allows: cheapest + budget × (costliest − cheapest)."""
    lo, hi = float(np.min(mean_ms)), float(np.max(mean_ms))
    return lo + budget * (hi - lo)


def fallback_index(
    mean_recall: np.ndarray,
    mean_passages: np.ndarray,
    max_passages: float,
    mean_ms: np.ndarray | None = None,
    cap_ms: float | None = None,
) -> int:
    """The best single strategy within the passage budget (any, when none fits); given
    `mean_ms` and `cap_ms`, within the cost cap too (the cheapest, when none fits)."""
    fits = mean_passages <= max_passages + 1e-9
    if mean_ms is not None and cap_ms is not None:
        fits &= mean_ms <= cap_ms + 1e-9
        if not fits.any():
            return int(np.argmin(mean_ms))
    pool = np.where(fits)[0] if fits.any() else np.arange(len(mean_recall))
    return int(pool[np.argmax(mean_recall[pool])])


def choose(probs: np.ndarray, tau: np.ndarray, order: np.ndarray, fallback: int) -> np.ndarray:
    """(n,) strategy index per query: the cheapest (in `order`) clearing its τ, else
    `fallback`; -1 never occurs."""
    clears = probs[:, order] >= tau[order][None, :]
    first = np.argmax(clears, axis=1)
    picked = order[first]
    return np.where(clears.any(axis=1), picked, fallback)


def outcome(choice: np.ndarray, c: Costs) -> tuple[float, float, float]:
    """Mean recall, ms and passages of the chosen strategies."""
    rows = np.arange(len(choice))
    return (
        float(c.recall[rows, choice].mean()),
        float(c.ms[rows, choice].mean()),
        float(c.passages[rows, choice].mean()),
    )


def objective(
    choice: np.ndarray, c: Costs, cap_ms: float, max_passages: float, penalty: float = 0.0
) -> tuple[float, bool]:
    """Recall if within budget; else recall minus the relative overshoot (so the search
    walks back into the budget). `penalty` λ > 0 (`kway.cap_penalty`) makes the ms cap
    soft: recall − λ × the relative ms overshoot, with no step at the cap, so a setting
    just over it is not thrown out by a few per cent of timing noise; the passages cap
    stays hard."""
    r, ms, ps = outcome(choice, c)
    over_ms = max(0.0, ms / cap_ms - 1.0)
    over_ps = max(0.0, ps / max_passages - 1.0)
    if penalty > 0.0 and over_ps <= 1e-12:
        return r - penalty * over_ms, over_ms <= 1e-12
    over = over_ms + over_ps
    return (r, True) if over <= 1e-12 else (r - 1.0 - over, False)


def search_thresholds(
    probs: np.ndarray,
    c: Costs,
    order: np.ndarray,
    fallback: int,
    cap_ms: float,
    max_passages: float,
    grid: np.ndarray,
    start: float,
    rounds: int = 3,
    shared: bool = False,
    penalty: float = 0.0,
) -> tuple[np.ndarray, float, bool]:
    """τ per strategy maximising `objective` on these queries; (τ, score, feasible). With
    `shared`, one τ for every head (one degree of freedom, as in Algorithm 2)."""
    s = probs.shape[1]
    tau = np.full(s, float(start))
    best, feasible = objective(
        choose(probs, tau, order, fallback), c, cap_ms, max_passages, penalty
    )
    if shared:
        for t in grid:
            cand = np.full(s, float(t))
            score, ok = objective(
                choose(probs, cand, order, fallback), c, cap_ms, max_passages, penalty
            )
            if score > best + 1e-12:
                best, feasible, tau = score, ok, cand
        return tau, best, feasible
    for _ in range(rounds):
        moved = False
        for j in order:
            keep = tau[j]
            for t in grid:
                if t == keep:
                    continue
                tau[j] = t
                score, ok = objective(
                    choose(probs, tau, order, fallback), c, cap_ms, max_passages, penalty
                )
                if score > best + 1e-12:
                    best, feasible, keep, moved = score, ok, t, True
            tau[j] = keep
        if not moved:
            break
    return tau, best, feasible


def tune_thresholds(
    probs: np.ndarray, c: Costs, order: np.ndarray, fallback: int, cap_ms: float, p: KwayParams
) -> tuple[np.ndarray, float, bool]:
    """`search_thresholds` with params.yaml `kway:`'s grid, start, rounds, passages cap and
    sharing: what training's periodic search and the report's re-tuning both call."""
    grid = np.round(np.arange(p.tau_min, p.tau_max + 1e-9, p.tau_step), 6)
    return search_thresholds(
        probs,
        c,
        order,
        fallback,
        cap_ms,
        p.max_passages,
        grid,
        p.confidence,
        p.search_rounds,
        p.shared_threshold,
        p.cap_penalty,
    )
