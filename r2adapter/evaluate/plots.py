"""Plots people compare: the threshold-search curve, the validation PR curve and the
routing plane (every router's Recall@5 against its graph usage)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

if TYPE_CHECKING:  # only a type here: drawing the routing plane needs no Lightning
    from r2adapter.route.threshold import SearchHistory


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


def plot_routing(routing: Mapping[str, Any], path: Path) -> Path:
    """`r2a evaluate routing`'s report: each router at (graph usage, Recall@5). Graph
    retrieval is the expensive route, so up and to the left is better; the fixed baselines
    and the oracle are grey, the routers that decide per query coloured."""
    fig, ax = plt.subplots(figsize=(6, 4.4))
    for name, r in routing["routers"].items():
        fixed = name.startswith("always_") or name == "oracle"
        ax.scatter(
            r["graph_usage"],
            r["recall@5"],
            marker="o" if fixed else "*",
            s=30 if fixed else 130,
            color="0.55" if fixed else None,
        )
        ax.annotate(
            name,
            (r["graph_usage"], r["recall@5"]),
            fontsize=8,
            xytext=(4, 3),
            textcoords="offset points",
        )
    ax.set(
        xlabel="graph usage (share of queries routed to graph retrieval)",
        ylabel="Recall@5",
        xlim=(-0.05, 1.1),
        title=f"Routing: {routing['dataset']}, {routing['split']} split "
        f"({routing['n_queries']} queries)",
    )
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
