"""The quality–cost plane: every router and fixed strategy, recall against mean ms and
against mean passages, with the k-way router's frontier over budgets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_frontier(report: dict[str, Any], path: Path) -> Path:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    routers = report["routers"]
    for ax, axis, label in zip(
        axes,
        ("mean_ms", "mean_passages"),
        ("mean ms (routing + retrieval)", "mean passages"),
        strict=True,
    ):
        for name, r in routers.items():
            fixed = name.startswith("always_")
            ax.scatter(
                r[axis],
                r["recall"],
                marker="o" if fixed else "*",
                s=25 if fixed else 110,
                color="0.55" if fixed else None,
                zorder=3 if not fixed else 2,
            )
            ax.annotate(
                name.removeprefix("always_"),
                (r[axis], r["recall"]),
                fontsize=6 if fixed else 8,
                xytext=(3, 2),
                textcoords="offset points",
            )
        if report.get("frontier"):
            pts = sorted((f[axis], f["recall"]) for f in report["frontier"])
            ax.plot(*zip(*pts, strict=True), color="C3", lw=1, ls="--", label="kway over budgets")
            ax.legend(fontsize=8)
        ax.set(xlabel=label, ylabel="gold recall of the delivered passages")
        ax.grid(alpha=0.3)
    fig.suptitle(
        f"{report['dataset']}, protocol {report['protocol']}, {report['n_queries']} queries"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
