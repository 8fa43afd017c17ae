"""A soft cost cap on the union's folds (issue 24, item 4): the served k-way route at its
budget (params.yaml kway.route, kway.budget), trained and scored out of fold over 2Wiki,
hotpotqa_dev and musique_dev together exactly as `bench_route_choice.py` scores its
candidates, once with the hard cap of today's threshold search (kway.cap_penalty 0) and
once per soft penalty λ. Per corpus: recall and mean ms against always-graph@5 (the served
point's rule: more recall at no more than its ms), paired. What `bench_label_jitter.py`
and `bench_label_load.py --cap-penalty` show of stability is worth having only if this
shows no loss. Saves benchmarks/results/cap_penalty.json.

    .venv/bin/python benchmarks/bench_cap_penalty.py [--penalties 0.5,1,2]
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

if not __package__:  # `python benchmarks/...py`: put the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_route_choice import CORPORA, figures, load, out_of_fold  # noqa: E402
from benchmarks.common import arg_parser, finish, new_result, require_db  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__ or "", "λ 1 only", "cap_penalty.json")
    ap.add_argument("--penalties", default="0.5,1,2")
    args = ap.parse_args(argv)
    require_db()
    penalties = [1.0] if args.quick else [float(v) for v in args.penalties.split(",")]
    d = load(list(CORPORA))
    every = d["every"]
    route, budget = tuple(every.route or every.strategies), every.budget
    rows: dict[str, Any] = {}
    for lam in [0.0, *penalties]:
        d["every"] = replace(every, cap_penalty=lam)
        fig = figures(d, out_of_fold(d, route, budget), list(CORPORA))
        rows[str(lam)] = fig
        line = ", ".join(
            f"{c} {v['recall']:.3f} ({v['vs_reference']['diff']:+.3f} vs graph@5) at "
            f"{v['ms_vs_reference']:.2f}x"
            for c, v in fig.items()
        )
        print(f"λ {lam}: {line}", flush=True)
    result = {
        **new_result("cap_penalty", args.quick),
        "route": list(route),
        "budget": budget,
        "corpora": list(CORPORA),
        "penalties": rows,
    }
    finish(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
