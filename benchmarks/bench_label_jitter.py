"""Why two label runs can train different k-way routers (issue 24, item 4): no load at all,
only timing noise. The committed strategy labels are read once; each trial perturbs their
timings, trains the k-way router exactly as `bench_label_load.py` does (params.yaml's
route, budget, seed, features and splits), and compares its test choices with the router
trained on the unperturbed timings. The recall labels are the same in every trial: whatever
moves is the training meeting the cost cap.

- `--noise query` (default; priced `measured`): every query's measured ms (the embedding's
  and each base retriever's) times its own log-normal factor (σ .05, .15: a few per cent is
  what two quiet runs differ by per query). Saves label_jitter.json.
- `--noise step` (priced `cpu_median`, the default `kway.cost`): one log-normal factor per
  step and corpus, the same for every query, so each step's median CPU ms moves by it
  (σ .03, .06: two passes' medians differed by 1-7% per step, quiet against loaded, in
  bench_label_load.py's runs). The noise cpu_median is left with. Saves
  label_jitter_step_<corpus>.json.

Several corpora (comma-separated): the router is trained on their union, as the served
champion is, each corpus priced over its own file, and compared on the union's test split.

    .venv/bin/python benchmarks/bench_label_jitter.py                # 2wikimultihopqa, 20 trials
    .venv/bin/python benchmarks/bench_label_jitter.py --noise step --dataset hotpotqa_dev
    .venv/bin/python benchmarks/bench_label_jitter.py --noise step \
        --dataset 2wikimultihopqa,hotpotqa_dev,musique_dev         # label_jitter_step_union.json
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

if not __package__:  # `python benchmarks/...py`: put the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_label_load import _union_router  # noqa: E402
from benchmarks.common import arg_parser, die, finish, new_result, require_db  # noqa: E402

SIGMAS = {"query": (0.05, 0.15), "step": (0.03, 0.06)}
PRICED = {"query": "measured", "step": "cpu_median"}


def _perturbed(labels: list[Any], noise: str, sigma: float, rng: np.random.Generator) -> list:
    """One corpus's labels with their timings perturbed (see the module's doc)."""
    if noise == "query":
        return [
            replace(
                lab,
                ms={k: v * float(rng.lognormal(0.0, sigma)) for k, v in lab.ms.items()},
                outcomes={},
                suitable=[],
            )
            for lab in labels
        ]
    keys = sorted({k for lab in labels for k in lab.cpu_ms})
    f = {k: float(rng.lognormal(0.0, sigma)) for k in keys}
    return [
        replace(lab, cpu_ms={k: v * f[k] for k, v in lab.cpu_ms.items()}, outcomes={}, suitable=[])
        for lab in labels
    ]


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__ or "", "3 trials a σ", "label_jitter.json")
    ap.add_argument("--dataset", default="2wikimultihopqa", help="a corpus, or several: a,b,c")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--noise", choices=tuple(SIGMAS), default="query")
    ap.add_argument(
        "--cap-penalty", type=float, default=None, help="kway.cap_penalty (default params.yaml's)"
    )
    args = ap.parse_args(argv)
    datasets = [d for d in args.dataset.split(",") if d]
    if not datasets:
        die("--dataset names no corpus")
    if args.noise == "step" and args.out.name == "label_jitter.json":
        tag = "union" if len(datasets) > 1 else datasets[0]
        args.out = args.out.with_name(f"label_jitter_step_{tag}.json")
    from r2adapter.config import kway_params
    from r2adapter.errors import R2AError
    from r2adapter.index.encoder import get_encoder
    from r2adapter.kway.features import KwayFeatures
    from r2adapter.kway.labels import read_strategy_labels
    from r2adapter.retrieve.graph_index import GRAPHS

    require_db()
    trials = 3 if args.quick else args.trials
    p = kway_params() if args.cap_penalty is None else kway_params(cap_penalty=args.cap_penalty)
    mode = PRICED[args.noise]
    try:
        labels = {d: read_strategy_labels(d, replace(p, route=())) for d in datasets}
    except R2AError as e:
        die(str(e))
    xs = {}
    for d in datasets:
        questions = [lab.question for lab in labels[d]]
        xs[d] = KwayFeatures(d, GRAPHS, p.features)(questions, get_encoder().encode(questions))
    base = _union_router(labels, mode, p, xs)
    print(f"unperturbed: thresholds {base['thresholds']}, recall {base['recall_q'].mean():.3f}")
    result = new_result("label_jitter", args.quick)
    result["dataset"] = "+".join(datasets)
    result["noise"] = args.noise
    result["pricing"] = mode
    result["n_test"] = len(base["choice"])
    result["cap_penalty"] = p.cap_penalty
    result["base"] = {
        "thresholds": base["thresholds"],
        "recall": float(base["recall_q"].mean()),
        "mean_ms": base["mean_ms"],
    }
    result["sigmas"] = {}
    for sigma in SIGMAS[args.noise]:
        rng = np.random.default_rng(int(sigma * 1000))
        rows: list[dict[str, Any]] = []
        for t in range(trials):
            noisy = {d: _perturbed(labels[d], args.noise, sigma, rng) for d in datasets}
            r = _union_router(noisy, mode, p, xs)
            agree = float((r["choice"] == base["choice"]).mean())
            rows.append(
                {
                    "agreement": agree,
                    "thresholds": r["thresholds"],
                    "recall": float(r["recall_q"].mean()),
                    "mean_ms": r["mean_ms"],
                }
            )
            print(
                f"σ {sigma}: trial {t}: agree {agree:.1%}, thresholds {r['thresholds']}, "
                f"recall {r['recall_q'].mean():.3f}",
                flush=True,
            )
        configs = Counter(tuple(r["thresholds"]) for r in rows)
        result["sigmas"][str(sigma)] = {
            "trials": rows,
            "agreement_mean": float(np.mean([r["agreement"] for r in rows])),
            "share_at_least_95": float(np.mean([r["agreement"] >= 0.95 for r in rows])),
            "distinct_thresholds": len(configs),
            "threshold_counts": {str(list(k)): v for k, v in configs.items()},
        }
    finish(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
