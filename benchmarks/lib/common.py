"""Shared helpers for the benchmark scripts: timing summaries, machine info, the command
line every script has (--quick, --out, the champion's dataset), the results file (its
header, the load average at the end, JSON output), and the database check (one clear line
and exit 1 when Postgres is unreachable)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from r2adapter.config import DEFAULT_DATASET
from r2adapter.route.kinds import TRAINED_ROUTERS

RESULTS = Path(__file__).resolve().parents[1] / "results"
FALLBACK_DATASET = DEFAULT_DATASET  # what the service serves when nothing says otherwise
ROUTERS = tuple(TRAINED_ROUTERS)


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if len(values) else 0.0


def summary_ms(values_ms: Sequence[float]) -> dict[str, float]:
    """p50/p95/mean/min of a latency sample, in milliseconds."""
    v = np.asarray(values_ms, dtype=np.float64)
    if v.size == 0:
        return {"n": 0}
    return {
        "n": int(v.size),
        "p50_ms": pct(v, 50),
        "p95_ms": pct(v, 95),
        "mean_ms": float(v.mean()),
        "min_ms": float(v.min()),
    }


def machine_info() -> dict[str, Any]:
    import scipy

    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": _cpu_model(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        # other work on the machine skews absolute figures; ratios are taken in the same run
        "loadavg_1_5_15m_at_start": loadavg(),
    }
    try:
        import igraph

        info["igraph"] = igraph.__version__
    except ImportError:
        pass
    return info


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def timestamp() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


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


def save_json(path: Path, payload: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
    tmp.replace(path)
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
