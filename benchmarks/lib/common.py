"""Shared helpers for the benchmark scripts: the command line every script has (--quick,
--out, the champion's dataset), the results file (its header and the load average at the
end, from r2adapter/evaluate/results_file.py, which also holds the timing summaries), and
the database check (one clear line and exit 1 when Postgres is unreachable)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from r2adapter.config import DEFAULT_DATASET
from r2adapter.evaluate.results_file import loadavg, machine_info, save_json, timestamp
from r2adapter.route.kinds import TRAINED_ROUTERS

RESULTS = Path(__file__).resolve().parents[1] / "results"
R2A = [sys.executable, "-m", "r2adapter.cli"]  # `r2a` in a subprocess, as this checkout's
FALLBACK_DATASET = DEFAULT_DATASET  # what the service serves when nothing says otherwise
ROUTERS = tuple(TRAINED_ROUTERS)


def met(ok: bool) -> str:
    return "met" if ok else "MISSED"


# -- the command line -----------------------------------------------------------------------


def arg_parser(doc: str, quick: str, out: str, full_doc: bool = False) -> argparse.ArgumentParser:
    """A script's parser with the options they all have: --quick (`quick`: what it shortens)
    and --out (default results/`out`). The description is the docstring's first paragraph,
    or all of it as written with `full_doc`."""
    ap = argparse.ArgumentParser(
        description=doc if full_doc else doc.split("\n\n")[0],
        formatter_class=argparse.RawTextHelpFormatter if full_doc else argparse.HelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help=quick)
    ap.add_argument("--out", type=Path, default=RESULTS / out, help="the JSON results file")
    return ap


def add_champion_args(ap: argparse.ArgumentParser, dataset: str) -> None:
    """--dataset (`dataset` says what it is used for) and --router, for the scripts that
    measure the champion router on the dataset the service serves."""
    ap.add_argument(
        "--dataset",
        help=f"{dataset} (default: R2A_SERVE_DATASET, else the champion's dataset tag, "
        f"else {FALLBACK_DATASET})",
    )
    ap.add_argument("--router", default="r2a", choices=ROUTERS)


def default_dataset(kind: str = "r2a") -> str:
    """The dataset the service would serve: R2A_SERVE_DATASET, else the champion's
    `dataset` tag, else 2wikimultihopqa."""
    env = os.environ.get("R2A_SERVE_DATASET")
    if env:
        return env
    try:
        from r2adapter.registry.models import alias_version

        v = alias_version(kind, "champion")
    except Exception:
        v = None
    tag = v.tags.get("dataset") if v is not None else None
    return str(tag) if tag else FALLBACK_DATASET


def champion_dataset(requested: str | None, kind: str) -> str:
    """The requested dataset, else `default_dataset`; exit 1 when it is not indexed."""
    dataset = requested or default_dataset(kind)
    indexed_datasets([dataset], [])
    return dataset


# -- the results file -----------------------------------------------------------------------


def new_result(benchmark: str, quick: bool, **machine: Any) -> dict[str, Any]:
    """The fields every results file starts with; `machine` adds to (or replaces entries
    of) `machine_info()`."""
    return {
        "benchmark": benchmark,
        "timestamp": timestamp(),
        "quick": quick,
        "machine": {**machine_info(), **machine},
    }


def finish(result: dict[str, Any], out: Path) -> Path:
    """Record and print the load average at the end, save the results, say where."""
    result.setdefault("machine", {})["loadavg_1_5_15m_at_end"] = loadavg()
    print(f"load average (1, 5, 15 min) at the end: {result['machine']['loadavg_1_5_15m_at_end']}")
    path = save_json(out, result)
    print(f"saved {path}")
    return path


def require_db() -> None:
    """Exit 1 with one line when the database cannot be reached."""
    from r2adapter.errors import R2AError
    from r2adapter.store.db import connection

    pool_log = logging.getLogger("psycopg.pool")  # one warning per failed connection attempt
    level = pool_log.level
    pool_log.setLevel(logging.CRITICAL)
    try:
        with connection() as conn:
            conn.execute("SELECT 1")
    except R2AError as e:
        die(str(e))
    finally:
        pool_log.setLevel(level)


def require_champion(kind: str = "r2a") -> None:
    """Exit 1 with one line when the registry has no `kind` champion (a service without
    one never gets ready: a benchmark would wait out its whole start-up timeout)."""
    from r2adapter.registry.models import alias_version

    if alias_version(kind, "champion") is None:
        die(f"no {kind} champion in the registry: run `r2a train` and `r2a promote` (or make run)")


def die(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(1)


def indexed_datasets(
    requested: Sequence[str] | None, defaults: Sequence[str]
) -> tuple[list[str], dict[str, str]]:
    """Datasets to benchmark: the requested ones (exit 1 if one is not indexed) or every
    indexed dataset among the defaults; the skipped ones with the reason."""
    from r2adapter.store.graph_store import latest_version

    if requested:
        missing = [d for d in requested if latest_version(d) is None]
        if missing:
            die(
                f"dataset(s) not indexed: {', '.join(missing)}: run `r2a index --dataset "
                f"{missing[0]}` first"
            )
        return list(requested), {}
    found, skipped = [], {}
    for d in defaults:
        if latest_version(d) is None:
            skipped[d] = f"not indexed (run `r2a index --dataset {d}`)"
            print(f"note: skipping '{d}': {skipped[d]}")
        else:
            found.append(d)
    return found, skipped
