"""Plots people compare: the threshold-search curve and the validation PR curve."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from r2adapter.train.callbacks import SearchHistory  # noqa: E402


def plot_threshold_search(history: SearchHistory, path: Path) -> Path:
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    best = next((p for p in history.points if p.step == history.best_step), None)
    for p in history.points:
        a.plot(p.search.taus, p.search.scores, color="0.8", lw=0.8)
    if best is not None:
        s = best.search
        a.plot(s.taus, s.scores, color="C0", lw=2, label=f"Score(τ), step {best.step}")
        a.plot(s.taus, s.f1, color="C1", ls="--", label="F1 (graph)")
        a.plot(s.taus, s.recall, color="C2", ls=":", label="Recall (graph)")
        a.axvline(history.best_tau, color="k", lw=0.8)
    a.set(xlabel="τ", ylabel="validation", title=f"Threshold search: τ* = {history.best_tau:.2f}")
    a.legend(fontsize=8)
    steps = [p.step for p in history.points]
    b.plot(steps, [p.search.best_score for p in history.points], marker="o")
    b.set(xlabel="training step", ylabel="best Score(τ)", title="Periodic search (every N_eval)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_pr(history: SearchHistory, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(5, 4))
    best = next((p for p in history.points if p.step == history.best_step), None)
    if best is not None:
        precision, recall = best.val_pr
        order = recall.argsort()
        ax.plot(recall[order], precision[order], marker=".")
    ax.set(
        xlabel="recall (graph)",
        ylabel="precision (graph)",
        xlim=(0, 1.02),
        ylim=(0, 1.02),
        title="Validation PR curve, best step",
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
