"""Costs that do not depend on the load (issue 24, item 4): label one corpus twice, once on
a quiet machine and once with every core kept busy by other processes, train the k-way
router on each label set (same seed, same features, same splits) and compare the two
routers' choices on the test split, for each way of costing a strategy (params.yaml
`kway.cost`): `measured`, each query's ms timed once while labelling; `cpu`, the same
steps' CPU ms (this process's and the database backend's, r2adapter/store/cpu_time.py);
`calibrated`, each base retriever's cost from the calibration pass after the labels
(r2adapter/kway/labels.py `calibrate_costs`); and `cpu_median`, each base retriever's
median CPU ms over the file (one price per retriever); and, measured here only, `median`,
the same with wall ms. Labelling runs on one thread (r2adapter/store/cpu_time.py
`one_thread`), as `r2a label` does. One labelling pass yields all five: its per-query
wall and CPU ms and its calibration. Target: ≥ 95% of test queries routed alike, and
the two routers' recall and cost points within noise (a paired bootstrap of the recall
difference).

    .venv/bin/python benchmarks/bench_label_load.py                 # 2wikimultihopqa
    .venv/bin/python benchmarks/bench_label_load.py --quick         # 200 queries, 20 calibrated
    .venv/bin/python benchmarks/bench_label_load.py --dataset musique_dev --hogs 3
    .venv/bin/python benchmarks/bench_label_load.py --load bursts   # label_load_bursts.json
    .venv/bin/python benchmarks/bench_label_load.py \
        --dataset 2wikimultihopqa,hotpotqa_dev,musique_dev            # label_load_union.json

Several corpora (comma-separated): each is labelled in each state, and the router is
trained on their union as the served champion is (each corpus priced over its own file),
and compared on the union's test split.

`--load bursts`: each hog alternates 0.5-3 s busy and 0.5-3 s idle (random, seeded per
hog), the way a test run shares the cores: the load that moved a router in an earlier
fresh-clone run, where a steady load (the default) moved none.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

if not __package__:  # `python benchmarks/bench_label_load.py`: the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (  # noqa: E402
    arg_parser,
    die,
    finish,
    indexed_datasets,
    loadavg,
    met,
    new_result,
    require_db,
)

TARGET_AGREEMENT = 0.95
HOG = "while True: pass"
BURSTY_HOG = """
import random, sys, time
rng = random.Random(int(sys.argv[1]))
while True:
    end = time.monotonic() + rng.uniform(0.5, 3.0)
    while time.monotonic() < end:
        pass
    time.sleep(rng.uniform(0.5, 3.0))
"""


def _hogs(n: int, load: str = "steady") -> list[subprocess.Popen[bytes]]:
    """`n` processes that each keep one core busy (another job on the machine), all the
    time (`steady`) or in bursts (`bursts`)."""
    if load == "bursts":
        return [subprocess.Popen([sys.executable, "-c", BURSTY_HOG, str(i)]) for i in range(n)]
    return [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(n)]


def _label(dataset: str, p: Any, limit: int | None) -> tuple[list[Any], float]:
    from r2adapter.kway import labels as kl

    t0 = time.perf_counter()
    out = kl.rank_strategies(dataset, p, limit=limit)
    return out, time.perf_counter() - t0


def _median_costs(labels: list[Any], attr: str = "ms") -> dict[str, float]:
    """A pricing measured here only (not a `kway.cost`): each base retriever's (and the
    embedding's) median ms over the file (wall `ms` or `cpu_ms`), the same for every
    query."""
    per = [getattr(lab, attr) for lab in labels]
    keys = sorted({k for d in per for k in d})
    return {k: float(np.median([d[k] for d in per if k in d])) for k in keys}


# each pricing: (kway.cost it is evaluated as, the per-file prices it takes, if any)
PRICINGS = {
    "measured": ("measured", None),
    "median": ("calibrated", "ms"),
    "calibrated": ("calibrated", None),
    "cpu": ("cpu", None),
    "cpu_median": ("cpu_median", None),
}


def _priced(labels: list[Any], mode: str, p: Any) -> dict[str, np.ndarray]:
    """One corpus's outcome matrix over the routed strategies, priced by `mode` over this
    corpus's own file (each corpus is priced at its own medians, as `r2a train-kway` does)."""
    from r2adapter.kway.labels import evaluate_outcomes, median_cpu_prices, outcome_matrix
    from r2adapter.kway.strategies import strategy_table

    rp = p.routed()
    table = strategy_table(rp.strategies)
    cost, median_of = PRICINGS[mode]
    prices = _median_costs(labels, median_of) if median_of else None
    priced = [replace(lab, outcomes={}, suitable=[]) for lab in labels]
    if cost == "cpu_median":
        median_cpu_prices(priced)
    for one in priced:
        if prices is not None:
            one.cost_ms = prices  # one price per retriever
        evaluate_outcomes(one, table, rp.rrf_k, cost)
    return outcome_matrix(priced, table)


