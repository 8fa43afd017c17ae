"""Gold decompositions of a dataset's questions, and the rewrite's scores against them
(issue 24; the scorer is r2adapter/rewrite/score.py).

Two sources, whichever a dataset has: MuSiQue's `question_decomposition` in the dataset's
own query file, and a hand-checked file `r2adapter/rewrite/gold/<dataset>_triplets.json`
(`{"questions": [{"id", "question", "triplets"}]}`; hotpotqa_dev's 50). A dataset with
neither is scored on nothing: the block then holds the parse rate only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from r2adapter.rewrite.score import ChainScore, GoldHop, musique_hops, triplet_hops

GOLD_DIR = Path(__file__).resolve().parents[1] / "rewrite" / "gold"  # package data


def hand_checked_path(dataset: str) -> Path:
    """The hand-checked chains shipped with the package (not under R2A_HOME, which a user
    points at their own data)."""
    return GOLD_DIR / f"{dataset}_triplets.json"


def gold_chains(dataset: str) -> tuple[dict[str, list[GoldHop]], str]:
    """Query id → gold hops, and the source's name ("" when the dataset has none)."""
    from r2adapter.data.adapters import read_json, resolve_dataset_dir
    from r2adapter.errors import DataError

    hand = hand_checked_path(dataset)
    if hand.is_file():
        doc = json.loads(hand.read_text(encoding="utf-8"))
        rows = doc["questions"] if isinstance(doc, dict) else doc
        return {str(r["id"]): triplet_hops(r["triplets"]) for r in rows}, "hand_checked"
    try:
        name, folder = resolve_dataset_dir(dataset)
        raw = read_json(folder / f"{name}.json")
    except DataError:
        return {}, ""
    out: dict[str, list[GoldHop]] = {}
    if isinstance(raw, list):
        for rec in raw:
            if isinstance(rec, dict) and rec.get("question_decomposition"):
                out[str(rec.get("id", rec.get("_id")))] = musique_hops(
                    rec["question_decomposition"]
                )
    return out, ("question_decomposition" if out else "")


def decomposition_scores(
    dataset: str, query_ids: Sequence[str], results: Sequence[Any]
) -> dict[str, Any]:
    """`parse_rate` over every query rewritten, and over the queries with a gold chain
    `first_hop_accuracy`, `chain_precision`, `chain_recall` (r2adapter/rewrite/score.py);
    `results` are RewriteResults aligned with `query_ids`."""
    n = len(results)
    out: dict[str, Any] = {"parse_rate": sum(r.rewritten_ok for r in results) / n if n else 0.0}
    gold, source = gold_chains(dataset)
    score = ChainScore()
    for qid, res in zip(query_ids, results, strict=False):
        hops = gold.get(qid)
        if hops:
            score.add(list(res.triplets) if res.rewritten_ok else [], hops)
    if score.n:
        s = score.summary()
        out.update(
            gold_source=source,
            n_gold=s["n_scored"],
            first_hop_accuracy=s["first_hop_accuracy"],
            chain_precision=s["chain_precision"],
            chain_recall=s["chain_recall"],
            parse_rate_gold=s["parse_rate"],
        )
    else:
        out.update(gold_source=None, n_gold=0)
    return out
