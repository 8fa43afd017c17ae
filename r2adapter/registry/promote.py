"""The promotion skeleton, one for every router family (r2adapter/route/family.py): compare
candidate and champion on the frozen test split and move `champion` only when the family's
gate holds. The first model becomes champion; a candidate the family says replaces the
champion (another operating point, not a rival) does so without a comparison."""

from __future__ import annotations

from dataclasses import dataclass

from r2adapter.data.metrics import metric_key
from r2adapter.registry.models import candidate_of, client, version_by_alias
from r2adapter.route.family import RouterFamily


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


def promote(family: RouterFamily, dataset: str | None = None) -> PromoteResult:
    """Gate `family`'s candidate against its champion on the frozen test split of `dataset`
    (else the candidate's `dataset` tag); `champion` moves to it when the gate holds."""
    cand_v, dataset = candidate_of(family.model, dataset, family.train_command)
    champ_v = version_by_alias(family.model, "champion")
    cand, _ = family.load("candidate")
    split = family.test_split(dataset, cand, dict(cand_v.tags))
    cand_m = family.figures(cand, split)
    champ_m = None
    if champ_v is not None and champ_v.version == cand_v.version:
        ok, reasons, champ_m = False, ["the candidate is already champion"], cand_m
    elif champ_v is None:
        ok, reasons = True, ["no champion yet: the first model becomes champion"]
    else:
        champ, _ = family.load("champion")
        why = family.replaces(cand, champ)
        if why is not None:
            ok, reasons = True, [why]
        else:
            champ_m = family.figures(champ, split)
            ok, reasons = family.gate(cand_m, champ_m)
            if ok and not reasons:
                reasons = [family.passed]
    if ok:
        client().set_registered_model_alias(family.model, "champion", cand_v.version)
    before = champ_v.version if champ_v else None
    return PromoteResult(family.name, ok, cand_v.version, before, reasons, cand_m, champ_m)
