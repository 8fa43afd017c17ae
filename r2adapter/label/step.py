"""The label step: rankings once, both label rules compared, the chosen one stored and
exported (the file DVC tracks), statistics saved like the paper's tables."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from r2adapter.config import label_params, settings
from r2adapter.evaluate.metrics import recall_at_k
from r2adapter.label.annotate import (
    LabelRecord,
    export_labels,
    label_rankings,
    rank_queries,
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


def label_paths(dataset: str) -> tuple[Path, Path]:
    root = settings().root
    return root / "labels" / f"{dataset}.jsonl", root / "reports" / "labels" / f"{dataset}.json"


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


def run_label(dataset: str, rule: str | None = None) -> LabelResult:
    p = label_params()
    rule = rule or p.rule
    rankings = rank_queries(dataset, p.depth)
    by_rule = {name: label_rankings(rankings, name, p) for name in RULES}
    for recs in by_rule.values():  # both rules stored: evaluation can use either
        store_labels(dataset, recs, rankings.index_version)
    records = by_rule[rule]
    path, stats_path = label_paths(dataset)
    md5 = export_labels(path, records)
    stats = {
        "dataset": dataset,
        "rule": rule,
        "index_version": rankings.index_version,
        "label_md5": md5,
        **label_stats(records, p.top_k),
        "rule_comparison": compare_rules(by_rule),
    }
    stats_path.parent.mkdir(parents=True, exist_ok=True)
    stats_path.write_text(json.dumps(stats, indent=2) + "\n")
    return LabelResult(dataset, rule, path, md5, records, stats, stats["rule_comparison"])
