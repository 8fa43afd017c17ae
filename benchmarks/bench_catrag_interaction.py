"""Why CatRAG's tiered edges and key-fact cancel (issue 26): what each edit does to the
transition columns it touches, alone and together.

For each query (the dataset's complete-gold stored queries), the library's CatRAG
adaptation (r2adapter/retrieve/catrag.py `CatragRetriever.adapt`) is computed with
anchoring on and (a) key-fact only, (b) tiered edges only, (c) both, and each edited
column (a seed's out-transition) is read against the static one:

The columns read are those key-fact edits (the top seeds that hold a top fact's passage),
the same nodes in every arm (a column an arm leaves alone reads static there):

- `passage_share`: the column's probability of stepping to a passage node;
- `keyfact_share`: of stepping to a passage that holds one of the query's top facts (the
  passages key-fact boosts), the same set in every arm;
- `gold_share`: of stepping to a gold passage;
- `columns`: edited columns per query (all of the arm's); `both_edited`: columns that both
  edits touch.

Means per query over those columns, then over the queries. The edits are the library's
own; nothing is re-implemented.

    .venv/bin/python benchmarks/bench_catrag_interaction.py [--dataset 2wikimultihopqa] [--quick]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

if not __package__:  # `python benchmarks/...py`: put the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import arg_parser, finish, new_result, require_db  # noqa: E402

ARMS = {"keyfact": ("edges",), "edges": ("keyfact",), "both": ()}


def column_shares(
    g: Any,
    op: Any,
    columns: dict[int, tuple[np.ndarray, np.ndarray]],
    sets: dict[str, set[int]],
    nodes: list[int],
) -> dict[str, list[float]]:
    """Per node of `nodes` (the same columns in every arm), the static and the edited
    probability of stepping into each set of nodes (`passage`: every passage node); a
    column the arm does not edit reads static."""
    adj = op.adjacency
    out: dict[str, list[float]] = {}
    for u in nodes:
        lo, hi = adj.indptr[u], adj.indptr[u + 1]
        targets, w = adj.indices[lo:hi], adj.data[lo:hi]
        if w.sum() <= 0:
            continue
        static = w / w.sum()
        edited = static + columns[u][1] if u in columns else static
        masks = {"passage": targets >= g.n_entities}
        for name, nodes in sets.items():
            masks[name] = np.isin(targets, np.fromiter(nodes, dtype=np.int64, count=len(nodes)))
        for name, m in masks.items():
            out.setdefault(f"static_{name}_share", []).append(float(static[m].sum()))
            out.setdefault(f"{name}_share", []).append(float(edited[m].sum()))
    return out


def run(dataset: str, n: int | None) -> dict[str, Any]:
    from dataclasses import replace

    from r2adapter.config import graph_params
    from r2adapter.index.encoder import get_encoder
    from r2adapter.retrieve.catrag import CatragRetriever, keyfact_passages
    from r2adapter.retrieve.catrag_graph import catrag_maps
    from r2adapter.retrieve.graph import seed_graph
    from r2adapter.store.queries import stored_queries

    enc = get_encoder()
    base = replace(graph_params(), catrag_ablate=())
    queries = [q for q in stored_queries(dataset) if q.gold_complete][: n or None]
    arms = {a: CatragRetriever(dataset, enc, params=base, ablate=off) for a, off in ARMS.items()}
    first = next(iter(arms.values()))
    first.warmup()
    g = first.cache.get(dataset)
    maps = catrag_maps(g)
    pid_node = {pid: g.n_entities + i for i, pid in enumerate(g.passage_ids)}
    figures: dict[str, dict[str, list[float]]] = {a: {} for a in arms}
    for q in queries:
        qvec = enc.encode_query(q.question)
        gold = {pid_node[p] for p in q.gold_passage_ids if p in pid_node}
        found = first.anchor_candidates(g, q.question)
        per_arm: dict[str, dict[int, Any]] = {}
        kf_nodes: set[int] = set()
        for a, r in arms.items():
            seeding = seed_graph(g, qvec, r.params, None, r.fact_keeper(g, q.question))
            if not seeding.matched:
                break
            if not kf_nodes:
                kf_nodes = {p for ps in keyfact_passages(maps, g, seeding.top).values() for p in ps}
            adapted = r.adapt(g, seeding, list(found), qvec, q.question)
            per_arm[a] = adapted.columns
        if len(per_arm) < len(arms):
            continue
        # the columns key-fact edits (seeds with a top fact's passage), read in every arm
        nodes = sorted(per_arm["keyfact"])
        if not nodes:
            continue
        for a, cols in per_arm.items():
            op = g.operator(*arms[a].scales)
            sets = {"keyfact": kf_nodes, "gold": gold}
            for k, v in column_shares(g, op, cols, sets, nodes).items():
                figures[a].setdefault(k, []).append(float(np.mean(v)) if v else 0.0)
            figures[a].setdefault("columns", []).append(float(len(cols)))
        both = set(per_arm["keyfact"]) & set(per_arm["edges"])
        figures["both"].setdefault("both_edited", []).append(float(len(both)))
    return {
        "dataset": dataset,
        "queries": len(figures["both"].get("columns", [])),
        "arms": {
            a: {k: round(float(np.mean(v)), 4) for k, v in f.items() if v}
            for a, f in figures.items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__ or "", "first 40 queries", "catrag_interaction.json")
    ap.add_argument("--dataset", default="2wikimultihopqa")
    ap.add_argument("--queries", type=int, help="the first N complete-gold queries")
    args = ap.parse_args(argv)
    require_db()
    n = args.queries or (40 if args.quick else None)
    row = run(args.dataset, n)
    config = {**vars(args), "out": str(args.out)}
    result = {**new_result("catrag_interaction", args.quick), "config": config, **row}
    print(f"{row['dataset']}: {row['queries']} queries (anchoring on in every arm)")
    keys = ["columns", "passage_share", "keyfact_share", "gold_share"]
    for a, f in row["arms"].items():
        cells = ", ".join(
            f"{k} {f.get('static_' + k, float('nan')):.3f}->{f[k]:.3f}"
            if f"static_{k}" in f
            else f"{k} {f[k]:.1f}"
            for k in keys
            if k in f
        )
        print(f"  {a:<8} {cells}")
    finish(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
