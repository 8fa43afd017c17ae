"""Study (issue 40): does deciding after retrieval tell which queries need few passages?

The k-way router decides from the question before retrieval, and its features do not carry
which query needs few passages from one corpus to another (docs/routing.md). Under the
`tokens` profile retrieval is a rounding error, so the decision can wait for the rankings:
the trim (`r2adapter/kway/trim.py`) runs the fold's best base strategy and dense retrieval,
and hands the reader base's first k ∈ {1, 2, 3} passages where a classifier over their
agreement, dense retrieval's confidence and the question's form says base@k recalls what
base@5 does.

For each mixed set, held out with the multi-hop corpus over the same passages, three
figures against the held-out set's best fixed strategy at ≤ 5 passages (paired recall
difference and `tokens` cost ratio, 95 % bootstrap intervals):

- `chosen`: the loco report's `trim` row: base and threshold chosen on nested transfers
  between the training corpora (`reports/loco.py` `trim_row`), nothing of the held-out set
  read;
- `held_out_frontier`: the same fitted trim at every threshold, read on the held-out set
  (what a threshold could have given: not a result, the choice did not see it);
- `in_sample_cv5`: the trim fitted on 4/5 of the held-out set itself and scored on the
  fifth (an upper bound on what these features know about that set's queries).

    python -m benchmarks.quality.bench_trim --out benchmarks/results/trim.json
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from r2adapter.config import cost_params, kway_params
from r2adapter.evaluate.routing_report import cost_of, graphs, router_figures
from r2adapter.evaluate.stats import paired_bootstrap, ratio_interval
from r2adapter.kway.transfer import _best_fixed, corpus_groups, read_corpora, training_corpora
from r2adapter.kway.trim import choose_base, fit_trim, trim_features, trim_strategies
from r2adapter.reports.loco import trim_row

HELD_OUT = ("musique_dev_mixed", "2wiki_mixed")
BASES = ("catrag@5", "catrag+rw@5", "graph+rw@5")
THRESHOLDS = (0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 0.97, 0.99)


def figures(choice: np.ndarray, m: dict[str, np.ndarray], best: int, route_ms: np.ndarray,
            single: np.ndarray) -> dict[str, Any]:  # fmt: skip
    rows = np.arange(len(choice))
    cost = cost_of(m)
    mine = cost[rows, choice] + m.get("ms_price", np.ones(len(choice))) * route_ms
    rec = paired_bootstrap(m["recall"][rows, choice], m["recall"][:, best])
    return {
        "recall": float(m["recall"][rows, choice].mean()),
        "mean_passages": float(m["passages"][rows, choice].mean()),
        "single_passages": float(m["passages"][rows, choice][single].mean()),
        "single_recall": float(m["recall"][rows, choice][single].mean()),
        "diff": rec["diff"],
        "ci95": rec["ci95"],
        "cost_ratio": ratio_interval(mine, cost[:, best]),
    }


def study(dataset: str) -> dict[str, Any]:
    every = replace(kway_params(), trim_bases=BASES, trim_thresholds=THRESHOLDS)
    prof = cost_params().priced("tokens")
    train_on = training_corpora(dataset, None)
    trims = [t for b in BASES for t in trim_strategies(b, every.trim_ks)]
    extra = tuple(dict.fromkeys(t for t in trims if t not in every.strategies))
    names, table, data = read_corpora(
        (*train_on, dataset), replace(every, strategies=every.strategies + extra), prof.name
    )
    groups = corpus_groups(train_on, data)
    held = data[dataset]
    qt = [lab.qtype for lab in held.labels]
    single = np.array([q.startswith("1hop") for q in qt])
    n = len(held.labels)
    routers = {
        f"always_{s.name}": router_figures(np.full(n, j), np.zeros(n), held.m, table, qt)
        for j, s in enumerate(table)
    }
    choices: dict[str, np.ndarray] = {}
    lat: dict[str, np.ndarray] = {}
    points: dict[str, Any] = {}
    notes: list[str] = []
    trim_row(dataset, groups, held, names, table, every, qt, routers, choices, lat, points, notes)
    best = _best_fixed(held.m, every.max_passages)
    base = points["trim"]["base"]
    cols = [names.index(s) for s in trim_strategies(base, every.trim_ks)]
    views = graphs()
    xs = {k: trim_features(d.labels, d.qv, views.get(k.split("+")[0]), base)
          for k, d in groups.items()}  # fmt: skip
    m_pool = {k: np.concatenate([d.m[k] for d in groups.values()]) for k in held.m}
    trim = fit_trim(np.vstack(list(xs.values())), m_pool, cols, every.seed)
    xh = trim_features(held.labels, held.qv, views.get(dataset), base)
    frontier = {
        str(t): figures(trim.decide(xh, t), held.m, best, lat["trim"], single) for t in THRESHOLDS
    }
    rng = np.random.default_rng(every.seed)
    fold = rng.integers(0, 5, n)
    cv = {t: np.zeros(n, dtype=int) for t in THRESHOLDS}
    for f in range(5):
        tr, te = fold != f, fold == f
        part = fit_trim(xh[tr], {k: v[tr] for k, v in held.m.items()}, cols, every.seed)
        for t in THRESHOLDS:
            cv[t][te] = part.decide(xh[te], t)
    return {
        "trained_on": list(groups),
        "best_fixed": names[best],
        "base": base,
        "base_by_choose_base": choose_base(groups, names, BASES),
        "threshold": points["trim"]["threshold"],
        "chosen": figures(choices["trim"], held.m, best, lat["trim"], single),
        "nested": points["trim"]["nested"],
        "held_out_frontier": frontier,
        "in_sample_cv5": {
            str(t): figures(cv[t], held.m, best, lat["trim"], single) for t in THRESHOLDS
        },
        "dense5_single_recall": float(held.m["recall"][single, names.index("dense@5")].mean()),
        "notes": notes,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/trim.json"))
    ap.add_argument("--dataset", action="append", choices=HELD_OUT)
    args = ap.parse_args()
    result: dict[str, Any] = {"bases": BASES, "thresholds": THRESHOLDS, "held_out": {}}
    for ds in args.dataset or HELD_OUT:
        t0 = time.perf_counter()
        r = study(ds)
        result["held_out"][ds] = r
        ch = r["chosen"]
        print(f"{ds}: base {r['base']} threshold {r['threshold']} (chosen in the fold; "
              f"{time.perf_counter() - t0:.0f} s)")  # fmt: skip
        print(f"   chosen: diff {ch['diff']:+.4f} {ch['ci95']} cost "
              f"{ch['cost_ratio']['ratio']:.3f}x, passages {ch['mean_passages']:.2f}")  # fmt: skip
        for kind in ("held_out_frontier", "in_sample_cv5"):
            for t, f in r[kind].items():
                print(
                    f"   {kind} t {t}: diff {f['diff']:+.4f} [{f['ci95'][0]:+.4f}, "
                    f"{f['ci95'][1]:+.4f}] cost {f['cost_ratio']['ratio']:.3f}x, single "
                    f"{f['single_passages']:.2f} passages at {f['single_recall']:.3f}"
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=float) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
