"""Gold decompositions of a dataset's questions, and rewrites scored against them beside the
echo baselines (issues 24 and 40; the scorer is r2adapter/rewrite/score.py, the baselines
r2adapter/rewrite/echo.py).

Three sources, whichever a dataset has: a hand-checked file
`r2adapter/rewrite/gold/<dataset>_triplets.json` (`{"questions": [{"id", "question",
"triplets"}]}`; hotpotqa_dev's 50), MuSiQue's `question_decomposition` and 2Wiki's
`evidence` in the dataset's own query file. A dataset with none is scored on nothing: the
block then holds the parse rate only.

- `decomposition_scores`: the retrieval report's block, the rewrite as it ran;
- `evaluate_decomposition`: the same without an index (`r2a evaluate decomposition`): the
  questions with a gold chain, rewritten by the structural rewriter as served.

Both score echo1 and echo2 on the same questions and give, per metric, the rewriter minus
the better echo (the one with the higher figure) with its 95% paired bootstrap interval
(r2adapter/evaluate/stats.py: the per-query difference for the shares, the difference of
pooled rates for chain precision and recall).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from r2adapter.evaluate.stats import N_BOOT, SEED, paired_bootstrap, ratio_difference
from r2adapter.rewrite.echo import BASELINES
from r2adapter.rewrite.parse import Triplet
from r2adapter.rewrite.score import (
    COPY_SHARE,
    ChainScore,
    GoldChain,
    evidence_hops,
    musique_hops,
    triplet_hops,
)

GOLD_DIR = Path(__file__).resolve().parents[1] / "rewrite" / "gold"  # package data
METRICS = ("first_hop_accuracy", "chain_precision", "chain_recall", "parse_rate")


def hand_checked_path(dataset: str) -> Path:
    """The hand-checked chains shipped with the package (not under R2A_HOME, which a user
    points at their own data)."""
    return GOLD_DIR / f"{dataset}_triplets.json"


def gold_chains(dataset: str) -> tuple[dict[str, GoldChain], str]:
    """Query id → gold chain, and the source's name ("" when the dataset has none)."""
    from r2adapter.data.adapters import read_json, resolve_dataset_dir
    from r2adapter.errors import DataError

    hand = hand_checked_path(dataset)
    if hand.is_file():
        doc = json.loads(hand.read_text(encoding="utf-8"))
        rows = doc["questions"] if isinstance(doc, dict) else doc
        return {
            str(r["id"]): triplet_hops(r["triplets"], str(r.get("question", ""))) for r in rows
        }, "hand_checked"
    try:
        name, folder = resolve_dataset_dir(dataset)
        raw = read_json(folder / f"{name}.json")
    except DataError:
        return {}, ""
    out: dict[str, GoldChain] = {}
    source = ""
    for rec in raw if isinstance(raw, list) else []:
        if not isinstance(rec, dict):
            continue
        qid, question = str(rec.get("id", rec.get("_id"))), str(rec.get("question", ""))
        if rec.get("question_decomposition"):
            out[qid] = musique_hops(rec["question_decomposition"], question)
            source = "question_decomposition"
        elif rec.get("evidence"):
            out[qid] = evidence_hops(rec["evidence"], question)
            source = "evidence"
    return out, source


def datasets_with_gold() -> list[str]:
    """The shipped datasets (the data folder's) that have gold chains."""
    from r2adapter.config import settings

    root = settings().data_dir
    names = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    return [n for n in names if gold_chains(n)[0]]


def _paired(a: ChainScore, b: ChainScore, metric: str) -> dict[str, Any]:
    ra, rb = a.rows, b.rows
    if metric == "chain_precision":
        return ratio_difference(
            [r.matched for r in ra], [r.predicted for r in ra],
            [r.matched for r in rb], [r.predicted for r in rb],
        )  # fmt: skip
    if metric == "chain_recall":
        return ratio_difference(
            [r.matched for r in ra], [r.gold for r in ra],
            [r.matched for r in rb], [r.gold for r in rb],
        )  # fmt: skip
    key = {"first_hop_accuracy": "first_hop", "parse_rate": "parsed"}[metric]
    return paired_bootstrap([getattr(r, key) for r in ra], [getattr(r, key) for r in rb])


def compare(
    gold: Mapping[str, GoldChain], rewrites: Mapping[str, Sequence[Triplet]], name: str
) -> dict[str, Any]:
    """`name`'s rewrites and the echo baselines scored on the questions of `gold` that
    `rewrites` holds (an empty rewrite: unparsed): `systems` (each one's summary), `paired`
    (per metric, `name` minus the better echo: `against`, `diff`, `ci95`) and
    `parsed_by_all` (each one's summary on the questions that every system parsed)."""
    ids = [q for q in gold if q in rewrites]
    scores = {s: ChainScore() for s in (name, *BASELINES)}
    for qid in ids:
        chain = gold[qid]
        scores[name].add(list(rewrites[qid]), chain)
        for b, echo in BASELINES.items():
            scores[b].add(echo(chain.question), chain)
    systems = {s: sc.summary() for s, sc in scores.items()}
    # the questions every system parsed: what each writes where all of them write something
    both = [i for i in range(len(ids)) if all(sc.rows[i].parsed for sc in scores.values())]
    on_parsed = {s: ChainScore([sc.rows[i] for i in both]).summary() for s, sc in scores.items()}
    paired: dict[str, Any] = {}
    if ids:
        for metric in METRICS:
            better = max(BASELINES, key=lambda b: systems[b][metric])  # a tie: echo1
            paired[metric] = {"against": better, **_paired(scores[name], scores[better], metric)}
    return {"n_gold": len(ids), "systems": systems, "paired": paired, "parsed_by_all": on_parsed}


