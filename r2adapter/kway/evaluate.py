"""The k-way family's part of `r2a evaluate routing --protocol cv5|test|all`: the
quality–cost plane from the strategy labels, and the k-way router on it. The report over
every router (the fixed strategies, the two-way routers, the baselines, the oracles, ADR's
rows, the paired intervals) is r2adapter/evaluate/routing_report.py `plane_report`, to which
r2adapter/steps.py hands this plane.

- cv5: 5-fold cross-validation over all labelled queries (r2adapter/data/splits.py): in
  fold k the k-way heads and their thresholds are trained on the other folds (fold k+1
  validates), and scored on fold k; every figure is out of fold. Also here: the frontier
  (a router trained under each budget), the feature ablation, routing over every labelled
  strategy, and the moonshot.
- test: the frozen split; the registered k-way champion, or one trained on train with
  thresholds on val.
- all: a corpus the router was not trained on: the registered k-way champion transferred
  label-free (`calibrate_kway`, `kway.transfer`; `--budget` overrides), and the other
  transfer rule beside it.

k-way's `mean_ms` is routing plus retrieval per query: the chosen strategy's retrievers (as
measured while labelling, the query embedding included) and the router's own latency from
the one timer (r2adapter/evaluate/timing.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from r2adapter.config import KwayParams, kway_params
from r2adapter.data.splits import N_FOLDS, fold_of, fold_roles
from r2adapter.errors import R2AError
from r2adapter.evaluate.routing_report import (
    Plane,
    budgeted_oracle,
    columns,
    cost_of,
    graphs,
    mixture_ceiling,
    router_figures,
    with_two_way,
)
from r2adapter.evaluate.stats import paired_bootstrap
from r2adapter.evaluate.timing import time_per_query
from r2adapter.kway.cascade import Costs, choose, cost_cap, tune_thresholds
from r2adapter.kway.labels import StrategyLabel, outcome_matrix, read_strategy_labels
from r2adapter.kway.model import KwayRouter, fit_kway
from r2adapter.kway.strategies import Strategy, strategy_table

PROTOCOLS = ("cv5", "test", "all")
BUDGETS = tuple(round(b, 2) for b in np.linspace(0.0, 1.0, 11))


def _costs(m: dict[str, np.ndarray], rows: np.ndarray | slice = slice(None)) -> Costs:
    """The cascade's outcomes: recall, the cost under the matrix's profile (what its budget
    caps: r2adapter/kway/costs.py) and passages."""
    return Costs(m["recall"][rows], cost_of(m)[rows], m["passages"][rows])


def _embed(labels: Sequence[StrategyLabel]) -> np.ndarray:
    from r2adapter.kway.features import embed_questions

    return embed_questions([lab.question for lab in labels])


def _features(dataset: str, names: Sequence[str], labels: Sequence[StrategyLabel], qv: np.ndarray):
    from r2adapter.kway.features import KwayFeatures
    from r2adapter.retrieve.passage_view import PASSAGE_VIEWS

    return KwayFeatures(dataset, PASSAGE_VIEWS, names)([lab.question for lab in labels], qv)


def _time_kway(router: KwayRouter, labels: Sequence[StrategyLabel], qv: np.ndarray) -> np.ndarray:
    """Routing alone, one query at a time, on the embedding the retrievers compute anyway
    (the one timer and its thread policy: r2adapter/evaluate/timing.py)."""
    _, ms = time_per_query(
        lambda i: router.decide([labels[i].question], qv[i : i + 1]), len(labels)
    )
    return ms


def _fit(
    x: np.ndarray,
    m: dict[str, np.ndarray],
    train: np.ndarray,
    val: np.ndarray,
    table: Sequence[Strategy],
    p: KwayParams,
    dataset: str,
) -> KwayRouter:
    router, _ = fit_kway(
        x[train],
        m["suitable"][train],
        x[val],
        _costs(m, val),
        _costs(m, train),
        [s.name for s in table],
        p,
        corpus=dataset,
    )
    return router


def _oof_kway(
    x: np.ndarray,
    m: dict[str, np.ndarray],
    folds: np.ndarray,
    table: Sequence[Strategy],
    p: KwayParams,
    dataset: str,
    budgets: Sequence[float] = (),
) -> tuple[np.ndarray, dict[float, np.ndarray], list[KwayRouter]]:
    """Out-of-fold choices at p.budget, and at each of `budgets` (the frontier: a router
    trained under each budget; re-searching only the thresholds of the default budget's heads
    lost up to .04 of recall at low budgets)."""
    n = len(folds)
    choice = np.zeros(n, dtype=int)
    frontier = {b: np.zeros(n, dtype=int) for b in budgets}
    routers = []
    for k in range(N_FOLDS):
        roles = fold_roles(k)
        role = np.array([roles[f] for f in folds])
        tr, va, te = (np.where(role == r)[0] for r in ("train", "val", "test"))
        router = _fit(x, m, tr, va, table, p, dataset)
        routers.append(router)
        choice[te] = router.choose(x[te])
        for b in budgets:  # each budget trained for (heads and τ), as a user would run it
            rb = (
                router
                if b == p.budget
                else _fit(x, m, tr, va, table, replace(p, budget=b), dataset)
            )
            frontier[b][te] = rb.choose(x[te])
    return choice, frontier, routers


def kway_plane(
    dataset: str,
    protocol: str = "cv5",
    budget: float | None = None,
    ablate: bool = True,
) -> Plane:
    """The plane (every labelled strategy on the report's queries) and the k-way router's
    choices and routing ms on it, with its frontier, ablation and notes."""
    if protocol not in PROTOCOLS:
        raise R2AError(f"unknown protocol {protocol!r}: choose {', '.join(PROTOCOLS)}")
    if budget is not None and not 0.0 <= budget <= 1.0:
        raise R2AError(f"--budget must be in [0, 1], not {budget}")
    every = kway_params() if budget is None else kway_params(budget=budget)
    p = every.routed()  # the strategies the router chooses among (kway.route)
    names = with_two_way(every.strategies)  # every labelled strategy: the always_* rows
    p_eval = kway_params(strategies=tuple(names), budget=p.budget)
    table = strategy_table(names)
    kway_cols = [names.index(s) for s in p.strategies]
    all_labels = read_strategy_labels(dataset, p_eval)
    m_all = outcome_matrix(all_labels, table)
    qv_all = _embed(all_labels)
    x_all = _features(dataset, p.features, all_labels, qv_all)
    splits = np.array([lab.split for lab in all_labels])
    rows = np.where(splits == "test")[0] if protocol == "test" else np.arange(len(all_labels))
    if not len(rows):
        raise R2AError(f"{dataset}: no labelled queries in the test split")
    labels = [all_labels[i] for i in rows]
    m = {k: v[rows] for k, v in m_all.items()}
    qv, x = qv_all[rows], x_all[rows]
    notes: list[str] = []

    # the k-way router's heads see only the configured strategies' columns
    mk = columns(m, kway_cols)
    tk = [table[j] for j in kway_cols]
    frontier: list[dict[str, Any]] = []
    per_budget: dict[float, np.ndarray] = {}
    ablation: dict[str, Any] = {}
    if protocol == "cv5":
        folds = np.array([fold_of(lab.query_id) for lab in labels])
        choice_k, per_budget, fold_routers = _oof_kway(x, mk, folds, tk, p, dataset, BUDGETS)
        lat = _time_kway(fold_routers[0].bind(dataset, graphs()), labels, qv)
        fixed = range(len(table))
        for b, ch in per_budget.items():
            picked = np.array([kway_cols[c] for c in ch])
            fig = router_figures(picked, lat, m, table)
            keep = ("recall", "fcr", "mean_ms", "mean_passages", "graph_usage")
            # the fixed strategies' best mix at this point's own costs, paired on the queries
            hull, mixed = mixture_ceiling(m, fixed, fig["mean_ms"], fig["mean_passages"])
            got = m["recall"][np.arange(len(picked)), picked]
            vs = paired_bootstrap(got, mixed) if np.isfinite(hull) else None
            frontier.append(
                {
                    "budget": b,
                    **{k: fig[k] for k in keep},
                    "hull_recall": hull if vs else None,
                    "vs_hull": vs,
                }
            )
        if ablate:
            ablation = _ablation(dataset, labels, qv, mk, folds, tk, p)
            if set(p.strategies) != set(every.strategies):  # kway.route against them all
                cols = [names.index(s) for s in every.strategies]
                ma = columns(m, cols)
                pa = kway_params(budget=p.budget, route=())
                ch_all, _, _ = _oof_kway(x, ma, folds, [table[j] for j in cols], pa, dataset)
                picked = np.array([cols[c] for c in ch_all])
                ablation["routing_every_strategy"] = router_figures(picked, lat, m, table)
            ablation["moonshot"] = _moonshot(x, m, folds, table, every, dataset, lat)
    else:
        mk_all = columns(m_all, kway_cols)
        kr = _served_kway(dataset, p, protocol, x_all, mk_all, splits, tk, notes)
        served = kr
        if protocol == "all":
            # the routed strategies' prices on this corpus: timings, not labels
            b = p.budget if budget is None else budget
            prices = (mk["ms"].mean(axis=0), mk["passages"].mean(axis=0))
            kr = calibrate_kway(served, x, b, p, notes, *prices)
        kr.bind(dataset, graphs())
        lat = _time_kway(kr, labels, qv)
        choice_k = kr.choose(x)
        if protocol == "all" and ablate:
            # the other transfer rule on the same queries (kway.transfer)
            other = "shift" if p.transfer == "plugin" else "plugin"
            alt = calibrate_kway(served, x, b, replace(p, transfer=other), [], *prices)
            ch = np.array([kway_cols[c] for c in alt.choose(x)])
            ablation[f"transfer_{other}"] = router_figures(ch, lat, m, table)
    return Plane(
        dataset=dataset,
        protocol=protocol,
        query_ids=[lab.query_id for lab in labels],
        questions=[lab.question for lab in labels],
        qv=qv,
        m=m,
        table=table,
        kway_cols=kway_cols,
        budget=p.budget,
        max_passages=p.max_passages,
        strategies=list(p.strategies),
        labelled_strategies=list(every.strategies),
        kway_choice=np.array([kway_cols[c] for c in choice_k]),
        kway_ms=lat,
        frontier=frontier,
        per_budget=per_budget,
        ablation=ablation,
        notes=notes,
    )


def _served_kway(dataset, p, protocol, x, mk, splits, tk, notes) -> KwayRouter:
    """The registered k-way champion; for the test split, when there is none (or it was
    trained over another strategy table), one trained here on train with τ from val."""
    from r2adapter.kway.model import load_kway

    try:
        router, version = load_kway("champion")
        if tuple(router.cfg.strategies) == tuple(p.strategies) and tuple(
            router.cfg.features
        ) == tuple(p.features):
            notes.append(f"kway: the registered champion v{version}")
            return router
        why = "the champion was trained over another strategy table or features"
    except R2AError as e:
        why = str(e)
    if protocol == "all":
        raise R2AError(f"kway: {why}: `--protocol all` serves the registered champion")
    notes.append(f"kway: trained here on the train split ({why})")
    tr, va = np.where(splits == "train")[0], np.where(splits == "val")[0]
    return _fit(x, mk, tr, va, tk, p, dataset)


def calibrate_kway(
    router: KwayRouter,
    x: np.ndarray,
    budget: float,
    p: KwayParams,
    notes: list[str],
    mean_ms: np.ndarray | None = None,
    mean_passages: np.ndarray | None = None,
) -> KwayRouter:
    """Label-free transfer to a corpus the router was not trained on (`kway.transfer`).

    `plugin` (with `mean_ms`, the routed strategies' mean ms timed on this corpus's own
    questions, which needs no gold): the cascade is ordered and the budget's cap set by
    those prices, and the thresholds re-searched (the training search, `tune_thresholds`)
    with the heads' suitabilities standing in for the recall no label gives. `shift` (or no
    prices): every threshold moved by one δ until the questions, priced at the training
    corpus's mean ms, meet the budget (the largest expected cost within it)."""
    if p.transfer == "keep":
        notes.append("kway: the thresholds as trained (kway.transfer keep)")
        return router
    probs = router.probs(x)
    if p.transfer == "plugin" and mean_ms is not None:
        ms = np.asarray(mean_ms, dtype=np.float64)
        ps = (
            np.asarray(router.cfg.mean_passages)
            if mean_passages is None
            else np.asarray(mean_passages, dtype=np.float64)
        )
        priced = router.with_costs(ms, ps)
        n = len(probs)
        plug = Costs(probs, np.tile(ms, (n, 1)), np.tile(ps, (n, 1)))
        cap = cost_cap(ms, budget)
        tau, _, ok = tune_thresholds(probs, plug, priced.order, priced.fallback_ix, cap, p)
        if ok:
            notes.append(
                f"kway: thresholds re-searched on this corpus's own ms (label-free plug-in, "
                f"budget {budget}: cap {cap:.1f} ms)"
            )
            return priced.with_thresholds(tau)
        notes.append("kway: the plug-in search found no thresholds within the budget; shifting")
    mean_ms_train = np.asarray(router.cfg.mean_ms)
    mean_ps = np.asarray(router.cfg.mean_passages)
    cap = cost_cap(mean_ms_train, budget)
    best: tuple[float, float] | None = None
    for delta in np.round(np.arange(-0.9, 0.91, 0.02), 4):
        tau = np.clip(router.tau + delta, 0.0, 1.0)
        ch = choose(probs, tau, router.order, router.fallback_ix)
        cost, passages = float(mean_ms_train[ch].mean()), float(mean_ps[ch].mean())
        if (
            cost <= cap + 1e-9
            and passages <= p.max_passages + 1e-9
            and (best is None or cost > best[1])
        ):
            best = (float(delta), cost)
    if best is None:
        notes.append("kway: no threshold shift meets the budget; the trained thresholds kept")
        return router
    notes.append(f"kway: thresholds shifted by {best[0]:+.2f} (label-free, budget {budget})")
    return router.with_thresholds(np.clip(router.tau + best[0], 0.0, 1.0))


