"""Shared helpers for the benchmark scripts: timing summaries, machine info, JSON output,
and the database check (one clear line and exit 1 when Postgres is unreachable)."""

from __future__ import annotations

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

RESULTS = Path(__file__).resolve().parent / "results"


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
        "loadavg_1_5_15m_at_start": [round(x, 2) for x in os.getloadavg()],
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
