"""What a saved result file starts with and how it is written: the time stamp, the machine
(CPU, versions, the load average: these 2-core machines are shared, so figures are compared
as ratios taken in one run), latency summaries, and the JSON written whole or not at all.
The sweeps (r2adapter/evaluate/sweeps.py) and the benchmarks (benchmarks/) share them."""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np


def pct(values: Sequence[float] | np.ndarray, q: float) -> float:
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


def save_json(path: Path, payload: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
    tmp.replace(path)
    return path
