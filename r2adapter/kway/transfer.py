"""The k-way router's transfer between corpora (issue 24): its training on the union of other
corpora (`read_corpora`, `corpus_groups`: a corpus and the query sets over its passages are
one group), the nested transfers between the training corpora that choose its operating
point and margin (`choose_point`, `nested_margin`) without reading the held-out corpus, and
the served point `KwayFamily.fit` trains at (`served_point`). The leave-one-corpus-out
report that compares it with every fixed strategy and the other families is
r2adapter/reports/loco.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from r2adapter.config import KwayParams, kway_params
from r2adapter.evaluate.routing_report import (
    columns,
    cost_of,
    with_two_way,
)
from r2adapter.kway.evaluate import _embed, _features, _fit, calibrate_kway
from r2adapter.kway.labels import outcome_matrix, read_strategy_labels, strategy_label_path
from r2adapter.kway.strategies import strategy_table
from r2adapter.label.corpora import corpus_key, outside_fold, served_union


def training_corpora(held_out: str, corpora: Sequence[str] | None = None) -> list[str]:
    """The corpora a leave-one-out router trains on: those given, else the served union
    (the pipeline's dataset and `kway.train_corpora`: `label/corpora.py` `served_union`),
    those with strategy labels, less the held-out corpus and every query set over the same
    passages (`outside_fold`)."""
    names = list(corpora or served_union(kway_params().train_corpora))
    return outside_fold(held_out, names, strategy_label_path)


@dataclass
class _Corpus:
    """One labelled corpus read for a leave-one-out report: its labels, outcome matrix over
    the whole table, query embeddings, features (on its own graph) and splits."""

    labels: list[Any]
    m: dict[str, np.ndarray]
    qv: np.ndarray
    x: np.ndarray
    splits: np.ndarray

    def rows(self, keep: np.ndarray) -> _Corpus:
        """The same corpus on the rows `keep` only."""
        return _Corpus(
            [self.labels[i] for i in keep],
            {k: v[keep] for k, v in self.m.items()},
            self.qv[keep],
            self.x[keep],
            self.splits[keep],
        )


def _read(
    c: str,
    p_eval: KwayParams,
    table: Sequence[Any],
    features: Sequence[str],
    profile: str | None = None,
) -> _Corpus:
    labels = read_strategy_labels(c, p_eval)
    qv = _embed(labels)
    x = _features(c, features, labels, qv)
    return _Corpus(
        labels,
        outcome_matrix(labels, table, profile),
        qv,
        x,
        np.array([lb.split for lb in labels]),
    )


def read_corpora(
    corpora: Sequence[str], every: KwayParams, profile: str | None = None
) -> tuple[list[str], list[Any], dict[str, _Corpus]]:
    """The strategy table's names (every labelled strategy and the two-way routers'), the
    table, and each corpus read over it, priced under the cost profile `profile`."""
    names = with_two_way(every.strategies)
    table = strategy_table(names)
    p_eval = kway_params(strategies=tuple(names), budget=every.budget)
    return names, table, {c: _read(c, p_eval, table, every.features, profile) for c in corpora}


def corpus_groups(corpora: Sequence[str], data: dict[str, _Corpus]) -> dict[str, _Corpus]:
    """The training corpora as one entry per stored corpus: query sets over the same
    passages (2Wiki and 2wiki_mixed) joined, a query asked in both counted once."""
    by_key: dict[str, list[str]] = {}
    for c in corpora:
        by_key.setdefault(corpus_key(c) or c, []).append(c)
    out: dict[str, _Corpus] = {}
    for members in by_key.values():
        members = sorted(members, key=lambda c: -len(data[c].labels))
        seen: set[str] = set()
        parts = []
        for c in members:
            d = data[c]
            keep = np.array(
                [i for i, lab in enumerate(d.labels) if lab.query_id not in seen], dtype=int
            )
            seen.update(lab.query_id for lab in d.labels)
            parts.append(d.rows(keep))
        out["+".join(members)] = _concat(parts)
    return out


def _concat(parts: Sequence[_Corpus]) -> _Corpus:
    if len(parts) == 1:
        return parts[0]
    m0 = parts[0].m
    return _Corpus(
        [lab for d in parts for lab in d.labels],
        {k: np.concatenate([d.m[k] for d in parts]) for k in m0},
        np.vstack([d.qv for d in parts]),
        np.vstack([d.x for d in parts]),
        np.concatenate([d.splits for d in parts]),
    )


def _train(data: Sequence[_Corpus], cols: list[int], tk: list[Any], p: KwayParams, name: str):
    """Heads on every corpus's train split, thresholds on every one's val split."""
    x = np.vstack([d.x for d in data])
    ms = [columns(d.m, cols) for d in data]
    m = {k: np.concatenate([mm[k] for mm in ms]) for k in ms[0]}
    sp = np.concatenate([d.splits for d in data])
    tr, va = np.where(sp == "train")[0], np.where(sp == "val")[0]
    return _fit(x, m, tr, va, tk, p, name), len(tr), len(va)


def _transfer(router: Any, d: _Corpus, cols: list[int], p: KwayParams, notes: list[str]):
    """Label-free: priced at the corpus's own strategy ms (timed without gold)."""
    mk = columns(d.m, cols)
    return calibrate_kway(router, d.x, p.budget, p, notes, mk["ms"].mean(0), mk["passages"].mean(0))