def _router(labels: list[Any], mode: str, dataset: str, p: Any, x: np.ndarray) -> dict[str, Any]:
    """The k-way router trained on these labels priced by `mode`; its test choices."""
    return _union_router({dataset: labels}, mode, p, {dataset: x})


def _union_router(
    labels: dict[str, list[Any]], mode: str, p: Any, xs: dict[str, np.ndarray]
) -> dict[str, Any]:
    """The k-way router trained on the union of these corpora's labels (heads on their
    train splits, thresholds on their val splits), each priced by `mode` over its own file;
    its choices on the union's test split."""
    from r2adapter.kway.cascade import Costs, choose
    from r2adapter.kway.model import fit_kway

    rp = p.routed()
    ms = [_priced(labels[c], mode, p) for c in labels]
    m = {k: np.concatenate([mm[k] for mm in ms]) for k in ms[0]}
    x = np.vstack([xs[c] for c in labels])
    split = np.concatenate([[lab.split for lab in labels[c]] for c in labels])
    tr, va, te = (np.where(split == s)[0] for s in ("train", "val", "test"))

    def costs(rows: np.ndarray) -> Costs:
        return Costs(m["recall"][rows], m["ms"][rows], m["passages"][rows])

    router, _ = fit_kway(
        x[tr], m["suitable"][tr], x[va], costs(va), costs(tr), rp.strategies, rp, "+".join(labels)
    )
    choice = choose(router.probs(x[te]), router.tau, router.order, router.fallback_ix)
    rows = np.arange(len(te))
    return {
        "choice": choice,
        "recall_q": m["recall"][te][rows, choice],
        "mean_ms": float(m["ms"][te][rows, choice].mean()),
        "strategy_mean_ms": dict(
            zip(rp.strategies, (float(v) for v in m["ms"].mean(axis=0)), strict=True)
        ),
        "fallback": router.cfg.fallback,
        "thresholds": [round(float(t), 3) for t in router.cfg.thresholds],
    }


