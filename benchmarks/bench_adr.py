"""ADR (issue 16) on one indexed dataset: the three operators against dense, graph and
catrag on the same complete-gold queries (Recall@5, FCR@5, passages, context tokens, ms),
whether any operator beats an existing strategy anywhere on the quality–cost plane, the
ADR router (cv5, out of fold) against always-complex with the issue's targets, and the
hypergraph's build time against the index time of the same version.

    .venv/bin/python benchmarks/bench_adr.py [--dataset 2wikimultihopqa]

It reads what `r2a index --adr`, `r2a adr label` and `r2a label` (the strategy labels)
stored; it retrieves nothing itself. A strategy's tokens are its passages' (the strategy
labels count nothing else); an operator's also count its facts and narratives.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if not __package__:  # `python benchmarks/bench_adr.py`: the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import arg_parser, die, finish, met, new_result, require_db  # noqa: E402

STRATEGIES = ("dense@5", "graph@5", "catrag@5")
FIELDS = ("recall", "fcr", "mean_passages", "mean_tokens", "mean_ms")


def dominated(a: dict[str, float], b: dict[str, float]) -> bool:
    """`a` is beaten by `b`: b at least as good on recall, fcr and no costlier in tokens
    and ms, strictly better on one."""
    ge = b["recall"] >= a["recall"] and b["fcr"] >= a["fcr"]
    le = b["mean_tokens"] <= a["mean_tokens"] and b["mean_ms"] <= a["mean_ms"]
    strict = (b["recall"], b["fcr"]) != (a["recall"], a["fcr"]) or (
        b["mean_tokens"],
        b["mean_ms"],
    ) != (a["mean_tokens"], a["mean_ms"])
    return ge and le and strict


def build_times(dataset: str) -> dict[str, Any]:
    from r2adapter.store.db import connection
    from r2adapter.store.graph_store import require_version

    v = require_version(dataset)
    with connection() as conn:
        idx = conn.execute("SELECT timings FROM index_versions WHERE id = %s", (v.id,)).fetchone()
        adr = conn.execute(
            "SELECT timings, counts FROM adr_builds WHERE index_version = %s", (v.id,)
        ).fetchone()
    if adr is None:
        die(f"index version {v.id} has no hypergraph: run `r2a index --dataset {dataset} --adr`")
    index_s = float(idx[0].get("total", 0.0)) if idx and idx[0] else 0.0
    build_s = float(adr[0].get("build", 0.0))
    return {
        "index_version": v.id,
        "index_seconds": index_s,
        "hypergraph_seconds": build_s,
        "share_of_index": build_s / index_s if index_s else None,
        "counts": adr[1],
    }


def interleaved_ms(dataset: str, questions: list[str]) -> dict[str, Any]:
    """Each question through dense, graph, catrag (top 5) and the three operators in turn,
    on one BLAS thread, from one query embedding (its time added to each): the machine's
    load falls on all alike, so these milliseconds compare; the labels' do only within one
    label file."""
    import time

    from threadpoolctl import threadpool_limits

    from benchmarks.common import summary_ms
    from r2adapter.adr.operators import OPERATORS, AdrOperators
    from r2adapter.index.encoder import get_encoder
    from r2adapter.retrieve.strategies import make_retriever

    enc = get_encoder()
    base = {name: make_retriever(name, dataset, enc) for name in ("dense", "graph", "catrag")}
    ops = AdrOperators(dataset)
    runs: dict[str, Any] = {
        **{n: (lambda q, v, r=r: r.retrieve(q, 5, qvec=v)) for n, r in base.items()},
        **{f"adr_{n}": (lambda q, v, n=n: ops.run(n, v, q)) for n in OPERATORS},
    }
    v0 = enc.encode_query(questions[0])
    for f in runs.values():
        f(questions[0], v0)  # warm-up: lazy loads are not a query's cost
    ms: dict[str, list[float]] = {n: [] for n in runs}
    with threadpool_limits(1):
        for q in questions:
            t = time.perf_counter()
            v = enc.encode_query(q)
            embed = (time.perf_counter() - t) * 1000
            for n, f in runs.items():
                t = time.perf_counter()
                f(q, v)
                ms[n].append(embed + (time.perf_counter() - t) * 1000)
    return {"n": len(questions), "ms": {n: summary_ms(v) for n, v in ms.items()}}


def dense_graph_mix(plane: dict[str, dict[str, float]], timed: dict[str, Any]) -> dict[str, Any]:
    """For each operator: routing a share of queries to graph@5 and the rest to dense@5 at
    random, so that the mean interleaved ms equals the operator's, and what that mix gets."""
    ms = {n: m["mean_ms"] for n, m in timed["ms"].items()}
    d, g = plane["dense@5"], plane["graph@5"]
    out = {}
    for op, name in (("simple", "always_adr_simple"), ("moderate", "always_adr_moderate"),
                     ("complex", "always_adr_complex")):  # fmt: skip
        share = min(1.0, max(0.0, (ms[f"adr_{op}"] - ms["dense"]) / (ms["graph"] - ms["dense"])))
        m = {k: d[k] + share * (g[k] - d[k]) for k in ("recall", "fcr", "mean_tokens")}
        a = plane[name]
        beats = (
            m["recall"] >= a["recall"] and m["fcr"] >= a["fcr"]
            and m["mean_tokens"] <= a["mean_tokens"]
        )  # fmt: skip
        out[name] = {"graph_share": share, **m, "beats": beats}
    return out


