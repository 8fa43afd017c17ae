"""Routing benchmark (issue 4's targets): every router under one protocol, in one run.

The figures are `r2a evaluate routing`'s (r2adapter/evaluate/routing_report.py: the same
routers, the same calibration, a champion that fails to load left out with a note); this
script adds what a benchmark adds: the τ-sweep curves, the targets' checks, timing repeats
one query at a time, the plot and the MLflow run.

For the training corpus's test split and for each held-out dataset (one the routers never
saw; all its labelled queries), with the labels of the configured rule:
  - always-dense, always-graph, NER-router (graph iff ≥ 2 spaCy entities), oracle (from
    the labels), the champions `r2a` (fine-tuned MiniLM) and `r2a_embed` (head over the
    retrieval embedding), and the LLM-router through the configured LLM (the local
    SmolLM2 when no endpoint is set);
  - graph-class precision/recall/F1, graph usage, hybrid Recall@2/@5, PGR =
    (hybrid − best single) / (oracle − best single), from both retrievers' stored rankings;
  - on held-out sets also `r2a_budget` and `r2a_embed_budget`: the same champions with τ
    calibrated, without labels, so that 50% of the corpus's questions go to graph (the
    validation τ* does not carry over: the score distribution moves between corpora);
  - the hybrid Recall@5 vs graph usage curve of each trained router over τ (plotted with
    the baselines as points, PNG next to the JSON, and logged to MLflow);
  - the LLM-router: the report's, on every query, when an endpoint is configured; else
    the local SmolLM2 on the first --llm-queries queries of each set only (seconds each);
  - routing latency, one query at a time as the service routes: the fine-tuned router in
    its served runtime (ONNX Runtime) and on torch (with decision agreement), the
    embedding head (also with the query encoding included), the NER-router. The routers
    are given the query's retrieval embedding, which both retrievers compute anyway.

A held-out dataset must be indexed and labelled first (`make run` does only the training
corpus): `r2a index --dataset musique --openie spacy && r2a label --dataset musique`.

    .venv/bin/python benchmarks/bench_routing.py                      # 2Wiki test + musique
    .venv/bin/python benchmarks/bench_routing.py --heldout hotpotqa   # another held-out set
    .venv/bin/python benchmarks/bench_routing.py --quick --llm-queries 0   # smoke run
      (--quick: 20 latency queries; the figures are still on every labelled query)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

if not __package__:  # `python benchmarks/bench_routing.py`: put the repository root on path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (  # noqa: E402
    RESULTS,
    die,
    loadavg,
    machine_info,
    require_db,
    save_json,
    summary_ms,
    timestamp,
)

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


def routing_latency(router: Any, questions: list[str], reps: int) -> list[float]:
    router.route(questions[:1])  # warm-up
    ms = []
    for q in questions[:reps]:
        t0 = time.perf_counter()
        router.route([q])
        ms.append((time.perf_counter() - t0) * 1000)
    return ms


def latency_block(questions: list[str], reps: int, dataset: str) -> dict[str, Any]:
    """Routing latency of each router, one query at a time, interleaved per query.

    The routers get the query's retrieval embedding, which both retrievers compute anyway;
    everything else they do (their own encoder, the dense-evidence features) is timed. A
    router without a champion is left out, as the report leaves it out.
    """
    import torch

    from r2adapter.index.encoder import get_encoder
    from r2adapter.retrieve.graph_index import GRAPHS
    from r2adapter.route.baselines import NERRouter
    from r2adapter.route.trained import RouterConfig, TrainedRouter

    champions = load_champions(dataset)
    qs = questions[:reps]
    enc = get_encoder()
    vecs = enc.encode(qs)
    calls: dict[str, Any] = {}
    out: dict[str, Any] = {}
    r2a, emb = champions.get("r2a"), champions.get("r2a_embed")
    if r2a is not None:
        # the same weights on torch, for comparison
        f32 = TrainedRouter(RouterConfig(**{**r2a.cfg.__dict__, "runtime": "torch"}), r2a.net)
        f32.bind(dataset, GRAPHS)
        calls["r2a"] = lambda i: r2a.score([qs[i]], vecs[i : i + 1])  # as served (r2a_runtime)
        calls["r2a_torch"] = lambda i: f32.score([qs[i]], vecs[i : i + 1])
    if emb is not None:
        enc = get_encoder(emb.cfg.encoder)
        calls["r2a_embed_head"] = lambda i: emb.score([qs[i]], vecs[i : i + 1])
        calls["r2a_embed_with_encoding"] = lambda i: emb.score([qs[i]], enc.encode([qs[i]]))
    ner = NERRouter()
    calls["query_encoding"] = lambda i: enc.encode([qs[i]])
    calls["ner"] = lambda i: ner.route([qs[i]])
    for fn in calls.values():  # warm-up (lazy loads, first-call allocations)
        fn(0)
    ms: dict[str, list[float]] = {k: [] for k in calls}
    names = list(calls)
    for i in range(len(qs)):
        k = i % len(names)
        for name in names[k:] + names[:k]:  # rotate who goes first
            t0 = time.perf_counter()
            calls[name](i)
            ms[name].append((time.perf_counter() - t0) * 1000)
    out.update({k: summary_ms(v) for k, v in ms.items()})
    if r2a is not None:
        out["r2a_runtime"] = r2a.runtime
        out["r2a_torch_decision_agreement"] = float(np.mean(r2a.route(qs) == f32.route(qs)))
    out["torch_threads"] = torch.get_num_threads()
    out["queries"] = len(qs)
    return out


def load_champions(dataset: str) -> dict[str, Any]:
    """The champions that load, bound to `dataset` (a missing one is the report's note)."""
    from r2adapter.errors import R2AError
    from r2adapter.loop import ROUTERS
    from r2adapter.registry.models import load_router
    from r2adapter.retrieve.graph_index import GRAPHS

    out = {}
    for kind in (r.name for r in ROUTERS):
        try:
            router, _ = load_router(kind, "champion")
            out[kind] = router.bind(dataset, GRAPHS)  # the retrievers' graph cache
        except R2AError:
            continue
    return out


def llm_subset(records: list[Any], n: int) -> tuple[dict[str, Any] | None, str]:
    """The LLM-router on the first `n` queries with the configured or the local model (the
    local one takes seconds a query): the result and a note."""
    from r2adapter.errors import R2AError
    from r2adapter.evaluate.routing import evaluate_routers
    from r2adapter.route.baselines import LLMRouter

    if n <= 0:
        return None, "LLM-router skipped (--llm-queries 0)"
    try:
        from r2adapter.llm.base import get_llm

        client = get_llm(default_local=True)
        sub = records[:n]
        result = evaluate_routers([LLMRouter(client)], sub, None)["llm"]
        return result, f"LLM-router ({type(client).__name__}) on the first {len(sub)} queries only"
    except R2AError as e:
        return None, f"LLM-router skipped: {e}"


def evaluate_set(
    dataset: str,
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
    from r2adapter.steps import champion_router

    report = routing_report(dataset, champion_router, split, rule)
    results: dict[str, Any] = dict(report["routers"])  # type: ignore[call-overload]
    versions: dict[str, Any] = dict(report["champion_versions"])  # type: ignore[call-overload]
    notes: list[str] = list(report["notes"])  # type: ignore[call-overload]
    taus: dict[str, dict[str, float]] = {}
    if calibrate is not None:
        cal = routing_report(dataset, champion_router, split, rule, calibrate)
        taus = cal["calibration"]["taus"]  # type: ignore[index]
        for name in taus:
            results[f"{name}_budget"] = cal["routers"][name]  # type: ignore[index]
        notes += [n for n in cal["notes"] if n not in notes]  # type: ignore[attr-defined]
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
    for name, router in load_champions(dataset).items():
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


def plot_curves(sets: dict[str, dict[str, Any]], path: Path) -> Path:
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


def log_mlflow(payload: dict[str, Any], png: Path, out: Path) -> str | None:
    import mlflow

    from r2adapter.registry.tracking import mlflow_setup

    mlflow_setup()
    mlflow.set_experiment("r2a-benchmarks")
    with mlflow.start_run(run_name="bench_routing") as run:
        for key, s in payload["sets"].items():
            for name, r in s["routers"].items():
                for m in ("recall@5", "graph_usage", "f1_graph", "latency_ms_p50"):
                    mlflow.log_metric(f"{key}.{name}.{m.replace('@', '_at_')}", float(r[m]))
        for name, v in payload["latency"].items():
            if isinstance(v, dict):
                mlflow.log_metric(f"latency.{name}.p50_ms", v["p50_ms"])
        mlflow.log_artifact(str(png))
        mlflow.log_artifact(str(out))
        return str(run.info.run_id)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def table(key: str, s: dict[str, Any]) -> str:
    head = f"{'router':<12}{'usage':>7}{'R@5':>7}{'R@2':>7}{'P_g':>7}{'R_g':>7}{'F1_g':>7}"
    head += f"{'p50 ms':>9}"
    lines = [f"{key}: {s['n_queries']} queries, labels {s['rule']}", head, "-" * len(head)]
    for name, r in s["routers"].items():
        lines.append(
            f"{name:<12}{r['graph_usage']:>7.2f}{r['recall@5']:>7.3f}{r['recall@2']:>7.3f}"
            f"{r['precision_graph']:>7.2f}{r['recall_graph']:>7.2f}{r['f1_graph']:>7.2f}"
            f"{r['latency_ms_p50']:>9.2f}"
        )
    for name, c in s["checks"].items():
        pgr = "n/a" if c["pgr"] is None else f"{c['pgr']:.2f}"
        ok_r = "ok" if c["hybrid_at_least_best_single"] else "MISSED"
        ok_u = "ok" if c["graph_usage_at_most_half"] else "MISSED"
        lines.append(
            f"  {name}: hybrid {c['hybrid_recall@5']:.3f} vs best single "
            f"{c['best_single_recall@5']:.3f} ({ok_r}), usage {c['graph_usage']:.2f} ({ok_u}),"
            f" beats NER F1: {c['beats_ner_f1']}, PGR {pgr},"
            f" best R@5 at usage ≤ 0.5: {_fmt(c['best_recall@5_within_budget'])}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from r2adapter.config import label_params, pipeline_dataset

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", help="training corpus (default: params.yaml pipeline.dataset)")
    ap.add_argument("--split", default="test", help="split of the training corpus")
    ap.add_argument(
        "--heldout", action="append", help="dataset not used in training (default: musique)"
    )
    ap.add_argument("--rule", help="label rule (default: params.yaml label.rule)")
    ap.add_argument(
        "--llm-queries",
        type=int,
        default=20,
        help="queries per set for the LLM-router (seconds each with the local model; 0 skips)",
    )
    ap.add_argument("--latency-queries", type=int, default=200)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="20 latency queries (the figures: every labelled query)",
    )
    ap.add_argument("--no-mlflow", action="store_true")
    ap.add_argument("--out", type=Path, default=RESULTS / "routing.json")
    args = ap.parse_args(argv)

    from r2adapter.errors import R2AError
    from r2adapter.steps import dataset_name

    require_db()
    train_ds = dataset_name(args.dataset or pipeline_dataset())
    rule = args.rule or label_params().rule
    payload: dict[str, Any] = {
        "benchmark": "routing",
        "timestamp": timestamp(),
        "machine": machine_info(),
        "targets": TARGETS,
        "sets": {},
    }
    try:
        key = f"{train_ds}:{args.split}"
        payload["sets"][key] = evaluate_set(train_ds, args.split, rule, args.llm_queries)
        print(table(key, payload["sets"][key]), flush=True)
        for ds in args.heldout or ["musique"]:
            ds = dataset_name(ds)
            if ds == train_ds:
                die(f"'{ds}' is the training corpus, not a held-out dataset")
            s = evaluate_set(ds, "all", rule, args.llm_queries, TARGETS["max_graph_usage"])
            s["held_out"] = True
            payload["sets"][f"{ds}:all"] = s
            print("\n" + table(f"{ds}:all", s), flush=True)
        questions = [  # the served corpus: the routers' features read its index
            q
            for s in payload["sets"].values()
            if s["dataset"] == train_ds
            for q in _questions(s["dataset"], s["split"], rule)
        ]
        reps = 20 if args.quick else args.latency_queries
        payload["latency"] = latency_block(questions, reps, train_ds)
    except R2AError as e:
        die(str(e))
    lat = payload["latency"]
    payload["latency_checks"] = latency_checks(lat)
    print(f"\nrouting latency, one query at a time ({lat['queries']} queries):")
    for name in (
        "r2a",
        "r2a_torch",
        "r2a_embed_head",
        "r2a_embed_with_encoding",
        "query_encoding",
        "ner",
    ):
        if name in lat:
            p50, p95 = lat[name]["p50_ms"], lat[name]["p95_ms"]
            print(f"  {name:<26} p50 {p50:7.2f} ms   p95 {p95:7.2f} ms")
    if "r2a_runtime" in lat:
        print(
            f"  r2a served on {lat['r2a_runtime']}; decisions equal to torch's: "
            f"{lat['r2a_torch_decision_agreement']:.1%}"
        )
    payload["machine"]["loadavg_1_5_15m_at_end"] = loadavg()
    out = save_json(args.out, payload)
    png = plot_curves(payload["sets"], out.with_suffix(".png"))
    if not args.no_mlflow:
        payload["mlflow_run_id"] = log_mlflow(payload, png, out)
        save_json(out, payload)
    print(f"saved {out} and {png}")
    return 0


def latency_checks(lat: dict[str, Any]) -> dict[str, Any]:
    """The latency targets, for the routers that were timed."""
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


def _questions(dataset: str, split: str, rule: str) -> list[str]:
    from r2adapter.label.annotate import db_labels

    return [r.question for r in db_labels(dataset, rule, split)]


if __name__ == "__main__":
    raise SystemExit(main())
