"""`r2a evaluate corpora`: one evaluation over every corpus (issue 24).

For each corpus (every shipped one with strategy labels, or those named; a dataset folder
works too): every fixed strategy (`always_<strategy>`, from its strategy labels), the k-way
router left-one-corpus-out at both operating points (`kway_loco` the quality point,
`kway_served_loco` the served one; trained on the other labelled corpora, transferred
label-free: r2adapter/reports/loco.py) and the per-query oracle, each paired against the
corpus's best fixed strategy at no more passages (95% bootstrap intervals on the same
queries). Saved as reports/corpora/all.{json,png}, a table on stdout.

A corpus whose questions carry no gold gets one line and cost figures only: each base
retriever timed on its questions (no recall can be computed).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from r2adapter.config import settings
from r2adapter.errors import R2AError

COST_QUERIES = 50  # questions timed per retriever on a corpus without gold


def corpora_to_evaluate(names: Sequence[str] | None = None) -> list[str]:
    from r2adapter.data.adapters import SHIPPED_DATASETS
    from r2adapter.kway.labels import strategy_label_path

    if names:
        return list(names)
    return [c for c in SHIPPED_DATASETS if strategy_label_path(c).is_file()]


def _row(r: dict[str, Any]) -> dict[str, Any]:
    keep = (
        "recall", "fcr", "mean_passages", "mean_tokens", "mean_prompt_tokens", "mean_ms",
        "mean_cost", "share", "by_type",
    )  # fmt: skip
    return {k: r[k] for k in keep if k in r}


def corpus_figures(dataset: str, budget: float | None = None) -> dict[str, Any]:
    """One corpus: every strategy and router, paired against its best fixed strategy."""
    from r2adapter.evaluate.routing_report import oracle_choice, with_two_way
    from r2adapter.evaluate.stats import paired_bootstrap
    from r2adapter.kway.labels import outcome_matrix, read_strategy_labels, strategy_label_path
    from r2adapter.reports.loco import loco_report

    if not strategy_label_path(dataset).is_file():
        return no_gold_costs(dataset)
    try:
        rep = loco_report(dataset, budget)
    except R2AError as e:
        rep = {"routers": {}, "notes": [f"kway: {e}"]}
    from r2adapter.config import kway_params
    from r2adapter.kway.strategies import strategy_table

    names = with_two_way(kway_params().strategies)
    table = strategy_table(names)
    labels = read_strategy_labels(dataset, kway_params(strategies=tuple(names)))
    m = outcome_matrix(labels, table)
    rec, cost = m["recall"], m["cost"]
    # the best fixed strategy at five passages or fewer (what every router hands at most)
    five = [j for j, s in enumerate(table) if m["passages"][:, j].mean() <= 5.0 + 1e-9]
    best = max(five, key=lambda j: (rec[:, j].mean(), -cost[:, j].mean()))
    rows: dict[str, Any] = {}
    for j, s in enumerate(table):
        rows[f"always_{s.name}"] = {
            "recall": float(rec[:, j].mean()),
            "fcr": float(m["full"][:, j].mean()),
            "mean_passages": float(m["passages"][:, j].mean()),
            "mean_ms": float(m["ms"][:, j].mean()),
            "mean_cost": float(cost[:, j].mean()),
            "vs_best": paired_bootstrap(rec[:, j], rec[:, best]),
        }
    oracle = oracle_choice(m, table, range(len(table)))
    idx = np.arange(len(labels))
    rows["oracle"] = {
        "recall": float(rec[idx, oracle].mean()),
        "mean_ms": float(m["ms"][idx, oracle].mean()),
        "mean_cost": float(cost[idx, oracle].mean()),
        "mean_passages": float(m["passages"][idx, oracle].mean()),
        "vs_best": paired_bootstrap(rec[idx, oracle], rec[:, best]),
    }
    for row in ("kway", "kway_served"):  # the quality point, the served point (loco.py)
        k = rep.get("routers", {}).get(row)
        if k is not None:
            bf = rep.get("paired", {}).get("best_fixed" + row[4:], {})
            rows[f"{row}_loco"] = {
                **_row(k),
                "vs_best": bf.get("paired"),
                "vs": bf.get("strategy"),
                "cost_ratio": bf.get("cost_ratio"),
            }
    return {
        "dataset": dataset,
        "n_queries": len(labels),
        "cost_unit": rep.get("cost_unit"),
        "best_fixed": table[best].name,
        "rows": rows,
        "trained_on": rep.get("trained_on"),
        "notes": rep.get("notes", []),
    }


def no_gold_costs(dataset: str, n: int = COST_QUERIES) -> dict[str, Any]:
    """Cost figures only: each base retriever's mean ms on up to `n` of the questions."""
    from r2adapter.config import kway_params
    from r2adapter.index.encoder import get_encoder
    from r2adapter.kway.strategies import base_retrievers, split_rewritten, strategy_table
    from r2adapter.retrieve.strategies import make_retriever
    from r2adapter.store.queries import stored_queries

    queries = stored_queries(dataset)[:n]
    line = f"{dataset}: no gold (or no labels: `r2a label --dataset {dataset}`): cost figures only"
    if not queries:
        return {"dataset": dataset, "note": line, "costs_ms": {}}
    enc = get_encoder()
    out: dict[str, float] = {}
    for r in base_retrievers(strategy_table(kway_params().strategies)):
        base, rewritten = split_rewritten(r)
        if rewritten:
            continue  # the rewrite's cost is its own figure (r2a evaluate retrieval)
        ret = make_retriever(base, dataset, enc)
        ret.retrieve(queries[0].question, 5)
        ms = []
        for q in queries:
            t = time.perf_counter()
            ret.retrieve(q.question, 20, qvec=enc.encode_query(q.question))
            ms.append((time.perf_counter() - t) * 1000)
        out[r] = float(np.mean(ms))
    return {"dataset": dataset, "note": line, "n_timed": len(queries), "costs_ms": out}


