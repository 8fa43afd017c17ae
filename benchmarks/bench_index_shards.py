"""The sharded index build (issue 18, part 4): 1 shard against N, from cold caches.

For each shard count, into its own fresh scratch Postgres (benchmarks/scratch_db.py: cold
caches, a fresh R2A_HOME), `r2a index --dataset D --openie B --shards N --report F` runs as
a user runs it (a fresh process: the wall time includes start-up, the encoder loads and,
for N > 1, the spawned shard processes and the merge). Then the indexes are compared row
for row: passages, entities, facts, fact–passage and passage–entity edges, synonym edges
(the same pairs; scores within 1e-5, since the shards embed in other batches).

    .venv/bin/python benchmarks/bench_index_shards.py                 # MuSiQue, spaCy, 1 vs 2
    .venv/bin/python benchmarks/bench_index_shards.py --quick         # the 3-passage sample
    .venv/bin/python benchmarks/bench_index_shards.py --wait-load 2.5 # wait (≤ 15 min) for a
                                                                      # quieter machine first

Target (issue 18): 2 shards on 2 cores at least 1.6x faster than 1, the indexes equal.
The cores are the limit, so other work on the machine lowers the ratio: the load average
is saved before and after each run.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if not __package__:  # `python benchmarks/bench_index_shards.py`: the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import arg_parser, die, finish, loadavg, met, new_result  # noqa: E402
from benchmarks.scratch_db import BenchError, add_db_args, data_dir, database, run_r2a  # noqa: E402
from r2adapter.index.openie import OPENIE_BACKENDS  # noqa: E402

TARGET_SPEEDUP = 1.6  # 2 shards vs 1 on 2 cores
SCORE_TOL = 1e-5
TABLES = {
    "passages": "SELECT id FROM passages WHERE dataset = %(ds)s ORDER BY id",
    "entities": "SELECT id, name FROM entities WHERE index_version = %(v)s ORDER BY id",
    "facts": "SELECT id, subject_id, relation, object_id, weight FROM facts"
    " WHERE index_version = %(v)s ORDER BY id",
    "fact_passages": "SELECT fact_id, passage_id FROM fact_passages"
    " WHERE index_version = %(v)s ORDER BY 1, 2",
    "passage_entities": "SELECT passage_id, entity_id FROM passage_entities"
    " WHERE index_version = %(v)s ORDER BY 1, 2",
    "synonym_edges": "SELECT a, b, score FROM synonym_edges WHERE index_version = %(v)s"
    " ORDER BY 1, 2",
}


def index_rows(url: str, dataset: str, version: int) -> dict[str, list[tuple[Any, ...]]]:
    import psycopg

    with psycopg.connect(url, connect_timeout=5) as conn:
        return {
            t: conn.execute(q, {"ds": dataset, "v": version}).fetchall()  # type: ignore[arg-type]
            for t, q in TABLES.items()
        }


def compare(a: dict[str, list[Any]], b: dict[str, list[Any]]) -> dict[str, Any]:
    """Per table: equal or not (synonym scores within SCORE_TOL), and the row counts."""
    out: dict[str, Any] = {}
    for t in TABLES:
        if t == "synonym_edges":
            same_pairs = [r[:2] for r in a[t]] == [r[:2] for r in b[t]]
            worst = max((abs(x[2] - y[2]) for x, y in zip(a[t], b[t], strict=False)), default=0.0)
            out[t] = {
                "equal": same_pairs and worst <= SCORE_TOL,
                "max_score_diff": worst,
                "rows": [len(a[t]), len(b[t])],
            }
        else:
            out[t] = {"equal": a[t] == b[t], "rows": [len(a[t]), len(b[t])]}
    out["all_equal"] = all(v["equal"] for v in out.values())
    return out


def build(args: Any, shards: int) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """One cold `r2a index --shards N` in a fresh scratch database: figures and rows."""
    from r2adapter.data.adapters import dataset_name

    name = dataset_name(args.dataset)
    run: dict[str, Any] = {"shards": shards, "loadavg_1_5_15m_at_start": loadavg()}
    with (
        database(args.db, args.scratch_dir, f"{name}-shards{shards}", args.keep) as db,
        tempfile.TemporaryDirectory(prefix="r2a-bench-shards-") as tmp,
    ):
        report = Path(tmp) / "index.json"
        cmd = ["index", "--dataset", args.dataset, "--openie", args.openie]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = run_r2a([*cmd, "--shards", str(shards), "--report", str(report)], db.env, args.timeout)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        rep = json.loads(report.read_text())
        run["wall_s"] = r.wall_s
        # CPU of the r2a process and every process it waited for (the shards): what the
        # build costs whatever else runs; wall / CPU is the cores it had on average
        run["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        run["cores_used"] = run["cpu_s"] / r.wall_s
        run["loadavg_1_5_15m_at_end"] = loadavg()
        run["version"] = rep["version"]
        run["created"] = rep["created"]
        run["counts"] = {k: v for k, v in rep.items() if isinstance(v, int) and k != "version"}
        run["seconds"] = {k[8:]: v for k, v in rep.items() if k.startswith("seconds_")}
        run["shard_lines"] = [ln for ln in r.stdout.splitlines() if ln.startswith("shard ")]
        rows = index_rows(db.url, name, int(rep["version"]))
    return run, rows


def wait_for_load(limit: float, max_wait_s: float) -> dict[str, Any]:
    t0 = time.monotonic()
    while os.getloadavg()[0] >= limit and time.monotonic() - t0 < max_wait_s:
        print(f"load {os.getloadavg()[0]:.2f} >= {limit}: waiting", file=sys.stderr)
        time.sleep(30)
    return {"limit": limit, "waited_s": round(time.monotonic() - t0), "load_now": loadavg()}


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__, "the 3-passage sample dataset", "index_shards.json")
    ap.add_argument("--dataset", default="musique")
    ap.add_argument("--openie", default="spacy", choices=list(OPENIE_BACKENDS))
    ap.add_argument("--shards", default="1,2", help="shard counts, the first is the baseline")
    ap.add_argument("--wait-load", type=float, help="first wait until the 1-min load is below")
    ap.add_argument("--wait-max", type=float, default=900, help="seconds to wait at most")
    add_db_args(ap)
    args = ap.parse_args(argv)
    if args.quick:
        args.dataset = "sample"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if not data_dir().is_dir():
        die(f"no datasets at {data_dir()}: run `make data`")
    counts = [int(x) for x in args.shards.split(",")]
    result = new_result("index_shards", args.quick, cores=os.cpu_count())
    result.update(
        {"dataset": args.dataset, "openie": args.openie, "target_speedup": TARGET_SPEEDUP}
    )
    if args.wait_load:
        result["wait"] = wait_for_load(args.wait_load, args.wait_max)
    runs: dict[int, dict[str, Any]] = {}
    rows: dict[int, dict[str, list[Any]]] = {}
    try:
        for n in counts:
            runs[n], rows[n] = build(args, n)
            r = runs[n]
            print(f"{n} shard(s): {r['wall_s']:.1f} s (load {r['loadavg_1_5_15m_at_start']})")
    except BenchError as e:
        die(str(e))
    base = counts[0]
    result["runs"] = {str(n): r for n, r in runs.items()}
    result["speedup"] = {str(n): runs[base]["wall_s"] / runs[n]["wall_s"] for n in counts[1:]}
    result["equal_to_baseline"] = {str(n): compare(rows[base], rows[n]) for n in counts[1:]}
    print("| shards | wall s | speed-up | CPU s | cores used | index equal | load at start |")
    print("|---|---|---|---|---|---|---|")
    for n in counts:
        eq = "baseline" if n == base else str(result["equal_to_baseline"][str(n)]["all_equal"])
        r = runs[n]
        sp = runs[base]["wall_s"] / r["wall_s"]
        print(
            f"| {n} | {r['wall_s']:.1f} | {sp:.2f}x | {r['cpu_s']:.0f} | {r['cores_used']:.2f} "
            f"| {eq} | {r['loadavg_1_5_15m_at_start']} |"
        )
    if 2 in runs and base == 1:
        s = result["speedup"]["2"]
        result["target_met"] = s >= TARGET_SPEEDUP and result["equal_to_baseline"]["2"]["all_equal"]
        print(f"2 shards vs 1: {s:.2f}x (target {TARGET_SPEEDUP}x: {met(result['target_met'])})")
    finish(result, args.out)
    print(
        json.dumps(
            {
                "speedup": result["speedup"],
                "equal": {k: v["all_equal"] for k, v in result["equal_to_baseline"].items()},
            }
        )
    )
    return 0 if all(v["all_equal"] for v in result["equal_to_baseline"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