def _paired_recall(a: np.ndarray, b: np.ndarray, seed: int = 13) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    d = a - b
    boots = [float(d[rng.integers(0, len(d), len(d))].mean()) for _ in range(2000)]
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return {"diff": float(d.mean()), "ci95": [float(lo), float(hi)]}


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__ or "", "200 queries, 20 calibration queries", "label_load.json")
    ap.add_argument("--dataset", default="2wikimultihopqa")
    ap.add_argument("--hogs", type=int, default=0, help="busy processes (default: one a core)")
    ap.add_argument(
        "--load", choices=("steady", "bursts"), default="steady", help="how the hogs load"
    )
    ap.add_argument(
        "--cap-penalty", type=float, default=None, help="kway.cap_penalty (default params.yaml's)"
    )
    args = ap.parse_args(argv)
    if args.load == "bursts" and args.out.name == "label_load.json":
        args.out = args.out.with_name("label_load_bursts.json")
    if "," in args.dataset and args.out.name == "label_load.json":
        args.out = args.out.with_name("label_load_union.json")
    import os

    from r2adapter.config import kway_params
    from r2adapter.index.encoder import get_encoder
    from r2adapter.kway.features import KwayFeatures
    from r2adapter.retrieve.graph_index import GRAPHS

    require_db()
    datasets = [d for d in args.dataset.split(",") if d]
    if not datasets:
        die("--dataset names no corpus")
    indexed_datasets(datasets, [])
    cores = len(os.sched_getaffinity(0))
    hogs = args.hogs or cores
    p = kway_params(cost="calibrated")
    if args.cap_penalty is not None:
        p = replace(p, cap_penalty=args.cap_penalty)
    limit = None
    if args.quick:
        p, limit = replace(p, calibration_queries=20), 200
    result = new_result("label_load", args.quick, hogs=hogs, cores=cores, load=args.load)
    result["dataset"] = "+".join(datasets)
    result["cap_penalty"] = p.cap_penalty
    runs: dict[str, Any] = {}
    for state in ("quiet", "loaded"):
        procs = _hogs(hogs, args.load) if state == "loaded" else []
        time.sleep(1.0 if procs else 0.0)
        load0 = loadavg()[0]
        labels: dict[str, list[Any]] = {}
        seconds: dict[str, float] = {}
        try:
            for d in datasets:
                labels[d], seconds[d] = _label(d, p, limit)
        finally:
            for pr in procs:
                pr.kill()
                pr.wait()
        runs[state] = {"labels": labels, "seconds": seconds, "loadavg_before": load0}
        n = sum(len(v) for v in labels.values())
        print(f"{state}: labelled {n} queries in {sum(seconds.values()):.0f} s (load {load0:.1f})")
    xs: dict[str, np.ndarray] = {}
    for d in datasets:
        questions = [lab.question for lab in runs["quiet"]["labels"][d]]
        xs[d] = KwayFeatures(d, GRAPHS, p.features)(questions, get_encoder().encode(questions))
    modes: dict[str, Any] = {}
    for mode in PRICINGS:
        r = {s: _union_router(runs[s]["labels"], mode, p, xs) for s in runs}
        agree = float((r["quiet"]["choice"] == r["loaded"]["choice"]).mean())
        modes[mode] = {
            "agreement": agree,
            "met": agree >= TARGET_AGREEMENT,
            "recall_paired": _paired_recall(r["loaded"]["recall_q"], r["quiet"]["recall_q"]),
            **{
                s: {
                    "test_recall": float(r[s]["recall_q"].mean()),
                    "test_mean_ms": r[s]["mean_ms"],
                    "strategy_mean_ms": r[s]["strategy_mean_ms"],
                    "fallback": r[s]["fallback"],
                    "thresholds": r[s]["thresholds"],
                }
                for s in r
            },
        }
        print(
            f"{mode:>10}: test choices agree on {agree:.1%} ({met(agree >= TARGET_AGREEMENT)}"
            f" ≥ {TARGET_AGREEMENT:.0%}); recall quiet {modes[mode]['quiet']['test_recall']:.3f}"
            f" loaded {modes[mode]['loaded']['test_recall']:.3f}; mean ms quiet"
            f" {modes[mode]['quiet']['test_mean_ms']:.1f} loaded"
            f" {modes[mode]['loaded']['test_mean_ms']:.1f}"
        )

    def per_corpus(f: Any) -> Any:  # one corpus: its figure; several: one per corpus
        out = {d: f(d) for d in datasets}
        return out[datasets[0]] if len(datasets) == 1 else out

    quiet = runs["quiet"]["labels"]
    result["n_test"] = int(sum(lab.split == "test" for d in datasets for lab in quiet[d]))
    result["label_seconds"] = {s: round(sum(runs[s]["seconds"].values()), 1) for s in runs}
    result["loadavg_before"] = {s: runs[s]["loadavg_before"] for s in runs}
    result["calibrated_ms"] = {
        s: per_corpus(lambda d, s=s: runs[s]["labels"][d][0].cost_ms) for s in runs
    }
    result["median_ms"] = {
        s: per_corpus(
            lambda d, s=s: {a: _median_costs(runs[s]["labels"][d], a) for a in ("ms", "cpu_ms")}
        )
        for s in runs
    }
    result["modes"] = modes
    result["target_agreement"] = TARGET_AGREEMENT
    finish(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