MOONSHOT_MS, MOONSHOT_PASSAGES = 0.7, 3.5  # of always-graph@5's mean ms; passages at most


def _moonshot(x, m, folds, table, every: KwayParams, dataset, lat) -> dict[str, Any]:
    """Issue 17's moonshot measured: always-graph@5's recall at ≤ 70% of its mean ms and
    ≤ 3.5 passages. kway over every labelled strategy trained for that point (out of fold),
    beside the two ceilings there: the fixed strategies' best mix and the per-query oracle
    within the same means (what a perfect router could do)."""
    names = [s.name for s in table]
    g = names.index("graph@5")
    cap_ms = MOONSHOT_MS * float(m["ms"][:, g].mean())
    cols = [names.index(s) for s in every.strategies]
    mean_ms = m["ms"][:, cols].mean(axis=0)
    lo, hi = float(mean_ms.min()), float(mean_ms.max())
    budget = float(np.clip((cap_ms - lo) / (hi - lo), 0.0, 1.0))
    pa = kway_params(budget=budget, route=(), max_passages=MOONSHOT_PASSAGES)
    ma = columns(m, cols)
    ch, _, _ = _oof_kway(x, ma, folds, [table[j] for j in cols], pa, dataset)
    picked = np.array([cols[c] for c in ch])
    hull, _ = mixture_ceiling(m, range(len(table)), cap_ms, MOONSHOT_PASSAGES)
    oracle, _ = budgeted_oracle(m, cap_ms, MOONSHOT_PASSAGES)
    keep = ("recall", "fcr", "mean_ms", "mean_passages", "share")
    fig = router_figures(picked, lat, m, table)
    return {
        "target": {
            "recall": float(m["recall"][:, g].mean()),
            "mean_ms": cap_ms,
            "mean_passages": MOONSHOT_PASSAGES,
        },
        "kway_every_strategy": {k: fig[k] for k in keep} | {"budget": budget},
        "hull_recall": hull,
        "budgeted_oracle_recall": oracle,
    }


def _ablation(dataset, labels, qv, mk, folds, tk, p: KwayParams) -> dict[str, Any]:
    """Out-of-fold recall and ms at the budget with each feature group left out."""
    out: dict[str, Any] = {}
    zero = np.zeros(len(labels))
    for drop in (None, *p.features):
        feats = tuple(f for f in p.features if f != drop)
        if not feats:
            continue
        pf = kway_params(features=feats, budget=p.budget).routed()
        x = _features(dataset, feats, labels, qv)
        ch, _, _ = _oof_kway(x, mk, folds, tk, pf, dataset)
        fig = router_figures(ch, zero, mk, tk)
        out["all" if drop is None else f"without_{drop}"] = {
            "recall": fig["recall"],
            "fcr": fig["fcr"],
            "mean_ms": fig["mean_ms"],
            "mean_passages": fig["mean_passages"],
        }
    return out
