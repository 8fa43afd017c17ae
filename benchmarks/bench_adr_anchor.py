"""ADR's anchors (`adr.anchor_filter`): every phrase node may anchor (`none`, the first
build) against specific entities only (`specific`: no phrase of spaCy stop words only, no
hub in more than `max_entity_insights` insights, the Leiden step's own limit), on the same
complete-gold queries, each query through both in turn (one query embedding, one BLAS
thread, the machine's load on both alike; the first variant and operator after the
embedding rotate, as `r2a adr label` rotates the operators).

    .venv/bin/python benchmarks/bench_adr_anchor.py [--dataset 2wikimultihopqa] [--quick]

Per variant and operator: Recall@5, FCR@5, context tokens (mean, p50, p90), milliseconds
split into the query embedding, the pgvector HNSW queries and the in-memory walk; the
router `adr` (cv5, out of fold, trained on that variant's labels) against always-complex
with the issue's targets; paired bootstrap intervals (95 %) of specific − none per
operator and for the router, and of adr − always-complex. The ms floor: the embedding
plus, per query, the fastest operator's own time: no router among the three is faster.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

if not __package__:  # `python benchmarks/bench_adr_anchor.py`: the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from benchmarks.common import arg_parser, die, finish, met, new_result, require_db  # noqa: E402

FILTERS = ("none", "specific")


def label_both(dataset: str, every: int) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """The ADR labels under each filter, and per variant and operator the HNSW and walk ms
    per query (with the embedding's)."""
    from threadpoolctl import threadpool_limits

    from r2adapter.adr import operators as ops_mod
    from r2adapter.adr.labels import AdrLabel, outcome, rotated
    from r2adapter.adr.operators import OPERATORS, AdrOperators
    from r2adapter.config import adr_params, label_params
    from r2adapter.data.splits import split_of
    from r2adapter.evaluate.retrieval import stored_queries
    from r2adapter.index.encoder import get_encoder

    p = adr_params()
    ops = AdrOperators(dataset, p)
    queries = stored_queries(dataset, complete_only=True)[::every]
    if not queries:
        die(f"{dataset}: no queries with complete gold")
    enc = get_encoder()
    split = label_params().split
    hnsw = [0.0]
    nearest = ops_mod.store.nearest

    def timed(*a: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return nearest(*a, **kw)
        finally:
            hnsw[0] += (time.perf_counter() - t) * 1000

    ops_mod.store.nearest = timed
    params = {f: replace(p, anchor_filter=f) for f in FILTERS}
    v0 = enc.encode_query(queries[0].question)
    for f in FILTERS:  # warm-up: lazy loads are not a query's cost
        ops.p = params[f]
        for n in OPERATORS:
            ops.run(n, v0, queries[0].question)
    labels: dict[str, list[Any]] = {f: [] for f in FILTERS}
    parts: dict[str, dict[str, dict[str, list[float]]]] = {
        f: {n: {"hnsw": [], "walk": []} for n in OPERATORS} for f in FILTERS
    }
    embed_ms: list[float] = []
    try:
        with threadpool_limits(1):
            for q in queries:
                t = time.perf_counter()
                v = enc.encode_query(q.question)
                embed = (time.perf_counter() - t) * 1000
                embed_ms.append(embed)
                i = len(embed_ms) - 1
                for f in rotated(FILTERS, i):  # neither always first after the embedding
                    ops.p = params[f]
                    res = {}
                    for n in rotated(OPERATORS, i):
                        hnsw[0] = 0.0
                        c = ops.run(n, v, q.question)
                        parts[f][n]["hnsw"].append(hnsw[0])
                        parts[f][n]["walk"].append(c.ms - hnsw[0])
                        res[n] = outcome(c.passage_ids, q.gold_passage_ids, c.tokens, c.ms + embed)
                    labels[f].append(
                        AdrLabel(
                            q.id,
                            q.question,
                            q.type,
                            split_of(q.id, split),
                            list(q.gold_passage_ids),
                            {n: res[n] for n in OPERATORS},
                        )
                    )
    finally:
        ops_mod.store.nearest = nearest
    return labels, {"embed": embed_ms, "parts": parts}


def routed(dataset: str, labels: list[Any], f: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """The routing report's ADR rows on these labels (cv5), its notes, and the operator
    the out-of-fold head chose per query."""
    from r2adapter.adr.evaluate import adr_routers, out_of_fold
    from r2adapter.adr.router import decide
    from r2adapter.config import adr_params
    from r2adapter.index.encoder import get_encoder

    p = adr_params(anchor_filter=f)
    rows, notes = adr_routers(dataset, "cv5", [lab.query_id for lab in labels], p, labels)
    x = get_encoder().encode([lab.question for lab in labels])
    probs, _ = out_of_fold(labels, x, p)
    chosen = [d.operator for d in decide(probs, p.gamma)]
    return rows, notes, chosen


def main() -> None:
    ap = arg_parser(__doc__ or "", "every 4th query only", "adr_anchor.json")
    ap.add_argument("--dataset", default="2wikimultihopqa")
    args = ap.parse_args()
    require_db()
    from r2adapter.adr.operators import OPERATORS
    from r2adapter.errors import R2AError
    from r2adapter.evaluate.stats import paired_bootstrap as paired_interval

    try:
        labels, timing = label_both(args.dataset, 4 if args.quick else 1)
    except R2AError as e:
        die(str(e))
    embed = np.asarray(timing["embed"])
    out: dict[str, Any] = {}
    per_query: dict[str, dict[str, Any]] = {}
    for f in FILTERS:
        labs = labels[f]
        rows, notes, chosen = routed(args.dataset, labs, f)
        ops: dict[str, Any] = {}
        for n in OPERATORS:
            tok = np.array([lab.outcomes[n].tokens for lab in labs], dtype=float)
            part = timing["parts"][f][n]
            ops[n] = {
                "recall": float(np.mean([lab.outcomes[n].recall for lab in labs])),
                "fcr": float(np.mean([lab.outcomes[n].full for lab in labs])),
                "mean_tokens": float(tok.mean()),
                "p50_tokens": float(np.percentile(tok, 50)),
                "p90_tokens": float(np.percentile(tok, 90)),
                "mean_ms": float(np.mean([lab.outcomes[n].ms for lab in labs])),
                "embed_ms": float(embed.mean()),
                "hnsw_ms": float(np.mean(part["hnsw"])),
                "walk_ms": float(np.mean(part["walk"])),
            }
        own = np.array([[lab.outcomes[n].ms for n in OPERATORS] for lab in labs])
        complex_ms = own[:, OPERATORS.index("complex")].mean()
        floor = float(own.min(axis=1).mean())  # embedding + the fastest operator, per query
        a, c = rows["adr"], rows["always_adr_complex"]
        targets = {
            "tokens_ratio": a["mean_tokens"] / c["mean_tokens"],
            "ms_ratio": a["mean_ms"] / c["mean_ms"],
            "fcr_diff": a["fcr"] - c["fcr"],
            "ms_floor_ratio": floor / complex_ms,
        }
        targets["met"] = bool(
            targets["tokens_ratio"] <= 0.6
            and targets["ms_ratio"] <= 0.7
            and targets["fcr_diff"] >= -0.02
        )
        got = {
            m: np.array([getattr(lab.outcomes[o], m) for lab, o in zip(labs, chosen, strict=True)])
            for m in ("recall", "full")
        }
        cx = {m: np.array([getattr(lab.outcomes["complex"], m) for lab in labs])
              for m in ("recall", "full")}  # fmt: skip
        per_query[f] = {"chosen": got}
        out[f] = {
            "operators": ops,
            "adr": rows["adr"],
            "adr_oracle": rows["adr_oracle"],
            "classes": {n: sum(lab.label == n for lab in labs) / len(labs) for n in OPERATORS},
            "targets": targets,
            "adr_vs_complex": {
                "recall": paired_interval(got["recall"], cx["recall"]),
                "fcr": paired_interval(got["full"], cx["full"]),
            },
            "notes": notes,
        }
    paired: dict[str, Any] = {}
    for n in OPERATORS:
        paired[n] = {
            m: paired_interval(
                np.array([getattr(lab.outcomes[n], m) for lab in labels["specific"]]),
                np.array([getattr(lab.outcomes[n], m) for lab in labels["none"]]),
            )
            for m in ("recall", "full")
        }
    paired["adr"] = {
        m: paired_interval(per_query["specific"]["chosen"][m], per_query["none"]["chosen"][m])
        for m in ("recall", "full")
    }
    result = new_result("adr_anchor", args.quick)
    result.update(
        dataset=args.dataset,
        n_queries=len(labels["none"]),
        variants=out,
        specific_minus_none=paired,
    )
    print(f"{args.dataset}: {len(labels['none'])} queries, embedding {embed.mean():.1f} ms mean")
    for f in FILTERS:
        print(f"  anchor_filter {f}:")
        for n, m in out[f]["operators"].items():
            print(
                f"    {n:<9} R@5 {m['recall']:.3f}  FCR@5 {m['fcr']:.3f}  tokens "
                f"{m['mean_tokens']:,.0f} ({m['p50_tokens']:,.0f} / {m['p90_tokens']:,.0f})  ms "
                f"{m['mean_ms']:.1f} = embed {m['embed_ms']:.1f} + hnsw {m['hnsw_ms']:.1f} + "
                f"walk {m['walk_ms']:.1f}"
            )
        a, t = out[f]["adr"], out[f]["targets"]
        vs = out[f]["adr_vs_complex"]["fcr"]
        print(
            f"    adr (cv5) R@5 {a['recall']:.3f}  FCR@5 {a['fcr']:.3f}  tokens "
            f"{a['mean_tokens']:,.0f}  ms {a['mean_ms']:.1f}  share {a['share']}"
        )
        print(
            f"    vs always-complex: tokens {t['tokens_ratio']:.1%} (≤ 60%), ms "
            f"{t['ms_ratio']:.1%} (≤ 70%; floor {t['ms_floor_ratio']:.1%}), FCR@5 "
            f"{vs['diff']:+.3f} [{vs['ci95'][0]:+.3f}, {vs['ci95'][1]:+.3f}] (≥ -0.02): "
            f"{met(t['met'])}"
        )
    print("  specific − none (paired bootstrap 95 %):")
    for n, d in paired.items():
        print(
            "    "
            + f"{n:<9}"
            + "  ".join(
                f"{m} {d[m]['diff']:+.3f} [{d[m]['ci95'][0]:+.3f}, {d[m]['ci95'][1]:+.3f}]"
                for m in ("recall", "full")
            )
        )
    finish(result, args.out)


if __name__ == "__main__":
    main()
