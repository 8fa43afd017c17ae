"""The promotion skeleton, one for every router family (r2adapter/route/family.py): compare
candidate and champion on the frozen test split and move `champion` only when the family's
gate holds. The first model becomes champion; a candidate the family says replaces the
champion (another operating point, not a rival) does so without a comparison."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from r2adapter.data.metrics import metric_key
from r2adapter.errors import R2AError
from r2adapter.registry.models import candidate_of, client, version_by_alias
from r2adapter.route.family import RouterFamily

RECALL_TOLERANCE = 0.005  # a candidate's recall may drop at most this much
COST_TOLERANCE = 0.05  # its mean cost, ms and passages may rise at most this share


def gate(cand: Mapping[str, float], champ: Mapping[str, float]) -> tuple[bool, list[str]]:
    """The cost gate the k-way router and ADR share: recall within RECALL_TOLERANCE of the
    champion's, each cost figure within COST_TOLERANCE of it."""
    why = []
    if cand["recall"] < champ["recall"] - RECALL_TOLERANCE:
        why.append(f"recall {cand['recall']:.3f} < champion {champ['recall']:.3f}")
    for k in ("mean_cost", "mean_ms", "mean_passages"):
        if k not in cand or k not in champ:
            continue  # a champion from before a figure was recorded is not judged on it
        if cand[k] > champ[k] * (1 + COST_TOLERANCE):
            why.append(f"{k} {cand[k]:.2f} > champion {champ[k]:.2f}")
    return not why, why


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
            "candidate": int(self.candidate),  # MLflow's version numbers
            "champion_before": int(self.champion_before) if self.champion_before else None,
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


MOVE_TRIES = 3  # the champion moved under a run this often: stop (one line) rather than loop


def promote(family: RouterFamily, dataset: str | None = None) -> PromoteResult:
    """Gate `family`'s candidate against its champion on the frozen test split of `dataset`
    (else the candidate's `dataset` tag); `champion` moves to it when the gate holds.

    A compare-and-set: the candidate's version is read once and that version is loaded,
    gated and moved; the champion is read again, under a lock, right before the alias
    moves. When another run moved it meanwhile, the candidate is gated again against the
    new champion, unless the new one is the newer version: then this run stops in one line,
    so that two overlapping runs never leave an older version as champion (issue 44, item 3)."""
    cand_v, dataset = candidate_of(family.model, dataset, family.train_command)
    candidate = str(cand_v.version)
    champ_v = version_by_alias(family.model, "champion")
    gated = str(champ_v.version) if champ_v is not None else None
    cand, _ = family.load("candidate", version=candidate)
    split = family.test_split(dataset, cand, dict(cand_v.tags))
    cand_m = family.figures(cand, split)
    for _ in range(MOVE_TRIES):
        ok, reasons, champ_m = _judge(family, cand, cand_m, split, candidate, gated)
        if not ok:
            return PromoteResult(family.name, False, candidate, gated, reasons, cand_m, champ_m)
        now = _move_champion(family.model, gated, candidate)
        if now == gated:
            return PromoteResult(family.name, True, candidate, gated, reasons, cand_m, champ_m)
        if now is not None and int(now) > int(candidate):
            raise R2AError(
                f"{family.model}: champion moved from v{gated} to the newer v{now} while this "
                f"run gated candidate v{candidate}: nothing promoted"
            )
        gated = now  # another run moved it to an older version (or removed it): gate again
    raise R2AError(
        f"{family.model}: the champion moved {MOVE_TRIES} times while candidate v{candidate} "
        "was gated: nothing promoted; run `r2a promote` again"
    )


def _judge(
    family: RouterFamily, cand: Any, cand_m: dict[str, float], split: Any, candidate: str,
    champion: str | None,
) -> tuple[bool, list[str], dict[str, float] | None]:  # fmt: skip
    """Whether `candidate` (loaded as `cand`, figures `cand_m`) replaces `champion`, why,
    and the champion's figures."""
    if champion == candidate:
        return False, ["the candidate is already champion"], cand_m
    if champion is None:
        return True, ["no champion yet: the first model becomes champion"], None
    champ, _ = family.load("champion", version=champion)
    why = family.replaces(cand, champ)
    if why is not None:
        return True, [why], None
    champ_m = family.figures(champ, split)
    ok, reasons = family.gate(cand_m, champ_m)
    return ok, reasons if reasons or not ok else [family.passed], champ_m


def _move_champion(model: str, expected: str | None, candidate: str) -> str | None:
    """Move `model`'s champion alias to `candidate` if it is still `expected`; the champion
    found (== `expected`: moved)."""
    with promotion_lock(model):
        v = version_by_alias(model, "champion")
        now = str(v.version) if v is not None else None
        if now == expected:
            client().set_registered_model_alias(model, "champion", candidate)
        return now


@contextmanager
def promotion_lock(model: str) -> Iterator[None]:
    """`model`'s alias moves one at a time, on any machine sharing the database (every
    promotion reads its test split there): a Postgres advisory lock, released with the
    transaction (and by the server when the process dies)."""
    from r2adapter.store.db import connection

    with connection() as conn:
        conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"r2a-promote:{model}",)
        )
        yield