def evaluate_corpora(
    names: Sequence[str] | None = None, budget: float | None = None
) -> dict[str, Any]:
    corpora = corpora_to_evaluate(names)
    if not corpora:
        raise R2AError("no corpus has strategy labels: run `r2a label --dataset D` first")
    report: dict[str, Any] = {"corpora": {c: corpus_figures(c, budget) for c in corpora}}
    root = settings().root / "reports" / "corpora"
    root.mkdir(parents=True, exist_ok=True)
    (root / "all.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    plot_corpora(report, root / "all.png")
    report["saved"] = {
        "json": "reports/corpora/all.json",
        "plot": "reports/corpora/all.png",
    }
    return report


def plot_corpora(report: dict[str, Any], path: Any) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scored = {c: f for c, f in report["corpora"].items() if f.get("rows")}
    if not scored:
        return
    fig, axes = plt.subplots(1, len(scored), figsize=(5 * len(scored), 4.4), squeeze=False)
    for ax, (c, f) in zip(axes[0], scored.items(), strict=True):
        for name, r in f["rows"].items():
            fixed = name.startswith("always_")
            if r.get("mean_passages", 5) > 5.0 + 1e-9:
                continue
            x = r.get("mean_cost", r["mean_ms"])
            ax.scatter(
                x,
                r["recall"],
                marker="o" if fixed else "*",
                s=25 if fixed else 120,
                color="0.55" if fixed else None,
            )
            ax.annotate(
                name.removeprefix("always_"),
                (x, r["recall"]),
                fontsize=6 if fixed else 8,
                xytext=(3, 2),
                textcoords="offset points",
            )
        unit = f.get("cost_unit") or "mean ms"
        ax.set(title=f"{c} ({f['n_queries']} q)", xlabel=f"mean cost ({unit})", ylabel="recall")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table_lines(report: dict[str, Any]) -> list[str]:
    out = []
    for c, f in report["corpora"].items():
        if not f.get("rows"):
            out.append(f.get("note", f"{c}: nothing to report"))
            if f.get("costs_ms"):
                out.append("  " + ", ".join(f"{k} {v:.1f} ms" for k, v in f["costs_ms"].items()))
            continue
        out.append(f"{c}: {f['n_queries']} queries; best fixed (≤ 5 passages) {f['best_fixed']}")
        for name, r in f["rows"].items():
            vs = r.get("vs_best")
            iv = f"{vs['diff']:+.3f} [{vs['ci95'][0]:+.3f}, {vs['ci95'][1]:+.3f}]" if vs else ""
            out.append(
                f"  {name:<20} recall {r['recall']:.3f}  ms {r['mean_ms']:6.1f}  cost "
                f"{r.get('mean_cost', float('nan')):7.2f}  passages "
                f"{r.get('mean_passages', float('nan')):.2f}  vs best {iv}"
            )
        out.extend(f"  note: {n}" for n in f.get("notes", []))
    return out
