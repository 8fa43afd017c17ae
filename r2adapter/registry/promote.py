"""The promotion gate: compare candidate and champion on the frozen test split and move
`champion` only when the gate holds. The first model becomes champion."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from r2adapter.config import label_params, router_params
from r2adapter.evaluate.metrics import metric_key
from r2adapter.evaluate.routing import routing_metrics
from r2adapter.label.annotate import db_labels
from r2adapter.registry.models import (
    Gate,
    alias_version,
    candidate_of,
    client,
    load_router,
    model_name,
)


@dataclass
class PromoteResult:
    kind: str
    promoted: bool
    candidate: str
    champion_before: str | None
    reasons: list[str]
    candidate_metrics: dict[str, float]
    champion_metrics: dict[str, float] | None

    def to_report(self) -> dict[str, object]:
        """reports/promote/<router>.json (a DVC metric): these keys, in this order."""
        return {
            "router": self.kind,
            "promoted": self.promoted,
            "candidate": self.candidate,
            "champion_before": self.champion_before,
            "reasons": self.reasons,
            "candidate_metrics": self.candidate_metrics,
            "champion_metrics": self.champion_metrics,
        }

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {
            "promoted": int(self.promoted),
            "candidate_version": int(self.candidate),
            "champion_before_version": int(self.champion_before or 0),
        }
        for who, m in (("candidate", self.candidate_metrics), ("champion", self.champion_metrics)):
            out.update({f"{who}_{metric_key(k)}": round(v, 6) for k, v in (m or {}).items()})
        return out


def promote(
    kind: str = "r2a", dataset: str | None = None, gate: Gate | None = None
) -> PromoteResult:
    gate = gate or Gate(max_graph_usage=router_params().max_graph_usage)
    cand_v, dataset = candidate_of(model_name(kind), dataset, "r2a train")
    rule = cand_v.tags.get("label_rule", label_params().rule)
    test = db_labels(dataset, rule, "test")
    questions = [r.question for r in test]
    cand, _ = load_router(kind, "candidate")
    cand.bind(dataset)
    cand_m = routing_metrics(np.asarray(cand.route(questions)), test)
    champ_v = alias_version(kind, "champion")
    if champ_v is not None and champ_v.version == cand_v.version:
        return PromoteResult(
            kind,
            False,
            cand_v.version,
            champ_v.version,
            ["the candidate is already champion"],
            cand_m,
            cand_m,
        )
    champ_m = None
    if champ_v is None:
        ok, reasons = True, ["no champion yet: the first model becomes champion"]
    else:
        champ, _ = load_router(kind, "champion")
        champ.bind(dataset)
        champ_m = routing_metrics(np.asarray(champ.route(questions)), test)
        ok, reasons = gate.check(cand_m, champ_m)
        if ok and not reasons:
            reasons = ["not worse on hybrid R@5, graph F1 and graph usage"]
    if ok:
        client().set_registered_model_alias(model_name(kind), "champion", cand_v.version)
    return PromoteResult(
        kind, ok, cand_v.version, champ_v.version if champ_v else None, reasons, cand_m, champ_m
    )
