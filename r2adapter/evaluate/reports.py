"""The evaluation reports as result types, like every other step's: `to_report()` is what
`r2a evaluate retrieval|routing --json` prints (reports/eval/*.json, DVC metrics) and
`metrics()` what the Kubeflow component logs. They hold the dicts that
`evaluate_retrieval` and `routing_report` build, keys untouched."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from r2adapter.data.metrics import metric_key


def _figures(prefix: str, values: Mapping[str, Any]) -> dict[str, float]:
    """The numbers among `values` (not flags, not None) as `<prefix>_<key>` metrics."""
    return {
        f"{prefix}_{metric_key(k)}": round(float(v), 6)
        for k, v in values.items()
        if isinstance(v, numbers.Real) and not isinstance(v, bool)
    }


@dataclass(frozen=True)
class RetrievalReport:
    """Dense vs graph on a dataset's complete-gold queries (`evaluate_retrieval`)."""

    figures: dict[str, Any]

    def to_report(self) -> dict[str, Any]:
        return self.figures

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for mode, m in self.figures["modes"].items():
            out.update(_figures(f"retrieval_{mode}", m))
        return out


@dataclass(frozen=True)
class RoutingReport:
    """Every router on a labelled split (`routing_report`)."""

    figures: dict[str, Any]

    def to_report(self) -> dict[str, Any]:
        return self.figures

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for router, m in self.figures["routers"].items():
            out.update(_figures(f"routing_{router}", m))
        out.update(_figures("pgr", self.figures["pgr"]))
        return out
