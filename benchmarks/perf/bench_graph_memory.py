"""Memory of loading a graph: the estimate `graph_memory.py` refuses a graph by, against the
peak RSS of a fresh process around `load_graph_index` (one subprocess per indexed corpus).

    .venv/bin/python -m benchmarks.perf.bench_graph_memory            # every indexed corpus
    .venv/bin/python -m benchmarks.perf.bench_graph_memory --quick    # HotpotQA only
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.lib.common import (
    arg_parser,
    die,
    finish,
    indexed_datasets,
    new_result,
    require_db,
)

DATASETS = ("hotpotqa", "musique", "2wikimultihopqa")


def measure(dataset: str) -> dict[str, Any]:
    """In this (fresh) process: RSS before, peak RSS of the load, the estimate."""
    import gc
    import resource
    import time

    import psutil

    from r2adapter.config import GraphParams
    from r2adapter.retrieve import graph_index
    from r2adapter.retrieve import graph_memory as gm
    from r2adapter.store import graph_store as gs

    v = gs.require_version(dataset)
    gc.collect()
    rss0 = psutil.Process().memory_info().rss
    t = time.perf_counter()
    graph_index.load_graph_index(v, GraphParams(load_memory_limit_gb=1e6))
    load_s = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    size = gm.GraphSize.of(v)
    parts = gm.estimate_bytes(size, "exact")
    measured, estimate = peak - rss0, sum(parts.values())
    return {
        "index_version": v.id,
        "nodes": size.nodes,
        "edges": size.edges,
        "facts": size.facts,
        "load_s": load_s,
        "peak_mb": measured / 1e6,
        "estimate_mb": estimate / 1e6,
        "estimate_over_peak": estimate / measured,
        "estimate_parts_mb": {k: b / 1e6 for k, b in parts.items()},
        "local_ppr_mb": gm.estimate_bytes(size, "local")["local PPR"] / 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__, "HotpotQA only", "graph_memory.json")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # the child's dataset
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one)))
        return 0
    require_db()
    datasets, skipped = indexed_datasets(None, DATASETS[:1] if args.quick else DATASETS)
    result = new_result("graph_memory", args.quick)
    result.update({"skipped": skipped, "datasets": {}})
    for d in datasets:
        r = subprocess.run(  # a fresh process each: the peak RSS of one load
            [sys.executable, "-m", "benchmarks.perf.bench_graph_memory", "--one", d],
            cwd=Path(__file__).resolve().parents[2],
            capture_output=True,
            text=True,
            check=False,
        )
        if r.returncode:
            die(f"{d}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
        row = json.loads(r.stdout.strip().splitlines()[-1])
        result["datasets"][d] = row
        print(
            f"{d}: {row['nodes']:,} nodes, {row['edges']:,} edges: load {row['load_s']:.1f} s, "
            f"peak {row['peak_mb']:.0f} MB, estimate {row['estimate_mb']:.0f} MB "
            f"({row['estimate_over_peak']:.2f}x)"
        )
    finish(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
