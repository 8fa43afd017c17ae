"""ADR's operators under several readings of what their context holds (issue 16, docs/adr.md
"What a reader gets"): each setting labels every complete-gold query in memory (the three
operators, one BLAS thread) and scores the ADR router out of fold (cv5), against always-
complex. The ranked passages (Recall@5, FCR@5) are the same in every setting; only the
context handed to a reader, and so the labels and the router, change.

    .venv/bin/python benchmarks/bench_adr_context.py [--dataset 2wikimultihopqa] [--quick]

Settings: `paper` (the defaults: facts and narratives, no passage text, no budget), `old`
(the first build: facts within 256 tokens, 5 passages' text, at most 5 eq.-5 edges),
`bounded` (the paper's contents within the old bounds: 256 fact tokens, 5 edges, no passage
text) and `pairwise_sub` (the paper with simple's and moderate's facts only the pairwise
facts touching an anchor, not those of the higher-order hyperedges holding one; a reading,
patched in here, not a parameter). Milliseconds compare within a setting only.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import arg_parser, finish, new_result, require_db  # noqa: E402

SETTINGS: dict[str, dict[str, Any]] = {
    "paper": {"fact_tokens": 0, "context_passages": 0, "max_up_edges": 0},
    "old": {"fact_tokens": 256, "context_passages": 5, "max_up_edges": 5},
    "bounded": {"fact_tokens": 256, "context_passages": 0, "max_up_edges": 5},
    "pairwise_sub": {"fact_tokens": 0, "context_passages": 0, "max_up_edges": 0},
}


def main() -> None:
    import numpy as np

    ap = arg_parser(__doc__ or "", "the first 100 queries", "adr_context.json")
    ap.add_argument("--dataset", default="2wikimultihopqa")
    args = ap.parse_args()
    require_db()
    import r2adapter.evaluate.retrieval as rv
    from r2adapter.adr.evaluate import adr_routers
    from r2adapter.adr.labels import label_dataset, summary
    from r2adapter.adr.operators import AdrOperators
    from r2adapter.config import adr_params

    if args.quick:
        every = rv.stored_queries
        rv.stored_queries = lambda *a, **k: every(*a, **k)[:100]  # type: ignore[assignment]
    paper_sub = AdrOperators._sub_facts

    def pairwise_sub(self: AdrOperators, anchors: Any, ranked: Any, qvec: Any) -> Any:
        return ranked, {h for e, _ in anchors for h in self.ix.entity_hyperedges[e]}

    out: dict[str, Any] = {}
    for name, over in SETTINGS.items():
        AdrOperators._sub_facts = pairwise_sub if name == "pairwise_sub" else paper_sub  # type: ignore[method-assign]
        p = replace(adr_params(), **over)
        t = time.perf_counter()
        labels = label_dataset(args.dataset, p)
        s = summary(labels)
        rows, _ = adr_routers(args.dataset, "cv5", [x.query_id for x in labels], p, labels)
        a, c = rows["adr"], rows["always_adr_complex"]
        for op, m in s["operators"].items():
            tk = np.array([x.outcomes[op].tokens for x in labels])
            m["tokens_p50"], m["tokens_p90"] = float(np.median(tk)), float(np.percentile(tk, 90))
        out[name] = {
            "params": over,
            "operators": s["operators"],
            "classes": s["classes"],
            "adr": a,
            "adr_oracle": rows["adr_oracle"],
            "tokens_vs_complex": a["mean_tokens"] / c["mean_tokens"] - 1,
            "ms_vs_complex": a["mean_ms"] / c["mean_ms"] - 1,
            "fcr_vs_complex": a["fcr"] - c["fcr"],
            "seconds": time.perf_counter() - t,
        }
        print(f"{name} {over}")
        for op, m in s["operators"].items():
            print(f"  {op:<9} R@5 {m['recall']:.3f}  FCR@5 {m['fcr']:.3f}  tokens "
                  f"{m['mean_tokens']:.0f} (p50 {m['tokens_p50']:.0f}, p90 {m['tokens_p90']:.0f})"
                  f"  ms {m['mean_ms']:.1f}")  # fmt: skip
        r = out[name]
        print(f"  adr       R@5 {a['recall']:.3f}  FCR@5 {a['fcr']:.3f}  tokens "
              f"{a['mean_tokens']:.0f}  ms {a['mean_ms']:.1f}  share {a['share']}\n"
              f"  vs always-complex: tokens {r['tokens_vs_complex']:+.1%}, ms "
              f"{r['ms_vs_complex']:+.1%}, fcr {r['fcr_vs_complex']:+.3f}")  # fmt: skip
    AdrOperators._sub_facts = paper_sub  # type: ignore[method-assign]
    result = new_result("adr_context", bool(args.quick))
    result.update(dataset=args.dataset, n_queries=len(labels), settings=out)
    finish(result, args.out)


if __name__ == "__main__":
    main()
