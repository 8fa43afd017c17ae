"""One small headline file per DVC stage, two to six numbers read from the stage's full
reports: reports/metrics/<stage>.json, or reports/metrics/<stage>/<item>.json for a stage
repeated per item (train@r2a: reports/metrics/train/minilm.json). dvc.yaml declares
these as the stages' `metrics:`, so `dvc metrics show` prints a table a person can read and
`dvc metrics diff` / `dvc exp show` compare them; the full reports stay the stages' outputs.
`r2a headline STAGE [ITEM]` writes one: each stage's command ends with it, and it runs as
well on the reports a checkout already holds. (validate's own report, reports/validate/
<dataset>.json, is already five numbers: it is that stage's headline.)"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from r2adapter.errors import R2AError

DIGITS = 4  # decimals kept: dvc metrics show prints five significant digits


@dataclass(frozen=True)
class Headline:
    """`sources`: name → report path (`{item}` the stage's item); `fields`: headline key →
    `<source>.<dotted path>` into that report, where `{name}` is the report's own top-level
    string (the label report's `rule`, the routing report's `dataset`). A field the report
    lacks (a first promotion has no champion's figures) is left out."""

    sources: Mapping[str, str]
    fields: Mapping[str, str]
    per_item: bool = False  # a `foreach` stage: one file per item


HEADLINES: dict[str, Headline] = {
    "index": Headline(
        {"index": "reports/index/{item}.json"},
        {
            "passages": "index.passages",
            "facts": "index.facts",
            "seconds": "index.seconds_total",
        },
    ),
    "label": Headline(
        {"labels": "reports/labels/{item}.json"},
        {
            "queries": "labels.table1.total",
            "graph_preference_pct": "labels.table1.preference_graph_pct",
            "oracle_recall@5": "labels.rule_comparison.{rule}.oracle_recall@5",
        },
    ),
    "corpora": Headline(
        {"index": "reports/index/{item}.json", "labels": "reports/labels/{item}.json"},
        {
            "passages": "index.passages",
            "facts": "index.facts",
            "queries": "labels.table1.total",
            "graph_preference_pct": "labels.table1.preference_graph_pct",
            "oracle_recall@5": "labels.rule_comparison.{rule}.oracle_recall@5",
        },
        per_item=True,
    ),
    "train": Headline(
        {"train": "reports/train/{item}.json"},
        {
            "recall@5": "train.test_recall@5",
            "graph_usage": "train.test_graph_usage",
            "f1_graph": "train.test_f1_graph",
            "tau": "train.tau",
            "test_size": "train.test_n",
            "seconds": "train.seconds",
        },
        per_item=True,
    ),
    "promote": Headline(
        {"promote": "reports/promote/{item}.json"},
        {
            "promoted": "promote.promoted",
            "recall@5": "promote.candidate_metrics.recall@5",
            "graph_usage": "promote.candidate_metrics.graph_usage",
            "champion_recall@5": "promote.champion_metrics.recall@5",
        },
        per_item=True,
    ),
    "train_kway": Headline(
        {"train": "reports/train/kway.json"},
        {
            "recall": "train.test_recall",
            "fcr": "train.test_fcr",
            "mean_ms": "train.test_mean_ms",
            "seconds": "train.seconds",
        },
    ),
    "promote_kway": Headline(
        {"promote": "reports/promote/kway.json"},
        {
            "promoted": "promote.promoted",
            "recall": "promote.candidate_metrics.recall",
            "mean_ms": "promote.candidate_metrics.mean_ms",
            "champion_recall": "promote.champion_metrics.recall",
        },
    ),
    "train_adr": Headline(
        {"train": "reports/train/adr.json"},
        {
            "recall": "train.test_recall",
            "fcr": "train.test_fcr",
            "mean_tokens": "train.test_mean_tokens",
            "gamma": "train.gamma",
            "seconds": "train.seconds",
        },
    ),
    "promote_adr": Headline(
        {"promote": "reports/promote/adr.json"},
        {
            "promoted": "promote.promoted",
            "recall": "promote.candidate_metrics.recall",
            "mean_tokens": "promote.candidate_metrics.mean_tokens",
            "champion_recall": "promote.champion_metrics.recall",
        },
    ),
    "evaluate": Headline(
        {
            "retrieval": "reports/eval/retrieval.json",
            "routing": "reports/eval/routing.json",
            "corpora": "reports/eval/corpora.json",
        },
        {
            # the r2a champion's (the loop's first router) on the test split, as train's
            "recall@5": "routing.routers.r2a.recall@5",
            "graph_usage": "routing.routers.r2a.graph_usage",
            "oracle_recall@5": "routing.routers.oracle.recall@5",
            "test_size": "routing.n_queries",
            "kway_loco_recall": "corpora.corpora.{dataset}.rows.kway_loco.recall",
        },
    ),
}


def _lookup(data: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        if not isinstance(data, Mapping) or key not in data:
            return None
        data = data[key]
    return data


def pick(headline: Headline, reports: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """The headline's numbers from the stage's reports (source name → its JSON)."""
    names = {k: v for r in reports.values() for k, v in r.items() if isinstance(v, str)}
    out: dict[str, float] = {}
    for key, field in headline.fields.items():
        source, dotted = field.split(".", 1)
        value = _lookup(reports.get(source), dotted.format(**names))
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, int | float):
            out[key] = round(value, DIGITS) if isinstance(value, float) else value
    return out


def headline_path(stage: str, item: str | None = None) -> Path:
    """reports/metrics/<stage>.json, or <stage>/<item>.json for a per-item stage."""
    h = _headline(stage)
    if h.per_item and not item:
        raise R2AError(f"{stage} is one stage per item: name it (`r2a headline {stage} ITEM`)")
    return Path("reports/metrics") / (f"{stage}/{item}.json" if h.per_item else f"{stage}.json")


def read_headline(root: Path, stage: str, item: str | None = None) -> tuple[Path, dict[str, float]]:
    """The stage's headline file (relative to `root`, the project) and its numbers, from the
    stage's reports under `root`. `item`: a per-item stage's item; the others read params.yaml
    pipeline.dataset's reports."""
    from r2adapter.config import pipeline_dataset

    h = _headline(stage)
    out = headline_path(stage, item)
    item = item if h.per_item else pipeline_dataset()
    reports = {}
    for name, template in h.sources.items():
        path = template.format(item=item)
        if not (root / path).is_file():
            raise R2AError(f"{stage}: no {path}: run the stage first")
        try:
            reports[name] = json.loads((root / path).read_text())
        except json.JSONDecodeError as e:
            raise R2AError(f"{path}: not JSON ({e.msg}, line {e.lineno})") from e
    return out, pick(h, reports)


def write_headline(
    root: Path, stage: str, item: str | None = None
) -> tuple[Path, dict[str, float]]:
    """`read_headline`, written to its file under `root`."""
    out, figures = read_headline(root, stage, item)
    path = root / out
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(figures, indent=2) + "\n")
    tmp.replace(path)  # never a half-written metric
    return out, figures


def _headline(stage: str) -> Headline:
    if stage not in HEADLINES:
        raise R2AError(f"no headline for stage {stage!r}: choose among {', '.join(HEADLINES)}")
    return HEADLINES[stage]
