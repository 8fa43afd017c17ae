"""The routing sweep (`kind: routing` of params.yaml `sweeps:`; r2adapter/evaluate/sweeps.py):
issue 4's targets, every router under one protocol, in one run.

The figures are `r2a evaluate routing`'s (r2adapter/evaluate/routing_report.py: the same
routers, the same calibration, a champion that fails to load left out with a note), with
the τ curves, the targets' checks and the plot of r2adapter/evaluate/routing_targets.py;
the sweep adds timing repeats one query at a time, the sets it runs on and the MLflow run.

For the training corpus's `split` and for each `heldout` dataset (one the routers never saw;
all its labelled queries), with the labels of the configured rule: always-dense,
always-graph, NER-router, oracle, the champions `r2a` and `r2a_embed`, the LLM-router (the
configured one on every query, else the local SmolLM2 on the first `llm_queries`); on the
held-out sets also `r2a_budget` and `r2a_embed_budget`, τ calibrated without labels so that
half the corpus's questions go to graph. Routing latency, one query at a time as the service
routes: the fine-tuned router as served (ONNX Runtime) and on torch (with decision
agreement), the embedding head (also with the query encoding), the NER-router; the routers
are given the query's retrieval embedding, which both retrievers compute anyway.

A held-out dataset must be indexed and labelled first (`make run` does only the training
corpus): `r2a index --dataset musique --openie spacy && r2a label --dataset musique`. The
trained routers come from the caller (`champion`: r2adapter/steps.py `champion_router`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from r2adapter.errors import R2AError
from r2adapter.evaluate.results_file import machine_info, summary_ms, timestamp
from r2adapter.evaluate.routing_report import Champion
from r2adapter.evaluate.routing_targets import (
    TARGETS,
    evaluate_set,
    latency_checks,
    load_champions,
    plot_curves,
)

if TYPE_CHECKING:
    from r2adapter.config import SweepParams

LATENCY_NAMES = ("r2a", "r2a_torch", "r2a_embed_head", "r2a_embed_with_encoding")


def latency_block(
    questions: list[str], reps: int, dataset: str, champion: Champion
) -> dict[str, Any]:
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

    champions = load_champions(dataset, champion)
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


def routing_sweep(sweep: SweepParams, champion: Champion) -> dict[str, Any]:
    """Every set of the sweep and the routing latency: the result file's object."""
    from r2adapter.config import label_params, pipeline_dataset
    from r2adapter.data.adapters import dataset_name
    from r2adapter.label.annotate import db_labels
    from r2adapter.store.graph_store import require_version

    train_ds = dataset_name(sweep.datasets[0] if sweep.datasets else pipeline_dataset())
    heldout = [dataset_name(d) for d in sweep.heldout]
    if train_ds in heldout:
        raise R2AError(f"'{train_ds}' is the training corpus, not a held-out dataset")
    for ds in (train_ds, *heldout):
        require_version(ds)  # one line naming `r2a index` before minutes of work
    rule = sweep.rule or label_params().rule
    payload: dict[str, Any] = {
        "benchmark": "routing",
        "timestamp": timestamp(),
        "machine": machine_info(),
        "targets": TARGETS,
        "sets": {},
    }
    sets = payload["sets"]
    sets[f"{train_ds}:{sweep.split}"] = evaluate_set(
        train_ds, champion, sweep.split, rule, sweep.llm_queries
    )
    for ds in heldout:
        s = evaluate_set(ds, champion, "all", rule, sweep.llm_queries, TARGETS["max_graph_usage"])
        s["held_out"] = True
        sets[f"{ds}:all"] = s
    # the served corpus's questions: the routers' features read its index
    questions = [r.question for r in db_labels(train_ds, rule, sweep.split)]
    payload["latency"] = latency_block(questions, sweep.latency_queries, train_ds, champion)
    payload["latency_checks"] = latency_checks(payload["latency"])
    return payload


def log_mlflow(payload: dict[str, Any], png: Path, out: Path) -> str:
    """The sweep's figures, its plot and its file as one run of `r2a-benchmarks`."""
    import mlflow

    from r2adapter.registry.tracking import mlflow_setup

    mlflow_setup()
    mlflow.set_experiment("r2a-benchmarks")
    with mlflow.start_run(run_name="sweep_routing") as run:
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


def plot(payload: dict[str, Any], out: Path) -> Path:
    """The sets' τ curves beside the result file (routing.json: routing.png)."""
    return plot_curves(payload["sets"], out.with_suffix(".png"))


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def table_lines(payload: dict[str, Any]) -> list[str]:
    """Each set's routers and checks, then the routing latency."""
    lines: list[str] = []
    for key, s in payload["sets"].items():
        head = f"{'router':<12}{'usage':>7}{'R@5':>7}{'R@2':>7}{'P_g':>7}{'R_g':>7}{'F1_g':>7}"
        head += f"{'p50 ms':>9}"
        lines += [f"{key}: {s['n_queries']} queries, labels {s['rule']}", head, "-" * len(head)]
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
                f"{c['best_single_recall@5']:.3f} ({ok_r}), usage {c['graph_usage']:.2f} "
                f"({ok_u}), beats NER F1: {c['beats_ner_f1']}, PGR {pgr},"
                f" best R@5 at usage ≤ 0.5: {_fmt(c['best_recall@5_within_budget'])}"
            )
        lines.append("")
    lat = payload["latency"]
    lines.append(f"routing latency, one query at a time ({lat['queries']} queries):")
    for name in (*LATENCY_NAMES, "query_encoding", "ner"):
        if name in lat:
            p50, p95 = lat[name]["p50_ms"], lat[name]["p95_ms"]
            lines.append(f"  {name:<26} p50 {p50:7.2f} ms   p95 {p95:7.2f} ms")
    if "r2a_runtime" in lat:
        lines.append(
            f"  r2a served on {lat['r2a_runtime']}; decisions equal to torch's: "
            f"{lat['r2a_torch_decision_agreement']:.1%}"
        )
    return lines
