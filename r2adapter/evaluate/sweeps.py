"""The quality sweeps as one config: params.yaml `sweeps:` names each sweep, its kind, what it
sweeps over and its result file (r2adapter/config.py `SweepParams`); `r2a evaluate sweep
--name NAME` (DVC: `dvc repro sweep@NAME`) runs one and saves the file, which
docs/results.md renders (`make results`).

Kinds: `quality` (r2adapter/evaluate/quality_rows.py: dense and graph retrieval per dataset
× OpenIE backend, each built in a scratch Postgres) and `routing`
(r2adapter/evaluate/routing_sweep.py: every router on the test split and held-out corpora,
the τ curves and their plot, routing latency, an MLflow run). The result file keeps the
keys the two benchmark scripts they replace wrote (`benchmark`, `timestamp`, `machine`, …),
so the results page renders old and new files alike."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from r2adapter.config import settings, sweep_params
from r2adapter.errors import R2AError
from r2adapter.evaluate.results_file import loadavg, save_json
from r2adapter.evaluate.routing_report import Champion


@dataclass(frozen=True)
class SweepRun:
    name: str
    kind: str
    result: dict[str, Any]  # what the file holds
    saved: list[Path]  # the result file, and its plot where the kind draws one
    lines: list[str]  # the figures as text


def result_path(out: str) -> Path:
    """A sweep's `out`, relative to the project root unless absolute."""
    path = Path(out)
    return path if path.is_absolute() else settings().root / path


def run_sweep(name: str, r2a: Sequence[str], champion: Champion) -> SweepRun:
    """Run the sweep `name` of params.yaml and save its result file. `r2a`: the command line
    that runs `r2a` in a subprocess (the quality kind builds each index that way);
    `champion`: router kind → its champion (the routing kind's trained routers). A quality
    row that failed is saved with its reason, then reported as one line."""
    sweep = sweep_params(name)
    out = result_path(sweep.out)
    saved = [out]
    if sweep.kind == "quality":
        from r2adapter.evaluate.quality_rows import failed_rows, quality_sweep, table_lines

        result = quality_sweep(sweep, r2a, out)
        lines = table_lines(result)
    else:
        from r2adapter.evaluate.routing_sweep import log_mlflow, plot, routing_sweep
        from r2adapter.evaluate.routing_sweep import table_lines as routing_lines

        result = routing_sweep(sweep, champion)
        lines = routing_lines(result)
    result["machine"]["loadavg_1_5_15m_at_end"] = loadavg()
    save_json(out, result)
    if sweep.kind == "routing":
        saved.append(plot(result, out))
        if sweep.mlflow:
            result["mlflow_run_id"] = log_mlflow(result, saved[-1], out)
            save_json(out, result)
    if sweep.kind == "quality" and (failed := failed_rows(result)):
        raise R2AError(
            f"sweep {name}: {len(failed)} run(s) failed, first {failed[0]} (saved in {out})"
        )
    return SweepRun(name, sweep.kind, result, saved, lines)
