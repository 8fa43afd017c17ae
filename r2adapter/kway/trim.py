"""Trim: how many of one strategy's passages the reader is handed, decided per query after
retrieval (issue 40).

The k-way router decides before retrieval, from the question. Under a cost the reader pays
(`cost.profile: tokens`) retrieval is a rounding error and the passages are the price, so a
second decision can wait until the rankings are in: run the fold's best strategy (`base`,
e.g. catrag+rw@5) and dense retrieval (graph retrieval scores its dense seeds anyway), and
hand the reader only the first k ∈ `kway.trim_ks` of base's passages where the two agree
that the answer is already there. What it reads (`trim_features`), no gold, no LLM:

- how much base's top 1, 2, 3 and 5 overlap dense's, and where base's first two passages sit
  in dense's ranking (agreement between a lexical-semantic and a graph ranking);
- dense retrieval's own confidence: its top cosine, the gaps to its 2nd and 5th, the top-5
  mean over the 6th-20th;
- the cosine of each of base's first five passages below dense's top one, and the steps
  between them (where base's ranking falls off);
- the question's form (`kway/features.py` `question_shape`).

One gradient-boosted classifier per k predicts "base@k recalls what base@ref does"; a query
gets the least k whose probability reaches the threshold t, else base@ref. t is chosen in the
fold like the k-way router's point (`reports/loco.py`): on every ordered pair of the training
corpora, trimmed with a model fitted on one and scored on the other, the t whose worst recall
gap against that corpus's best fixed strategy is ≥ −kway.loco_tolerance, at the least mean
cost ratio. A study until a served path exists: `r2a evaluate routing --protocol loco` reports
it as the `trim` row (docs/routing.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from r2adapter.kway.features import question_shape
from r2adapter.kway.strategies import parse_strategy

OVERLAPS = (1, 2, 3, 5)
POSITIONS = 2  # where base's first passages sit in dense's ranking
DENSE_DEPTH = 20
BASE_SCORES = 5
WIDTH = len(OVERLAPS) + POSITIONS + 4 + 2 * BASE_SCORES + len(question_shape("x"))


def trim_strategies(base: str, ks: Sequence[int]) -> list[str]:
    """The strategies a trim of `base` hands the reader: base's retriever at each k below
    base's own, then base itself (always the last)."""
    s = parse_strategy(base)
    return [f"{s.retriever}@{k}" for k in sorted({k for k in ks if k < s.k} | {s.k})]


def trim_features(
    labels: Sequence[Any], qv: np.ndarray, view: Any, base: str
) -> np.ndarray:  # fmt: skip
    """(n, WIDTH) features of each labelled query (its `rankings`, question) for trimming
    `base`'s ranking; `view` holds the corpus's passage ids and embeddings, `qv` the
    queries' embeddings."""
    retr = parse_strategy(base).retriever
    ids = {p: i for i, p in enumerate(view.passage_ids)}
    emb = np.asarray(view.passage_emb, dtype=np.float32)
    out = np.zeros((len(labels), WIDTH), dtype=np.float32)
    for lo in range(0, len(labels), 512):
        block = labels[lo : lo + 512]
        scores = (emb @ np.asarray(qv[lo : lo + len(block)], dtype=np.float32).T).T
        for i, lab in enumerate(block):
            out[lo + i] = _row(lab, scores[i], ids, retr)
    return out


def _row(lab: Any, s: np.ndarray, ids: dict[str, int], retr: str) -> np.ndarray:
    dense, ranked = list(lab.rankings["dense"]), list(lab.rankings[retr])
    top = np.sort(s)[::-1][:DENSE_DEPTH]
    floor = float(top[-1])
    f: list[float] = [len(set(ranked[:k]) & set(dense[:k])) / k for k in OVERLAPS]
    for p in ranked[:POSITIONS]:
        f.append(min(dense.index(p) if p in dense else 10, 10) / 10)
    f += [
        float(top[0]),
        float(top[0] - top[1]),
        float(top[0] - top[min(4, len(top) - 1)]),
        float(top[:5].mean() - (top[5:] if len(top) > 5 else top[-1:]).mean()),
    ]
    sb = [float(s[ids[p]]) if p in ids else floor for p in ranked[: BASE_SCORES + 1]]
    sb += [floor] * (BASE_SCORES + 1 - len(sb))
    f += [float(top[0]) - x for x in sb[:BASE_SCORES]]
    f += [sb[j] - sb[j + 1] for j in range(BASE_SCORES)]
    return np.concatenate([np.asarray(f, dtype=np.float32), question_shape(lab.question)])