def _choice(kr: Any, x: np.ndarray, margin: float, cols: list[int]) -> np.ndarray:
    tau = np.clip(kr.tau + margin, 0.0, 1.0)
    return np.array([cols[c] for c in kr.choose(x, tau)])


def _best_fixed(m: dict[str, np.ndarray], passages: float) -> int:
    """The best fixed strategy handing the reader no more passages (ties: the cheaper
    under the matrix's cost profile)."""
    rec, ms, ps = m["recall"].mean(0), cost_of(m).mean(0), m["passages"].mean(0)
    fair = np.where(ps <= passages + 0.01)[0]
    return int(fair[np.lexsort((ms[fair], -rec[fair]))[0]])


@dataclass(frozen=True)
class Point:
    """An operating point chosen inside a fold: the route, its budget, the margin, and the
    transfer rule (`kway.transfer`)."""

    route: tuple[str, ...]
    budget: float
    margin: float
    transfer: str = ""  # "": params.yaml kway.transfer


def candidate_points(every: KwayParams) -> list[tuple[tuple[str, ...], float]]:
    """(route, budget) pairs `kway.route_candidates` × `kway.budget_candidates` (none named:
    the quality point of params.yaml alone)."""
    routes = [tuple(x.strip() for x in r.split(",") if x.strip()) for r in every.route_candidates]
    if not routes:
        routes = [every.quality_route or every.route or every.strategies]
        return [(routes[0], every.quality_budget if every.quality_route else every.budget)]
    return [(r, b) for r in routes for b in every.budget_candidates]


def quality_point(every: KwayParams) -> Point:
    """params.yaml's quality point (`kway.quality_route` at `quality_budget`, no margin,
    `kway.transfer`), chosen on the union's folds before any fold choice existed: what a
    fold without nested evidence falls back on. Without a quality route, the first
    candidate."""
    if every.quality_route:
        return Point(tuple(every.quality_route), every.quality_budget, 0.0, every.transfer)
    route, budget = candidate_points(every)[0]
    return Point(route, budget, 0.0, every.transfer)


def choose_point(
    groups: dict[str, _Corpus],
    names: Sequence[str],
    table: Sequence[Any],
    every: KwayParams,
) -> tuple[Point, list[dict[str, Any]]]:
    """The `kway` row's route, budget and margin, chosen on the training corpora alone:
    for every candidate (route, budget) and every ordered pair (A, B) of the training
    corpora (query sets over one corpus joined: `corpus_groups`), a router trained on A is
    transferred label-free to B and scored on B's labels at every margin of
    `kway.quality_margins`, against B's best fixed strategy at ≤ `kway.max_passages`
    passages. A point holds when its worst recall gap is ≥ −`kway.loco_tolerance`; among
    those, the least mean cost ratio (ties: the better worst gap); when none holds, the
    best worst gap. A fold of one training corpus has no nested transfer to choose on: it
    takes params.yaml's quality point (`quality_point`), not a candidate that nothing has
    tested."""
    cands = candidate_points(every)
    transfers = list(every.transfer_candidates) or [every.transfer]
    keys = list(groups)
    if len(keys) < 2:
        return quality_point(every), []
    rows: list[dict[str, Any]] = []
    for route, budget in cands:
        p = replace(every, route=route, budget=budget).routed()
        cols = [names.index(s) for s in p.strategies]
        tk = [table[j] for j in cols]
        for a in keys:
            router, _, _ = _train([groups[a]], cols, tk, p, a)
            for b, rule in ((b, t) for b in keys if b != a for t in transfers):
                d = groups[b]
                kr = _transfer(router, d, cols, replace(p, transfer=rule), [])
                j = _best_fixed(d.m, every.max_passages)
                for delta in every.quality_margins:
                    ch = _choice(kr, d.x, float(delta), cols)
                    rows.append(
                        {
                            "route": list(route),
                            "budget": budget,
                            "transfer": rule,
                            "margin": float(delta),
                            "train": a,
                            "transfer_to": b,
                            **nested_scores(d, ch, j, table[j].name),
                        }
                    )
    return pick_point(rows, every.loco_tolerance), rows


def nested_scores(d: _Corpus, choice: np.ndarray, best: int, best_name: str) -> dict[str, Any]:
    """One nested transfer's figures on corpus `d`: the recall and mean cost of `choice`
    (a strategy column per query), and its best fixed strategy's (column `best`)."""
    cost = cost_of(d.m)
    rr = np.arange(len(d.labels))
    return {
        "recall": float(d.m["recall"][rr, choice].mean()),
        "mean_cost": float(cost[rr, choice].mean()),
        "mean_passages": float(d.m["passages"][rr, choice].mean()),
        "best_fixed": best_name,
        "best_fixed_recall": float(d.m["recall"][:, best].mean()),
        "best_fixed_cost": float(cost[:, best].mean()),
    }


