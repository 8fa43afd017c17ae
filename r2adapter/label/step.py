"""The label step in two halves: `rank_shard` (r2adapter.label.annotate: both retrievers'
rankings of shard i of n, the expensive part a pipeline fans out) and `label_from_rankings`
(both rules labelled and stored, the chosen one exported — the file DVC tracks — and its
statistics saved like the paper's tables). `run_label` is one shard of one, then the rest."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from r2adapter.config import label_params, settings
from r2adapter.data.metrics import metric_key, recall_at_k
from r2adapter.errors import R2AError
from r2adapter.label.annotate import (
    LabelRecord,
    Rankings,
    export_labels,
    label_file,
    label_rankings,
    rank_shard,
    store_labels,
)
from r2adapter.label.rules import RULES
from r2adapter.label.stats import label_stats


@dataclass
class LabelResult:
    dataset: str
    rule: str
    path: Path
    md5: str
    records: list[LabelRecord]
    stats: dict[str, object]
    rule_comparison: dict[str, dict[str, float]]

    def to_report(self) -> dict[str, object]:
        """The statistics, as saved (label_paths: reports/labels/<dataset>.json, a DVC
        metric, for a shipped dataset)."""
        return dict(self.stats)

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {"labels": len(self.records)}
        for split in ("train", "val", "test"):
            out[f"{split}_samples"] = sum(r.split == split for r in self.records)
        for rule, m in self.rule_comparison.items():
            out.update({f"{rule}_{metric_key(k)}": round(v, 6) for k, v in m.items()})
        return out


def label_paths(dataset: str) -> tuple[Path, Path]:
    """The label file and its statistics. A shipped dataset's statistics are the pipeline's
    DVC metric, reports/labels/<dataset>.json, in git; any other dataset's (a folder given by
    path) go beside its labels, labels/<dataset>.stats.json, which git ignores: a label run on
    a folder left an untracked report in the checkout (issue 44, item 15)."""
    from r2adapter.data.adapters import shipped_source

    path = label_file(dataset)
    if shipped_source(dataset) is None:
        return path, path.with_name(f"{dataset}.stats.json")
    return path, settings().root / "reports" / "labels" / f"{dataset}.json"


def oracle_recall(records: list[LabelRecord], k: int) -> float:
    return float(
        np.mean(
            [
                recall_at_k(r.graph_top if r.preference == "graph" else r.dense_top, r.gold, k)
                for r in records
            ]
        )
    )


def compare_rules(by_rule: dict[str, list[LabelRecord]]) -> dict[str, dict[str, float]]:
    out = {}
    for rule, recs in by_rule.items():
        out[rule] = {
            "oracle_recall@2": oracle_recall(recs, 2),
            "oracle_recall@5": oracle_recall(recs, 5),
            "graph_preference": float(np.mean([r.preference == "graph" for r in recs])),
            "dense_recall@2": float(np.mean([recall_at_k(r.dense_top, r.gold, 2) for r in recs])),
            "dense_recall@5": float(np.mean([recall_at_k(r.dense_top, r.gold, 5) for r in recs])),
            "graph_recall@5": float(np.mean([recall_at_k(r.graph_top, r.gold, 5) for r in recs])),
        }
    return out


def label_from_rankings(dataset: str, rankings: Rankings, rule: str | None = None) -> LabelResult:
    """Label every ranked query with each rule, store all of them in Postgres (evaluation
    can use any), export the chosen rule's file and save its statistics."""
    p = label_params()
    rule = rule or p.rule
    if rule not in RULES:
        raise R2AError(f"unknown label rule '{rule}': choose one of {', '.join(RULES)}")
    by_rule = {name: label_rankings(rankings, name, p) for name in RULES}
    for recs in by_rule.values():
        store_labels(dataset, recs, rankings.index_version)
    records = by_rule[rule]
    path, stats_path = label_paths(dataset)
    md5 = export_labels(path, records)
    comparison = compare_rules(by_rule)
    stats = {
        "dataset": dataset,
        "rule": rule,
        "index_version": rankings.index_version,
        "label_md5": md5,
        **label_stats(records, p.top_k),
        "rule_comparison": comparison,
    }
    stats_path.parent.mkdir(parents=True, exist_ok=True)
    stats_path.write_text(json.dumps(stats, indent=2) + "\n")
    return LabelResult(dataset, rule, path, md5, records, stats, comparison)


def run_label(dataset: str, rule: str | None = None) -> LabelResult:
    """`r2a label`'s two-way half: every query ranked in this process (shard 0 of 1), then
    labelled. The families' own labels (k-way strategies, ADR's operators) are written by
    their floors: r2adapter/steps.py `label` runs them after this."""
    if rule is not None and rule not in RULES:  # before the expensive half
        raise R2AError(f"unknown label rule '{rule}': choose one of {', '.join(RULES)}")
    return label_from_rankings(dataset, rank_shard(dataset, 0, 1), rule)
