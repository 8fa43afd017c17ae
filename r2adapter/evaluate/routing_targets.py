"""Issue 4's routing targets on one labelled split: `routing_report`'s figures (the same
routers, the same label-free calibration), and what the routing sweep
(r2adapter/evaluate/routing_sweep.py) adds to them: the hybrid Recall@5 vs graph-usage curve of each
champion over τ, the targets' checks (hybrid at least the best single retriever, graph usage
at most half, F1 above the NER-router's, PGR, routing latency) and the curves' plot.

The trained routers come from the caller (`champion`: r2adapter/steps.py `champion_router`
loads them from the registry, a floor above), as in routing_report.py."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from r2adapter.errors import R2AError
from r2adapter.evaluate.routing_report import Champion
from r2adapter.route.kinds import TRAINED_ROUTERS

if TYPE_CHECKING:
    from r2adapter.label.annotate import LabelRecord
    from r2adapter.route.trained import TrainedRouter

TARGETS = {
    "hybrid_within_of_best_single": 0.005,
    "max_graph_usage": 0.5,
    "r2a_p50_ms": 10.0,
    "r2a_embed_p50_ms": 1.0,
}
USAGE_GRID = np.linspace(0.0, 1.0, 21)


def hybrid_curve(margins: np.ndarray, dense: np.ndarray, graph: np.ndarray) -> list[dict]:
    """Hybrid Recall@5 when the queries with the largest margins p_g − p_d go to graph,
    at each usage of the grid (sweeping τ over the margins)."""
    order = np.argsort(-margins, kind="stable")
    out = []
    for u in USAGE_GRID:
        k = int(round(u * len(margins)))
        sel = np.zeros(len(margins), dtype=bool)
        sel[order[:k]] = True
        tau = float(margins[order[k - 1]]) if k else float(margins.max())
        out.append(
            {
                "graph_usage": k / len(margins),
                "recall@5": float(np.where(sel, graph, dense).mean()),
                "tau_at_or_below": tau,
            }
        )
    return out


def load_champions(dataset: str, champion: Champion) -> dict[str, TrainedRouter]:
    """The champions that load, bound to `dataset` (a missing one is the report's note)."""
    from r2adapter.retrieve.graph_index import GRAPHS

    out = {}
    for kind in TRAINED_ROUTERS:
        try:
            router, _ = champion(kind)
            out[kind] = router.bind(dataset, GRAPHS)  # the retrievers' graph cache
        except R2AError:
            continue
    return out


def llm_subset(records: list[LabelRecord], n: int) -> tuple[dict[str, Any] | None, str]:
    """The LLM-router on the first `n` queries with the configured or the local model (the
    local one takes seconds a query): the result and a note."""
    from r2adapter.evaluate.routing import evaluate_routers
    from r2adapter.route.baselines import LLMRouter

    if n <= 0:
        return None, "LLM-router skipped (--llm-queries 0)"
    try:
        from r2adapter.llm import get_llm

        client = get_llm(default_local=True)
        sub = records[:n]
        result = evaluate_routers([LLMRouter(client)], sub, None)["llm"]
        return result, f"LLM-router ({type(client).__name__}) on the first {len(sub)} queries only"
    except R2AError as e:
        return None, f"LLM-router skipped: {e}"


def evaluate_set(
    dataset: str,
    champion: Champion,
    split: str,
    rule: str,
    llm_queries: int,
    calibrate: float | None = None,
) -> dict[str, Any]:
    """Every router on one labelled split: `routing_report`'s figures. With `calibrate`,
    each trained router is also reported as `<name>_budget`: the report's run with τ set so
    that this share of the corpus's questions goes to graph (label-free). Added here: the
    τ-sweep curve of each champion and the targets' checks."""
    from r2adapter.data.metrics import recall_at_k
    from r2adapter.evaluate.routing import recovered_gain
    from r2adapter.evaluate.routing_report import routing_report
    from r2adapter.index.encoder import get_encoder
    from r2adapter.label.annotate import db_labels

    report: dict[str, Any] = routing_report(dataset, champion, split, rule)
    results: dict[str, Any] = dict(report["routers"])
    versions: dict[str, Any] = dict(report["champion_versions"])
    notes: list[str] = list(report["notes"])
    taus: dict[str, dict[str, float]] = {}
    if calibrate is not None:
        cal: dict[str, Any] = routing_report(dataset, champion, split, rule, calibrate)
        taus = cal["calibration"]["taus"]
        for name in taus:
            results[f"{name}_budget"] = cal["routers"][name]
        notes += [n for n in cal["notes"] if n not in notes]
    records = db_labels(dataset, rule, split)
    if "llm" not in results:  # no endpoint configured: the local model, on a few queries
        llm, note = llm_subset(records, llm_queries)
        notes.append(note)
        if llm is not None:
            results["llm"] = llm
    questions = [r.question for r in records]
    emb = get_encoder().encode(questions)
    dense = np.array([recall_at_k(r.dense_top, r.gold, 5) for r in records])
    graph = np.array([recall_at_k(r.graph_top, r.gold, 5) for r in records])
    curves = {}
    for name, router in load_champions(dataset, champion).items():
        if name in versions:
            p_d, p_g = router.score(questions, emb)
            curves[name] = hybrid_curve(np.asarray(p_g) - np.asarray(p_d), dense, graph)
    best_single = max(results["always_dense"]["recall@5"], results["always_graph"]["recall@5"])
    checks = {}
    for name in [n for v in versions for n in (v, f"{v}_budget") if n in results]:
        r = results[name]
        base = name.removesuffix("_budget")
        checks[name] = {
            "hybrid_recall@5": r["recall@5"],
            "best_single_recall@5": best_single,
            "hybrid_at_least_best_single": r["recall@5"]
            >= best_single - TARGETS["hybrid_within_of_best_single"],
            "graph_usage": r["graph_usage"],
            "graph_usage_at_most_half": r["graph_usage"] <= TARGETS["max_graph_usage"],
            "beats_ner_f1": r["f1_graph"] > results["ner"]["f1_graph"],
            "pgr": recovered_gain(results, name),
            # the best the router's ranking reaches inside the graph budget, τ free
            "best_recall@5_within_budget": max(
                p["recall@5"]
                for p in curves[base]
                if p["graph_usage"] <= TARGETS["max_graph_usage"] + 1e-9
            )
            if base in curves
            else None,
        }
    return {
        "dataset": dataset,
        "split": split,
        "rule": rule,
        "n_queries": len(records),
        "held_out": False,
        "routers": results,
        "curves": curves,
        "checks": checks,
        "calibration": {"usage": calibrate, "taus": taus} if calibrate is not None else None,
        "champion_versions": versions,
        "notes": notes,
    }


def latency_checks(lat: dict[str, Any]) -> dict[str, Any]:
    """The latency targets, for the routers that were timed (`lat`: p50 ms per router, one
    query at a time; `ner` always, `r2a` with `r2a_torch`, `r2a_embed_head` when timed)."""
    ner = lat["ner"]["p50_ms"]
    out: dict[str, Any] = {}
    if "r2a" in lat:
        out["r2a_p50_ms"] = lat["r2a"]["p50_ms"]
        out["r2a_within_target"] = lat["r2a"]["p50_ms"] <= TARGETS["r2a_p50_ms"]
        out["r2a_torch_within_target"] = lat["r2a_torch"]["p50_ms"] <= TARGETS["r2a_p50_ms"]
        out["r2a_faster_than_ner"] = lat["r2a"]["p50_ms"] < ner
        out["r2a_torch_faster_than_ner"] = lat["r2a_torch"]["p50_ms"] < ner
    if "r2a_embed_head" in lat:
        head = lat["r2a_embed_head"]["p50_ms"]
        out["r2a_embed_head_within_target"] = head <= TARGETS["r2a_embed_p50_ms"]
        out["r2a_embed_faster_than_ner"] = head < ner
    return out


def plot_curves(sets: dict[str, dict[str, Any]], path: Path) -> Path:
    """One panel per set (`evaluate_set`'s result): each champion's τ-sweep curve and every
    router as a point, the graph-usage target as a dashed line; a PNG at `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(sets), figsize=(5.5 * len(sets), 4.2), squeeze=False)
    for ax, (key, s) in zip(axes[0], sets.items(), strict=True):
        for name, curve in s["curves"].items():
            ax.plot(
                [p["graph_usage"] for p in curve],
                [p["recall@5"] for p in curve],
                marker=".",
                label=f"{name} (τ sweep)",
            )
        for name, r in s["routers"].items():
            ax.scatter(r["graph_usage"], r["recall@5"], s=40, zorder=3)
            if r["n"] != s["n_queries"]:
                name = f"{name} (first {r['n']})"
            ax.annotate(
                name,
                (r["graph_usage"], r["recall@5"]),
                fontsize=8,
                xytext=(4, -10),
                textcoords="offset points",
            )
        ax.axvline(TARGETS["max_graph_usage"], color="0.7", ls="--", lw=0.8)
        ax.set_title(f"{key} ({s['n_queries']} queries)")
        ax.set_xlabel("share of queries sent to graph")
        ax.set_ylabel("hybrid Recall@5")
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
