"""`r2a evaluate routing --protocol loco --dataset D`: leave one corpus out (issue 24).

The k-way router is trained on the union of every *other* labelled corpus
(labels/<C>.strategies.jsonl for each shipped or named corpus C ≠ D; heads on their train
splits, thresholds on their val splits, each corpus's features read on its own graph), then
transferred to D without D's labels, as `--protocol all` transfers the champion
(`kway.transfer`: `plugin` re-searches the thresholds at D's own strategy ms, timed without
gold, with the heads' suitabilities standing in for recall). D's labels score it and every
fixed strategy (`always_<strategy>`) on all of D's labelled queries, paired.

Nothing is chosen on D: the route set, budget and settings are params.yaml's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from r2adapter.config import kway_params
from r2adapter.errors import R2AError
from r2adapter.evaluate.routing_report import (
    columns,
    graphs,
    oracle_choice,
    paired_rows,
    router_figures,
    with_two_way,
)
from r2adapter.evaluate.stats import paired_bootstrap
from r2adapter.kway.cascade import choose
from r2adapter.kway.evaluate import _embed, _features, _fit, _time_kway, calibrate_kway
from r2adapter.kway.labels import outcome_matrix, read_strategy_labels, strategy_label_path
from r2adapter.kway.strategies import strategy_table


def training_corpora(held_out: str, corpora: Sequence[str] | None = None) -> list[str]:
    """The corpora a leave-one-out router trains on: those given, else every shipped one
    with strategy labels, less the held-out corpus."""
    from r2adapter.data.adapters import SHIPPED_DATASETS

    names = list(corpora) if corpora else list(SHIPPED_DATASETS)
    return [c for c in names if c != held_out and strategy_label_path(c).is_file()]


def loco_report(
    dataset: str, budget: float | None = None, corpora: Sequence[str] | None = None
) -> dict[str, Any]:
    if budget is not None and not 0.0 <= budget <= 1.0:
        raise R2AError(f"--budget must be in [0, 1], not {budget}")
    every = kway_params() if budget is None else kway_params(budget=budget)
    p = every.routed()
    names = with_two_way(every.strategies)
    p_eval = kway_params(strategies=tuple(names), budget=p.budget)
    table = strategy_table(names)
    cols = [names.index(s) for s in p.strategies]
    tk = [table[j] for j in cols]
    train_on = training_corpora(dataset, corpora)
    if not train_on:
        raise R2AError(
            f"loco: no other corpus has strategy labels to train on; run `r2a label --dataset "
            f"C` for another corpus C (held out: {dataset})"
        )
    # the union of the other corpora: features on each one's own graph
    xs: list[np.ndarray] = []
    ms: list[dict[str, np.ndarray]] = []
    splits: list[str] = []
    sizes: dict[str, int] = {}
    for c in train_on:
        labs = read_strategy_labels(c, p_eval)
        qv = _embed(labs)
        xs.append(_features(c, p.features, labs, qv))
        ms.append(columns(outcome_matrix(labs, table), cols))
        splits.extend(lab.split for lab in labs)
        sizes[c] = len(labs)
    x_tr = np.vstack(xs)
    m_tr = {k: np.concatenate([m[k] for m in ms]) for k in ms[0]}
    sp = np.array(splits)
    tr, va = np.where(sp == "train")[0], np.where(sp == "val")[0]
    router = _fit(x_tr, m_tr, tr, va, tk, p, "+".join(train_on))
    notes = [
        f"kway: trained on {' + '.join(f'{c} ({n})' for c, n in sizes.items())}: heads on "
        f"{len(tr)} train queries, thresholds on {len(va)} val queries; {dataset} held out"
    ]
    # the held-out corpus: label-free transfer, then scored on its labels
    labels = read_strategy_labels(dataset, p_eval)
    m = outcome_matrix(labels, table)
    qv = _embed(labels)
    x = _features(dataset, p.features, labels, qv)
    mk = columns(m, cols)
    prices = (mk["ms"].mean(axis=0), mk["passages"].mean(axis=0))
    kr = calibrate_kway(router, x, p.budget, p, notes, *prices)
    kr.bind(dataset, graphs())
    lat = _time_kway(kr, labels, qv)
    choice = np.array([cols[c] for c in choose(kr.probs(x), kr.tau, kr.order, kr.fallback_ix)])
    zero = np.zeros(len(labels))
    routers: dict[str, dict[str, Any]] = {
        f"always_{s.name}": router_figures(np.full(len(labels), j), zero, m, table)
        for j, s in enumerate(table)
    }
    routers["kway"] = router_figures(choice, lat, m, table)
    routers["oracle"] = router_figures(oracle_choice(m, table, range(len(table))), zero, m, table)
    routers["oracle_routed"] = router_figures(oracle_choice(m, table, cols), zero, m, table)
    paired = paired_rows({"kway": choice}, m, table, routers)
    paired.update(best_fixed_comparison(choice, m, table, routers))
    return {
        "dataset": dataset,
        "protocol": "loco",
        "n_queries": len(labels),
        "trained_on": sizes,
        "budget": p.budget,
        "max_passages": p.max_passages,
        "strategies": list(p.strategies),
        "labelled_strategies": list(every.strategies),
        "routers": routers,
        "frontier": [],
        "ablation": {},
        "paired": paired,
        "notes": notes,
    }


def best_fixed_comparison(
    choice: np.ndarray, m: dict[str, np.ndarray], table: Sequence[Any], routers: dict[str, Any]
) -> dict[str, Any]:
    """kway against the best fixed strategy that hands the reader no more passages (the
    issue's target: recall ≥ its − .005 at ≤ 1.05× its mean ms), paired."""
    k = routers["kway"]
    fair = [
        (j, s)
        for j, s in enumerate(table)
        if routers[f"always_{s.name}"]["mean_passages"] <= k["mean_passages"] + 0.01
    ]
    if not fair:
        return {}
    j, s = max(
        fair,
        key=lambda js: (
            routers[f"always_{js[1].name}"]["recall"],
            -routers[f"always_{js[1].name}"]["mean_ms"],
        ),
    )
    best = routers[f"always_{s.name}"]
    rows = np.arange(len(choice))
    return {
        "best_fixed": {
            "strategy": s.name,
            "recall": best["recall"],
            "mean_ms": best["mean_ms"],
            "kway_recall": k["recall"],
            "kway_mean_ms": k["mean_ms"],
            "ms_ratio": k["mean_ms"] / best["mean_ms"] if best["mean_ms"] > 0 else None,
            "paired": paired_bootstrap(m["recall"][rows, choice], m["recall"][:, j]),
        }
    }
