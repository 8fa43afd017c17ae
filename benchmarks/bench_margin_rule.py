"""The quality point's margin rule (issue 24, stop 41): two rules for the margin by which a
transferred k-way router's thresholds rise, compared on the training corpora alone.

- `edge` (stops 35-40): the smallest margin of `kway.quality_margins` that met the target
  (recall >= best fixed - tolerance at <= its ms) on every nested transfer.
- `maximin` (`reports/loco.py` `pick_margin` since stop 41): among the margins within the best
  fixed strategy's ms on every nested transfer, the least worst recall shortfall (ties: the
  smallest).

The check that uses no held-out corpus: in each leave-one-corpus-out fold the two training
corpora give two nested transfers (A -> B and B -> A); a rule picks its margin on one and
is scored on the other (the swap), 6 checks over the 3 folds. Beside it, each rule's
held-out figure (its margin picked on both nested transfers, scored on the held-out
corpus, paired against the best fixed strategy): reported, not used to choose (the edge
rule's held-out figures had been seen since stop 35). ms are the chosen strategies'
labelled ms, without the router's own time (~0.3 ms). Saves
benchmarks/results/margin_rule.json.

    .venv/bin/python benchmarks/bench_margin_rule.py
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

if not __package__:  # `python benchmarks/...py`: put the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_loco_shift import score  # noqa: E402
from benchmarks.common import finish, new_result, require_db  # noqa: E402
from r2adapter.config import kway_params  # noqa: E402
from r2adapter.reports.loco import (  # noqa: E402
    _best_fixed,
    _choice,
    _train,
    _transfer,
    nested_margin,
    pick_margin,
    read_corpora,
)

CORPORA = ("2wikimultihopqa", "hotpotqa_dev", "musique_dev")
OUT = Path(__file__).parent / "results" / "margin_rule.json"
Rows = Sequence[dict[str, Any]]


def edge_margin(rows: Rows, margins: Sequence[float]) -> float:
    """The rule of stops 35-40: the smallest margin that met the target on every nested
    transfer; none: the most met, then the least worst shortfall, then the smallest."""
    scored = {float(d): [r for r in rows if r["margin"] == d] for d in sorted(margins)}
    scored = {d: rs for d, rs in scored.items() if rs}
    full = [d for d, rs in scored.items() if all(r["met"] for r in rs)]
    if full:
        return min(full)

    def support(d: float) -> tuple[int, float, float]:
        rs = scored[d]
        gap = min(r["recall"] - r["best_fixed_recall"] for r in rs)
        return sum(bool(r["met"]) for r in rs), round(gap, 9), -d

    return max(scored, key=support) if scored else 0.0


RULES: dict[str, Callable[[Rows, Sequence[float]], float]] = {
    "edge": edge_margin,
    "maximin": pick_margin,
}


def swap_checks(nested: Rows, margins: Sequence[float], tol: float) -> dict[str, list[dict]]:
    """Each rule picks on one nested transfer and is scored on the other."""
    pairs = sorted({(r["train"], r["transfer_to"]) for r in nested})
    out: dict[str, list[dict]] = {k: [] for k in RULES}
    for pick_on in pairs:
        on = [r for r in nested if (r["train"], r["transfer_to"]) == pick_on]
        for other in (q for q in pairs if q != pick_on):
            for name, rule in RULES.items():
                d = rule(on, margins)
                r = next(
                    r
                    for r in nested
                    if (r["train"], r["transfer_to"]) == other and r["margin"] == d
                )
                gap = r["recall"] - r["best_fixed_recall"]
                out[name].append(
                    {
                        "picked_on": "->".join(pick_on),
                        "scored_on": "->".join(other),
                        "margin": d,
                        "gap": gap,
                        "ms_ratio": r["mean_ms"] / r["best_fixed_ms"],
                        "met": bool(gap >= -tol and r["mean_ms"] <= r["best_fixed_ms"]),
                    }
                )
    return out


def main() -> int:
    require_db()
    every = kway_params()
    t0 = time.perf_counter()
    names, table, data = read_corpora(CORPORA, every)
    print(f"read {len(CORPORA)} corpora in {time.perf_counter() - t0:.0f} s", flush=True)
    p = replace(every, route=every.quality_route, budget=every.quality_budget).routed()
    margins, tol = every.quality_margins, every.transfer_tolerance
    cols = [names.index(s) for s in p.strategies]
    tk = [table[j] for j in cols]
    out: dict[str, Any] = new_result("margin_rule", False) | {
        "route": list(p.strategies),
        "budget": p.budget,
        "margins": list(margins),
        "tolerance": tol,
        "held_out": {},
    }
    swaps: dict[str, list[dict]] = {k: [] for k in RULES}
    for held in CORPORA:
        train_on = [c for c in CORPORA if c != held]
        router, _, _ = _train([data[c] for c in train_on], cols, tk, p, "+".join(train_on))
        _, nested = nested_margin(train_on, margins, data, cols, tk, p)
        sw = swap_checks(nested, margins, tol)
        d = data[held]
        kr = _transfer(router, d, cols, p, [])
        res: dict[str, Any] = {"swap": sw, "nested": nested}
        for name, rule in RULES.items():
            swaps[name] += sw[name]
            margin = rule(nested, margins)
            ch = _choice(kr, d.x, margin, cols)
            j = _best_fixed(d.m, float(d.m["passages"][np.arange(len(ch)), ch].mean()))
            res[name] = {
                "margin": margin,
                "best_fixed": names[j],
                **score(ch, j, d.m, tol=tol),
            }
            h = res[name]
            print(
                f"{held:16s} {name:8s} margin {margin:.2f}  held out {h['diff']:+.4f} "
                f"[{h['ci95'][0]:+.3f}, {h['ci95'][1]:+.3f}] ms x{h['ms_ratio']:.2f}  "
                f"swaps met {sum(s['met'] for s in sw[name])}/{len(sw[name])}",
                flush=True,
            )
        out["held_out"][held] = res
    out["swap_summary"] = {
        name: {
            "met": sum(s["met"] for s in rows),
            "checks": len(rows),
            "mean_gap": float(np.mean([s["gap"] for s in rows])),
            "worst_gap": float(min(s["gap"] for s in rows)),
            "mean_ms_ratio": float(np.mean([s["ms_ratio"] for s in rows])),
        }
        for name, rows in swaps.items()
    }
    for name, s in out["swap_summary"].items():
        print(
            f"swap checks {name:8s} met {s['met']}/{s['checks']}  mean gap {s['mean_gap']:+.4f} "
            f"worst {s['worst_gap']:+.4f}  ms x{s['mean_ms_ratio']:.2f}",
            flush=True,
        )
    finish(out, OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
