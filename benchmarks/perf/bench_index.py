"""Indexing throughput per stage, and the caches, for a dataset and an OpenIE backend.

Per dataset, into a scratch Postgres (r2adapter/evaluate/scratch_db.py), `r2a index --dataset D
--openie B --report F` is run as a user runs it (a fresh process each time, so the wall
time includes Python start-up, imports and the encoder load), with the project's
params.yaml (copied into the scratch R2A_HOME: ADR's hypergraph is built, as in `make run`;
before, the scratch home had none and every parameter took its default, ADR off):
  1. cold: an empty database;
  2. warm: again on the same database: it should add nothing (no passages, embeddings,
     OpenIE rows or index version: the OpenIE cache by passage hash, the embeddings by
     encoder and text, and the build signature) and take seconds;
  3. rebuild (scratch databases only; --no-rebuild skips it): the dataset's index versions
     deleted, then built again: every cache hit, so only the graph work is left (parts,
     synonym kNN, write), as when a graph parameter changes.
The per-stage seconds are the build's own (`--report`, timed in r2adapter/index/build.py,
not re-instrumented here): load (corpus into Postgres), encoder_load, passage_embeddings,
openie, entity_embeddings (includes building the graph parts from the extractions),
fact_embeddings, synonyms (entity kNN), adr (ADR's hypergraph: its insight and narrative
embeddings, communities), write (the version's rows, one transaction). OpenIE runs in a
process of its own beside the passage embeddings (r2adapter/index/build.py): `openie` is
then what the build waited for it after them, `openie_process` the process's own seconds.
Throughput per stage is passages / seconds, and items / seconds for what the stage made
(new rows counted in the database before and after: passage embeddings, OpenIE cache rows,
entity and fact embeddings, graph rows written).

    .venv/bin/python -m benchmarks.perf.bench_index                    # musique and hotpotqa, spacy
    .venv/bin/python -m benchmarks.perf.bench_index --quick            # the sample (3 passages)
    .venv/bin/python -m benchmarks.perf.bench_index --dataset 2wikimultihopqa --merge
        # 2Wiki, 6,119 passages, spaCy: the target is <= 6 min end to end (cold) on 2 cores;
        # adds its entry to index_throughput.json

Other runs on the same machine move the figures: the load average is saved per run.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from tqdm import tqdm

from benchmarks.lib.common import R2A, RESULTS, die
from r2adapter.evaluate.results_file import machine_info, save_json, timestamp
from r2adapter.evaluate.scratch_db import (
    BenchError,
    Database,
    add_db_args,
    data_dir,
    database,
    earlier_runs,
    previous_result,
    run_r2a,
)
from r2adapter.index.openie import OPENIE_BACKENDS

DEFAULT_DATASETS = ("musique", "hotpotqa")
QUICK_DATASETS = ("sample",)
TARGET_DATASET = "2wikimultihopqa"
TARGET_END_TO_END_S = 360.0  # 2Wiki, spaCy, cold, on the 2-core machine
# stage in the build's timings -> what its items are, and the database count they come from
STAGES: dict[str, tuple[str, str]] = {
    "openie": ("OpenIE extraction", "openie_cache"),
    "passage_embeddings": ("passage embeddings", "passage_embeddings"),
    "entity_embeddings": ("entity embeddings", "entity_embeddings"),
    "fact_embeddings": ("fact embeddings", "fact_embeddings"),
    "synonyms": ("synonym kNN (entities searched)", "entities"),
    "adr": ("ADR hypergraph (insight and narrative embeddings)", "adr_embeddings"),
    "write": ("graph write/commit (rows)", "graph_rows"),
}
PROJECT_MIN_PASSAGES = 500  # smaller runs are mostly fixed costs: no 2Wiki projection
GRAPH_TABLES = ("entities", "facts", "fact_passages", "passage_entities", "synonym_edges")


def db_counts(url: str, dataset: str) -> dict[str, int]:
    """Rows in the tables the build fills (zeros before the first migration)."""
    import psycopg

    q = {
        "passages": ("SELECT count(*) FROM passages WHERE dataset = %s", (dataset,)),
        "passage_embeddings": (
            "SELECT count(*) FROM passage_embeddings WHERE dataset = %s",
            (dataset,),
        ),
        "openie_cache": ("SELECT count(*) FROM openie_cache", ()),
        "entity_embeddings": ("SELECT count(*) FROM text_embeddings WHERE kind = 'entity'", ()),
        "fact_embeddings": ("SELECT count(*) FROM text_embeddings WHERE kind = 'fact'", ()),
        "adr_embeddings": (
            "SELECT count(*) FROM text_embeddings WHERE kind IN ('insight', 'narrative')",
            (),
        ),
        "index_versions": ("SELECT count(*) FROM index_versions WHERE dataset = %s", (dataset,)),
    }
    out: dict[str, int] = {}
    with psycopg.connect(url, connect_timeout=5, autocommit=True) as conn:
        for name, (sql, params) in q.items():
            try:
                row = conn.execute(sql, params).fetchone()  # type: ignore[arg-type]
                out[name] = int(row[0]) if row else 0
            except psycopg.errors.UndefinedTable:
                out[name] = 0
    return out


def graph_rows(url: str, version: int) -> dict[str, int]:
    import psycopg

    with psycopg.connect(url, connect_timeout=5) as conn:
        return {
            t: int(
                conn.execute(
                    f"SELECT count(*) FROM {t} WHERE index_version = %s",  # noqa: S608 - fixed names
                    (version,),
                ).fetchone()[0]  # type: ignore[index]
            )
            for t in GRAPH_TABLES
        }


def index_once(db: Database, dataset: str, backend: str, timeout: float) -> dict[str, Any]:
    """One `r2a index` process: its report, wall time and what it added to the database."""
    from r2adapter.data.adapters import dataset_name

    before = db_counts(db.url, dataset_name(dataset))
    with tempfile.TemporaryDirectory(prefix="r2a-bench-report-") as tmp:
        path = Path(tmp) / "index.json"
        run = run_r2a(
            R2A,
            ["index", "--dataset", dataset, "--openie", backend, "--report", str(path)],
            db.env,
            timeout,
        )
        report = json.loads(path.read_text())
    after = db_counts(db.url, dataset_name(dataset))
    added = {k: after[k] - before[k] for k in after}
    rows = graph_rows(db.url, int(report["version"])) if report["created"] else {}
    added["graph_rows"] = sum(rows.values())
    searched = int(report.get("entities", 0)) if report["created"] else 0
    seconds = {
        k.removeprefix("seconds_"): float(v) for k, v in report.items() if k.startswith("seconds_")
    }
    n = int(report.get("passages", 0))
    stages: dict[str, dict[str, Any]] = {}
    for stage, (what, item_key) in STAGES.items():
        if stage not in seconds:  # an up-to-date index stops before the graph stages
            continue
        s = seconds[stage]
        items = searched if item_key == "entities" else added.get(item_key, 0)
        stages[stage] = {
            "what": what,
            "seconds": s,
            "passages_per_s": n / s if s > 0 else None,
            "items": items,
            "items_per_s": items / s if s > 0 and items else None,
        }
    return {
        "wall_s": run.wall_s,
        "in_process_total_s": seconds.get("total", sum(seconds.values())),
        "process_overhead_s": run.wall_s - seconds.get("total", sum(seconds.values())),
        "created": bool(report["created"]),
        "stages": stages,
        "added": added,
        "graph_rows_by_table": rows,
        "report": report,
    }


def bench_dataset(
    dataset: str,
    backend: str,
    db_mode: str,
    scratch_root: Path | None,
    keep: bool,
    rebuild: bool,
    timeout: float,
) -> dict[str, Any]:
    from r2adapter.data.adapters import dataset_name

    name = dataset_name(dataset)  # `dataset` may be a folder path
    out: dict[str, Any] = {
        "dataset": name,
        "backend": backend,
        "timestamp": timestamp(),
        "loadavg_1_5_15m_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    with database(
        R2A, db_mode, scratch_root, f"{name}-{backend}-index", keep, project_params=True
    ) as db:
        out["database"] = db.where
        out["cold"] = index_once(db, dataset, backend, timeout)
        out["passages"] = int(out["cold"]["report"].get("passages", 0))
        out["warm"] = index_once(db, dataset, backend, timeout)
        if rebuild and db.scratch:
            import psycopg

            with psycopg.connect(db.url) as conn:
                conn.execute("DELETE FROM index_versions WHERE dataset = %s", (name,))
            out["rebuild"] = index_once(db, dataset, backend, timeout)
    out["loadavg_1_5_15m_at_end"] = [round(x, 2) for x in os.getloadavg()]
    cold, warm = out["cold"], out["warm"]
    nothing_added = all(v == 0 for v in warm["added"].values())
    out["cache"] = {
        "cold_created": cold["created"],
        "warm_created": warm["created"],
        "warm_added_nothing": nothing_added,
        "warm_wall_s": warm["wall_s"],
        "warm_in_process_s": warm["in_process_total_s"],
        "cold_over_warm_wall": cold["wall_s"] / warm["wall_s"] if warm["wall_s"] else None,
        "ok": cold["created"] and not warm["created"] and nothing_added,
    }
    if not cold["created"]:
        out["cache"]["note"] = "the first run found the index up to date (not a cold database)"
    n = out["passages"]
    if name == TARGET_DATASET:
        out["target"] = {
            "end_to_end_s": TARGET_END_TO_END_S,
            "cold_wall_s": cold["wall_s"],
            "met": cold["wall_s"] <= TARGET_END_TO_END_S,
        }
    elif n >= PROJECT_MIN_PASSAGES and cold["created"]:
        # linear in passages: the per-passage seconds of each stage times 2Wiki's passages,
        # plus this run's fixed costs (start-up, encoder load); corpora differ in entities
        # and facts per passage, so this is a rough guide, not a measurement
        per_passage = sum(st["seconds"] for st in cold["stages"].values()) / n
        fixed = cold["process_overhead_s"] + cold["report"].get("seconds_encoder_load", 0.0)
        out["projected_2wiki_cold_s"] = fixed + per_passage * passages_of(TARGET_DATASET)
    return out


def passages_of(dataset: str) -> int:
    from r2adapter.data.adapters import load_dataset

    return len(load_dataset(dataset).passages)


def _rate(st: dict[str, Any] | None, items: bool = False) -> str:
    if st is None:
        return "-"
    if not st["items"]:  # nothing new: the stage only looked its inputs up in the caches
        return f"{st['seconds']:.1f} (cached)"
    r = st["items_per_s"] if items else st["passages_per_s"]
    return f"{st['seconds']:.1f} ({r:,.0f}/s)" if r else f"{st['seconds']:.1f}"


def table(runs: dict[str, dict[str, Any]]) -> str:
    head = (
        "| dataset | openie | run | passages | wall s | openie s (passages/s) "
        "| passage emb s (passages/s) | entity emb s (entities/s) | fact emb s (facts/s) "
        "| synonyms s (entities/s) | adr s (texts/s) | write s (rows/s) | added |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in runs.values():
        for kind in ("cold", "warm", "rebuild"):
            if kind not in r:
                continue
            x, st = r[kind], r[kind]["stages"]
            added = ", ".join(f"{k} {v:,}" for k, v in x["added"].items() if v) or "nothing"
            lines.append(
                f"| {r['dataset']} | {r['backend']} | {kind} | {r['passages']:,} "
                f"| {x['wall_s']:.1f} | {_rate(st.get('openie'))} "
                f"| {_rate(st.get('passage_embeddings'))} "
                f"| {_rate(st.get('entity_embeddings'), True)} "
                f"| {_rate(st.get('fact_embeddings'), True)} "
                f"| {_rate(st.get('synonyms'), True)} | {_rate(st.get('adr'), True)} "
                f"| {_rate(st.get('write'), True)} "
                f"| {added} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--dataset",
        action="append",
        help=f"a dataset name or folder (repeatable); default {', '.join(DEFAULT_DATASETS)} "
        f"(--quick: {', '.join(QUICK_DATASETS)})",
    )
    ap.add_argument("--openie", default="spacy", choices=list(OPENIE_BACKENDS))
    ap.add_argument("--quick", action="store_true", help="the 3-passage sample")
    ap.add_argument("--no-rebuild", action="store_true", help="skip the rebuild from caches")
    add_db_args(ap)
    ap.add_argument("--merge", action="store_true", help="keep --out's entries not run now")
    ap.add_argument("--out", type=Path, default=RESULTS / "index_throughput.json")
    args = ap.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if not data_dir().is_dir():
        die(f"no datasets at {data_dir()}: run `make data`")
    datasets = list(
        dict.fromkeys(args.dataset or (QUICK_DATASETS if args.quick else DEFAULT_DATASETS))
    )
    if args.scratch_dir:
        args.scratch_dir.mkdir(parents=True, exist_ok=True)

    result: dict[str, Any] = {
        "benchmark": "index_throughput",
        "timestamp": timestamp(),
        "quick": args.quick,
        "machine": machine_info(),
        "db": args.db,
        "targets": {f"{TARGET_DATASET}_spacy_cold_end_to_end_s": TARGET_END_TO_END_S},
        "timing_notes": "wall_s: the `r2a index` process end to end; stages[].seconds: the "
        "build's own timings (--report); entity_embeddings includes building the graph "
        "parts; items: rows the stage added, counted in the database",
        "runs": {},
        "failed": {},
    }
    if args.merge and (old := previous_result(args.out)):
        # each run carries its own timestamp and load average; earlier_runs keeps the headers
        result["runs"].update(old.get("runs", {}))
        result["earlier_runs"] = earlier_runs(old)
    for ds in tqdm(datasets, desc=f"index ({args.openie})", unit="dataset"):
        from r2adapter.data.adapters import dataset_name

        key = f"{dataset_name(ds)}/{args.openie}"
        try:
            result["runs"][key] = bench_dataset(
                ds,
                args.openie,
                args.db,
                args.scratch_dir,
                args.keep,
                not args.no_rebuild,
                args.timeout,
            )
        except BenchError as e:
            result["failed"][key] = str(e)
            result["runs"].pop(key, None)
            print(f"error: {key}: {e}")
    result["machine"]["loadavg_1_5_15m_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print()
    print(table(result["runs"]))
    for key, r in result["runs"].items():
        c = r["cache"]
        print(
            f"{key}: warm run {c['warm_wall_s']:.1f} s "
            f"({'added nothing' if c['warm_added_nothing'] else 'ADDED ROWS'}, "
            f"{'no new version' if not c['warm_created'] else 'NEW VERSION'})"
            + (
                f"; 2Wiki cold projected {r['projected_2wiki_cold_s']:.0f} s "
                f"(target {TARGET_END_TO_END_S:.0f})"
                if "projected_2wiki_cold_s" in r
                else ""
            )
            + (
                f"; target {TARGET_END_TO_END_S:.0f} s: "
                f"{'met' if r['target']['met'] else 'MISSED'} ({r['cold']['wall_s']:.0f} s)"
                if "target" in r
                else ""
            )
        )
    print(f"saved {save_json(args.out, result)}")
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