def decomposition_scores(
    dataset: str, query_ids: Sequence[str], results: Sequence[Any]
) -> dict[str, Any]:
    """`parse_rate` over every query rewritten, and over the queries with a gold chain
    `first_hop_accuracy`, `chain_precision`, `chain_recall` (r2adapter/rewrite/score.py),
    with `baselines` (echo1, echo2 on the same questions) and `paired_better_echo`;
    `results` are RewriteResults aligned with `query_ids`."""
    n = len(results)
    out: dict[str, Any] = {"parse_rate": sum(r.rewritten_ok for r in results) / n if n else 0.0}
    gold, source = gold_chains(dataset)
    rewrites = {
        qid: (list(res.triplets) if res.rewritten_ok else [])
        for qid, res in zip(query_ids, results, strict=False)
        if gold.get(qid) is not None and gold[qid].hops
    }
    if not rewrites:
        out.update(gold_source=None, n_gold=0)
        return out
    cmp = compare(gold, rewrites, "rewriter")
    s = cmp["systems"].pop("rewriter")
    out.update(
        gold_source=source,
        n_gold=s["n_scored"],
        first_hop_accuracy=s["first_hop_accuracy"],
        first_head_accuracy=s["first_head_accuracy"],
        chain_precision=s["chain_precision"],
        chain_recall=s["chain_recall"],
        parse_rate_gold=s["parse_rate"],
        baselines=cmp["systems"],
        paired_better_echo=cmp["paired"],
    )
    return out


def evaluate_decomposition(dataset: str, rewriter: Any = None) -> dict[str, Any]:
    """The structural rewriter (as served: rewrite.min_confidence; or `rewriter`, a
    Rewriter) against echo1 and echo2 on every question of `dataset` with a gold chain; no
    index needed. DataError when the dataset has no gold chain."""
    from r2adapter.errors import DataError
    from r2adapter.rewrite import Rewriter

    gold, source = gold_chains(dataset)
    gold = {q: c for q, c in gold.items() if c.hops}
    if not gold:
        raise DataError(
            f"dataset '{dataset}' has no gold decompositions: a query file with MuSiQue's "
            f"question_decomposition or 2Wiki's evidence, or {hand_checked_path(dataset)}"
        )
    rw = rewriter or Rewriter(backend="structural")
    results = {q: rw.rewrite(c.question) for q, c in gold.items()}
    rewrites = {q: (list(r.triplets) if r.rewritten_ok else []) for q, r in results.items()}
    return {
        "dataset": dataset,
        "gold_source": source,
        "rewriter": {"backend": rw.backend, "min_confidence": rw.min_confidence},
        **compare(gold, rewrites, rw.backend),
    }


def evaluate_decompositions(datasets: Sequence[str] | None = None) -> dict[str, Any]:
    """`evaluate_decomposition` on each dataset (default: every shipped one with gold
    chains), with the scorer's setting and the bootstrap's."""
    names = list(datasets) if datasets else datasets_with_gold()
    return {
        "corpora": {d: evaluate_decomposition(d) for d in names},
        "metrics": list(METRICS),
        "copy_share": COPY_SHARE,
        "bootstrap": {"seed": SEED, "n_boot": N_BOOT},
    }


def table_lines(report: Mapping[str, Any]) -> list[str]:
    """The report as a table: corpus × system × metric, then the rewriter minus the better
    echo per metric with its interval."""
    short = {"first_hop_accuracy": "first hop", "chain_precision": "precision",
             "chain_recall": "recall", "parse_rate": "parse rate"}  # fmt: skip
    lines = [f"{'corpus':<17} {'system':<11}" + "".join(f" {short[m]:>22}" for m in METRICS)]
    for corpus, r in report["corpora"].items():
        for system, s in r["systems"].items():
            lines.append(f"{corpus:<17} {system:<11}" + "".join(f" {s[m]:>22.3f}" for m in METRICS))
        cells = []
        for m in METRICS:
            diff, (lo, hi) = r["paired"][m]["diff"], r["paired"][m]["ci95"]
            cell = f"{diff:+.3f} [{lo:+.3f}, {hi:+.3f}]"
            cells.append(f" {cell:>22}")
        lines.append(f"{corpus:<17} {'- better':<11}" + "".join(cells))
        lines.append(
            f"{'':<17} {r['n_gold']} gold chains ({r['gold_source']}); the better echo: "
            + ", ".join(f"{short[m]} {r['paired'][m]['against']}" for m in METRICS)
        )
    return lines
