"""Routing benchmark (issue 4's targets): every router under one protocol, in one run.

The figures are `r2a evaluate routing`'s (r2adapter/evaluate/routing_report.py: the same
routers, the same calibration, a champion that fails to load left out with a note), with
the τ-sweep curves, the targets' checks and the plot of r2adapter/evaluate/routing_targets.py;
this script adds what a benchmark adds: timing repeats one query at a time, the sets it
runs on and the MLflow run.

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

    .venv/bin/python -m benchmarks.quality.bench_routing                      # 2Wiki test + musique
    .venv/bin/python -m benchmarks.quality.bench_routing --heldout hotpotqa   # another held-out set
    .venv/bin/python -m benchmarks.quality.bench_routing --quick --llm-queries 0   # smoke run
      (--quick: 20 latency queries; the figures are still on every labelled query)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.lib.common import (
    RESULTS,
    die,
    loadavg,
    machine_info,
    require_db,
    save_json,
    summary_ms,
    timestamp,
)
from r2adapter.evaluate.routing_targets import (
    TARGETS,
    evaluate_set,
    latency_checks,
    load_champions,
    plot_curves,
)


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
    from r2adapter.steps import champion_router

    champions = load_champions(dataset, champion_router)
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
    ap.add_argument(
        "--no-heldout", action="store_true", help="the training corpus's split only (no --heldout)"
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
    from r2adapter.steps import champion_router, dataset_name

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
        payload["sets"][key] = evaluate_set(
            train_ds, champion_router, args.split, rule, args.llm_queries
        )
        print(table(key, payload["sets"][key]), flush=True)
        for ds in [] if args.no_heldout else args.heldout or ["musique"]:
            ds = dataset_name(ds)
            if ds == train_ds:
                die(f"'{ds}' is the training corpus, not a held-out dataset")
            s = evaluate_set(
                ds, champion_router, "all", rule, args.llm_queries, TARGETS["max_graph_usage"]
            )
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


def _questions(dataset: str, split: str, rule: str) -> list[str]:
    from r2adapter.label.annotate import db_labels

    return [r.question for r in db_labels(dataset, rule, split)]


if __name__ == "__main__":
    raise SystemExit(main())