def covered(m: dict[str, np.ndarray], col_k: int, col_ref: int) -> np.ndarray:
    """Per query: does base@k recall what base@ref does (the classifier's target)."""
    return (m["recall"][:, col_k] >= m["recall"][:, col_ref] - 1e-9).astype(int)


@dataclass
class Trim:
    """One classifier per k (ascending); `decide` gives each query its column in the table."""

    cols: list[int]  # the table's columns of base@k, k ascending; the last is base@ref
    models: list[Any]  # one per column but the last

    def decide(self, x: np.ndarray, t: float) -> np.ndarray:
        choice = np.full(len(x), self.cols[-1])
        for col, model in reversed(list(zip(self.cols[:-1], self.models, strict=True))):
            p = model.predict_proba(x)[:, 1] if model is not None else np.zeros(len(x))
            choice = np.where(p >= t, col, choice)
        return choice


def fit_trim(x: np.ndarray, m: dict[str, np.ndarray], cols: Sequence[int], seed: int) -> Trim:
    """A classifier per k on `x` (trim_features) and the outcome matrix `m` (the table's
    columns `cols` of base@k, k ascending, the last base@ref); a k whose target is all one
    class gets none (it is never chosen)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    models: list[Any] = []
    for col in cols[:-1]:
        y = covered(m, col, cols[-1])
        if y.min() == y.max():
            models.append(None)
            continue
        clf = HistGradientBoostingClassifier(
            max_iter=200, learning_rate=0.05, max_leaf_nodes=15, early_stopping=False,
            random_state=seed,
        )  # fmt: skip
        models.append(clf.fit(x, y))
    return Trim(list(cols), models)


@dataclass(frozen=True)
class TrimPoint:
    """The trim chosen inside a fold: its base strategy and threshold (None: no threshold
    held on the nested transfers, so base@ref is handed to every query)."""

    base: str
    threshold: float | None


def choose_base(groups: dict[str, Any], names: Sequence[str], bases: Sequence[str]) -> str:
    """The base: of `bases`, the best recall averaged over the training corpora (each
    corpus weighed alike; ties: the first)."""
    return max(bases, key=lambda b: np.mean([d.m["recall"][:, names.index(b)].mean()
                                             for d in groups.values()]))  # fmt: skip


def choose_trim(
    groups: dict[str, Any],
    names: Sequence[str],
    every: Any,
    base: str,
    features: dict[str, np.ndarray],
) -> tuple[TrimPoint, list[dict[str, Any]]]:
    """The fold's trim of `base` (`choose_base`), chosen on its training corpora alone
    (`groups`, query sets over one corpus joined; `features`: each group's trim_features of
    base): for every ordered pair (A, B), a trim fitted on A scores B at every threshold of
    `kway.trim_thresholds` against B's best fixed strategy at ≤ `kway.max_passages`, and the
    threshold is picked by the k-way point's rule (`pick_threshold`)."""
    from r2adapter.kway.transfer import _best_fixed, nested_scores

    cols = [names.index(s) for s in trim_strategies(base, every.trim_ks)]
    keys = list(groups)
    rows: list[dict[str, Any]] = []
    for a in keys:
        trim = fit_trim(features[a], groups[a].m, cols, every.seed)
        for b in (b for b in keys if b != a):
            d = groups[b]
            j = _best_fixed(d.m, every.max_passages)
            for t in every.trim_thresholds:
                ch = trim.decide(features[b], float(t))
                rows.append(
                    {"base": base, "threshold": float(t), "train": a, "transfer_to": b,
                     **nested_scores(d, ch, j, names[j])}
                )  # fmt: skip
    return TrimPoint(base, pick_threshold(rows, every.loco_tolerance)), rows


def pick_threshold(rows: Sequence[dict[str, Any]], tolerance: float) -> float | None:
    """`choose_trim`'s rule over its nested rows, the k-way point's (`transfer.pick_point`):
    of the thresholds whose worst recall gap is ≥ −tolerance, the one with the least mean
    cost ratio (ties: the better worst gap); none: None (no trim)."""
    from r2adapter.kway.transfer import mean_cost_ratio, worst_gap

    by: dict[float, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["threshold"], []).append(r)
    held = [t for t, rs in by.items() if worst_gap(rs) >= -tolerance - 1e-12]
    if not held:
        return None
    return min(held, key=lambda t: (round(mean_cost_ratio(by[t]), 6), -worst_gap(by[t]), t))