def worst_gap(rows: Sequence[dict[str, Any]]) -> float:
    """The worst recall gap of nested rows against their best fixed strategies."""
    return round(min(r["recall"] - r["best_fixed_recall"] for r in rows), 9)


def mean_cost_ratio(rows: Sequence[dict[str, Any]]) -> float:
    """The mean cost ratio of nested rows against their best fixed strategies."""
    return float(np.mean([r["mean_cost"] / max(r["best_fixed_cost"], 1e-12) for r in rows]))


def pick_point(rows: Sequence[dict[str, Any]], tolerance: float) -> Point:
    """`choose_point`'s rule over its nested rows."""
    by: dict[tuple[tuple[str, ...], float, float, str], list[dict[str, Any]]] = {}
    for r in rows:
        key = (tuple(r["route"]), r["budget"], r["margin"], r.get("transfer", ""))
        by.setdefault(key, []).append(r)
    holds = [k for k, rs in by.items() if worst_gap(rs) >= -tolerance - 1e-12]
    if holds:
        key = min(holds, key=lambda k: (round(mean_cost_ratio(by[k]), 6), -worst_gap(by[k]), k[2]))
    else:
        key = max(by, key=lambda k: (worst_gap(by[k]), -mean_cost_ratio(by[k]), -k[2]))
    return Point(key[0], key[1], key[2], key[3])


def nested_margin(
    names: Sequence[str],
    margins: Sequence[float],
    data: dict[str, _Corpus],
    cols: list[int],
    tk: list[Any],
    p: KwayParams,
) -> tuple[float, list[dict[str, Any]]]:
    """The quality point's margin chosen without the held-out corpus: for every ordered pair
    (A, B) of the training corpora, a router trained on A alone is transferred label-free
    to B and every margin of `kway.quality_margins` scored on B's labels; the margin by
    `pick_margin`: the least worst recall shortfall against B's best fixed
    strategy among the margins within its mean ms on every pair."""
    if len(names) < 2:
        return 0.0, []
    rows: list[dict[str, Any]] = []
    for a in names:
        router, _, _ = _train([data[a]], cols, tk, p, a)
        for b in names:
            if b == a:
                continue
            d = data[b]
            kr = _transfer(router, d, cols, p, [])
            rr = np.arange(len(d.labels))
            for delta in margins:
                ch = _choice(kr, d.x, float(delta), cols)
                j = _best_fixed(d.m, float(d.m["passages"][rr, ch].mean()))
                rec, ms = float(d.m["recall"][rr, ch].mean()), float(d.m["ms"][rr, ch].mean())
                best_rec, best_ms = float(d.m["recall"][:, j].mean()), float(d.m["ms"][:, j].mean())
                rows.append(
                    {
                        "train": a,
                        "transfer_to": b,
                        "margin": float(delta),
                        "recall": rec,
                        "mean_ms": ms,
                        "best_fixed_recall": best_rec,
                        "best_fixed_ms": best_ms,
                        "met": rec >= best_rec - p.transfer_tolerance and ms <= best_ms,
                    }
                )
    return pick_margin(rows, margins), rows


def pick_margin(rows: Sequence[dict[str, Any]], margins: Sequence[float]) -> float:
    """The quality point's margin from the nested transfers' rows: among the margins that
    kept every transfer within its best fixed strategy's mean ms, the one with the least
    worst recall shortfall against that strategy (ties: the smallest margin). The quality
    point is the most recall at no more than the best fixed strategy's cost; the smallest
    margin that just met the target (the rule before stop 41) sits on the recall line by
    construction, and a held-out corpus lands on either side of it.

    When no margin kept every transfer within the ms, the margin they support best: the
    most transfers met, then the least worst shortfall, then the smallest. 0 when nothing
    was scored."""
    scored = {float(d): [r for r in rows if r["margin"] == d] for d in sorted(margins)}
    scored = {d: rs for d, rs in scored.items() if rs}
    if not scored:
        return 0.0

    def gap(d: float) -> float:
        return round(min(r["recall"] - r["best_fixed_recall"] for r in scored[d]), 9)

    within = [d for d, rs in scored.items() if all(r["mean_ms"] <= r["best_fixed_ms"] for r in rs)]
    if within:
        return max(within, key=lambda d: (gap(d), -d))
    return max(scored, key=lambda d: (sum(bool(r["met"]) for r in scored[d]), gap(d), -d))


def served_point(dataset: str, every: KwayParams) -> tuple[tuple[str, ...], float] | None:
    """The served router's route and budget when params.yaml names candidates
    (`kway.route_candidates`): chosen as leave-one-out chooses its `kway` row, on nested
    transfers between the corpora it trains on (reports/loco.py `choose_point`); None: the
    route and budget of params.yaml."""
    if not every.route_candidates:
        return None
    from r2adapter.label.corpora import training_corpora as served_corpora

    corpora = served_corpora(dataset, every.train_corpora, strategy_label_path)
    names, table, data = read_corpora(corpora, every)
    groups = corpus_groups(corpora, data)
    if len(groups) < 2:
        return None
    point, _ = choose_point(groups, names, table, every)
    return point.route, point.budget