def main() -> None:
    ap = arg_parser(__doc__ or "", "(no effect: it reads stored labels)", "adr.json")
    ap.add_argument("--dataset", default="2wikimultihopqa")
    ap.add_argument("--every", type=int, default=4, help="time every n-th query interleaved")
    args = ap.parse_args()
    require_db()
    from r2adapter.adr.evaluate import adr_routers
    from r2adapter.adr.labels import read_adr_labels
    from r2adapter.config import kway_params
    from r2adapter.errors import R2AError
    from r2adapter.kway.labels import read_strategy_labels, summary
    from r2adapter.kway.strategies import strategy_table

    try:
        adr = read_adr_labels(args.dataset)
        table = strategy_table(STRATEGIES)
        strat = read_strategy_labels(args.dataset, kway_params(strategies=STRATEGIES, route=()))
    except R2AError as e:
        die(str(e))
    ids = {lab.query_id for lab in strat} & {lab.query_id for lab in adr}
    common = [lab.query_id for lab in adr if lab.query_id in ids]
    s = summary([lab for lab in strat if lab.query_id in ids], table)["strategies"]
    rows, notes = adr_routers(args.dataset, "cv5", common)
    plane: dict[str, dict[str, float]] = {}
    for name in STRATEGIES:
        m = s[name]
        passages = float(name.split("@")[1])
        plane[name] = {**{k: m[k] for k in ("recall", "fcr", "mean_tokens", "mean_ms")},
                       "mean_passages": passages}  # fmt: skip
    for name in ("always_adr_simple", "always_adr_moderate", "always_adr_complex", "adr"):
        plane[name] = {k: rows[name][k] for k in FIELDS}
    beats = {
        op: [st for st in STRATEGIES if dominated(plane[st], plane[op])]
        for op in ("always_adr_simple", "always_adr_moderate", "always_adr_complex", "adr")
    }
    undominated = {
        op: not any(dominated(plane[op], plane[st]) for st in STRATEGIES) for op in beats
    }
    a, c = rows["adr"], rows["always_adr_complex"]
    targets = {
        "tokens_cut": 1 - a["mean_tokens"] / c["mean_tokens"],
        "ms_cut": 1 - a["mean_ms"] / c["mean_ms"],
        "fcr_diff": a["fcr"] - c["fcr"],
    }
    targets["met"] = (
        targets["tokens_cut"] >= 0.40 and targets["ms_cut"] >= 0.30 and targets["fcr_diff"] >= -0.02
    )
    times = build_times(args.dataset)
    timed = interleaved_ms(args.dataset, [lab.question for lab in adr][:: max(1, args.every)])
    result = new_result("adr", False)
    result.update(
        dataset=args.dataset,
        n_queries=len(common),
        plane=plane,
        adr=rows["adr"],
        adr_oracle=rows["adr_oracle"],
        operator_dominates=beats,
        operator_not_dominated=undominated,
        targets=targets,
        build=times,
        interleaved_ms=timed,
        notes=notes,
    )
    print(f"{args.dataset}: {len(common)} queries (complete gold, both label files)")
    for name, m in plane.items():
        print(
            f"  {name:<20} R@5 {m['recall']:.3f}  FCR@5 {m['fcr']:.3f}  passages "
            f"{m['mean_passages']:.1f}  tokens {m['mean_tokens']:.0f}  ms {m['mean_ms']:.1f}"
        )
    print(f"  adr share {rows['adr']['share']}; oracle R@5 {rows['adr_oracle']['recall']:.3f}")
    for op, b in beats.items():
        print(f"  {op}: dominates {b or 'no existing strategy'}; "
              f"{'not ' if undominated[op] else ''}dominated by one")  # fmt: skip
    print(
        f"  targets vs always-complex: tokens {-targets['tokens_cut']:+.0%} (≤ -40%), ms "
        f"{-targets['ms_cut']:+.0%} (≤ -30%), fcr {targets['fcr_diff']:+.3f} (≥ -0.02): "
        f"{met(bool(targets['met']))}"
    )
    share = times["share_of_index"]
    print(
        f"  hypergraph build {times['hypergraph_seconds']:.0f} s vs index "
        f"{times['index_seconds']:.0f} s"
        + (f" ({share:.0%}; target ≤50%: {met(share <= 0.5)})" if share is not None else "")
    )
    mix = dense_graph_mix(plane, timed)
    result["dense_graph_mix_at_same_ms"] = mix
    for op, m in mix.items():
        print(
            f"  dense@5/graph@5 mixed at {op}'s interleaved ms ({m['graph_share']:.0%} graph): "
            f"R@5 {m['recall']:.3f}  FCR@5 {m['fcr']:.3f}  tokens {m['mean_tokens']:.0f}"
            f" -> {'beats' if m['beats'] else 'does not beat'} it on all three"
        )
    print(f"  interleaved on {timed['n']} queries, one thread, embedding included (p50 / mean ms):")
    for name, m in timed["ms"].items():
        print(f"    {name:<10} {m['p50_ms']:.1f} / {m['mean_ms']:.1f}")
    for n in notes:
        print(f"  note: {n}")
    finish(result, args.out)


if __name__ == "__main__":
    main()
