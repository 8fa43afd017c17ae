"""Why two label runs can train different k-way routers (issue 24, item 4): no load at all,
only timing noise. The committed strategy labels are read once; each trial multiplies every
query's measured ms (the embedding's and each base retriever's) by its own log-normal
factor (σ 0.05 or 0.15: a few per cent is what two quiet runs differ by per query), trains
the k-way router exactly as `bench_label_load.py` does (params.yaml's route, budget, seed,
features and splits), and compares its test choices with the router trained on the
unperturbed ms. The recall labels are the same in every trial: whatever moves is the
threshold search meeting the cost cap. Saves benchmarks/results/label_jitter.json.

    .venv/bin/python benchmarks/bench_label_jitter.py                # 2wikimultihopqa, 20 trials
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

from benchmarks.bench_label_load import _router  # noqa: E402
from benchmarks.common import arg_parser, finish, new_result, require_db  # noqa: E402

SIGMAS = (0.05, 0.15)


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__ or "", "3 trials a σ", "label_jitter.json")
    ap.add_argument("--dataset", default="2wikimultihopqa")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument(
        "--cap-penalty", type=float, default=None, help="kway.cap_penalty (default params.yaml's)"
    )
    args = ap.parse_args(argv)
    from r2adapter.config import kway_params
    from r2adapter.index.encoder import get_encoder
    from r2adapter.kway.features import KwayFeatures
    from r2adapter.kway.labels import read_strategy_labels
    from r2adapter.retrieve.graph_index import GRAPHS

    require_db()
    trials = 3 if args.quick else args.trials
    p = kway_params() if args.cap_penalty is None else kway_params(cap_penalty=args.cap_penalty)
    labels = read_strategy_labels(args.dataset, replace(p, route=()))
    questions = [lab.question for lab in labels]
    x = KwayFeatures(args.dataset, GRAPHS, p.features)(questions, get_encoder().encode(questions))
    base = _router(labels, "measured", args.dataset, p, x)
    print(f"unperturbed: thresholds {base['thresholds']}, recall {base['recall_q'].mean():.3f}")
    result = new_result("label_jitter", args.quick)
    result["dataset"] = args.dataset
    result["cap_penalty"] = p.cap_penalty
    result["base"] = {
        "thresholds": base["thresholds"],
        "recall": float(base["recall_q"].mean()),
        "mean_ms": base["mean_ms"],
    }
    result["sigmas"] = {}
    for sigma in SIGMAS:
        rng = np.random.default_rng(int(sigma * 1000))
        rows: list[dict[str, Any]] = []
        for t in range(trials):
            noisy = [
                replace(
                    lab,
                    ms={k: v * float(rng.lognormal(0.0, sigma)) for k, v in lab.ms.items()},
                    outcomes={},
                    suitable=[],
                )
                for lab in labels
            ]
            r = _router(noisy, "measured", args.dataset, p, x)
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
