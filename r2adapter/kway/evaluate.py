"""`r2a evaluate routing --protocol cv5|test|all`: every router and every single strategy on
the quality–cost plane, from the strategy labels.

- cv5: 5-fold cross-validation over all labelled queries (r2adapter/evaluate/folds.py): in
  fold k the k-way heads, their thresholds and the two-way routers are trained on the other
  folds (fold k+1 validates), and scored on fold k; every figure is out of fold.
- test: the frozen split; the k-way router trained on train, thresholds on val, and the
  registered two-way champions.
- all: a corpus the routers were not trained on: the registered k-way champion with its
  thresholds shifted, without labels, until the corpus's own questions meet the cost budget
  it was trained under (`--budget` overrides); the two-way champions with τ calibrated to
  their graph budget the same way (`--calibrate-usage`).

A router's `mean_ms` is routing plus retrieval per query: the query embedding, the chosen
strategy's retrievers (as measured while labelling), and the router's own measured latency.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from r2adapter.config import KwayParams, kway_params, router_params
from r2adapter.errors import R2AError
from r2adapter.evaluate.folds import N_FOLDS, fold_of, fold_roles
from r2adapter.kway.cascade import Costs, choose, cost_cap, tune_thresholds
from r2adapter.kway.labels import StrategyLabel, outcome_matrix, read_strategy_labels
from r2adapter.kway.model import KwayRouter, fit_kway
from r2adapter.kway.strategies import Strategy, strategy_table

PROTOCOLS = ("cv5", "test", "all")
BUDGETS = tuple(round(b, 2) for b in np.linspace(0.0, 1.0, 11))
TWO_WAY = ("dense@5", "graph@5")  # the two-way routers' strategies (label.top_k passages)
N_BOOT = 2000


def _costs(m: dict[str, np.ndarray], rows: np.ndarray | slice = slice(None)) -> Costs:
    return Costs(m["recall"][rows], m["ms"][rows], m["passages"][rows])


def _columns(m: dict[str, np.ndarray], cols: Sequence[int]) -> dict[str, np.ndarray]:
    """The outcome matrix of the strategies `cols` alone: suitable again means reaching the
    best recall among them (as `r2a train --router kway` labels it), not among every
    labelled strategy."""
    out = {k: v[:, cols] if v.ndim == 2 else v for k, v in m.items()}
    out["suitable"] = out["recall"] >= out["recall"].max(axis=1, keepdims=True) - 1e-9
    return out


def router_figures(
    choice: np.ndarray,
    route_ms: np.ndarray,
    m: dict[str, np.ndarray],
    table: Sequence[Strategy],
) -> dict[str, Any]:
    """The report's fields for a router that chose strategy index `choice[i]` for query i."""
    rows = np.arange(len(choice))
    names = [s.name for s in table]
    picked = [names[c] for c in choice]
    share = {n: float(np.mean([p == n for p in picked])) for n in names}
    return {
        "recall": float(m["recall"][rows, choice].mean()),
        "fcr": float(m["full"][rows, choice].mean()),
        "mean_passages": float(m["passages"][rows, choice].mean()),
        "mean_tokens": float(m["tokens"][rows, choice].mean()),
        "mean_ms": float((m["ms"][rows, choice] + route_ms).mean()),
        "graph_usage": float(np.mean([table[c].graph_side for c in choice])),
        "share": {n: v for n, v in share.items() if v > 0},
        "latency_ms_p50": float(np.median(route_ms)),
    }


def _embed(labels: Sequence[StrategyLabel]) -> np.ndarray:
    from r2adapter.index.encoder import get_encoder

    return get_encoder().encode([lab.question for lab in labels])


def _features(dataset: str, names: Sequence[str], labels: Sequence[StrategyLabel], qv: np.ndarray):
    from r2adapter.kway.features import KwayFeatures
    from r2adapter.retrieve.graph_index import GRAPHS

    return KwayFeatures(dataset, GRAPHS, names)([lab.question for lab in labels], qv)


def _time_kway(router: KwayRouter, labels: Sequence[StrategyLabel], qv: np.ndarray) -> np.ndarray:
    """Routing alone, one query at a time, on the embedding the retrievers compute anyway,
    on one BLAS thread as the service runs it (R2A_MODEL_THREADS)."""
    from threadpoolctl import threadpool_limits

    router.decide([labels[0].question], qv[:1])  # warm-up
    out = np.zeros(len(labels))
    with threadpool_limits(_model_threads()):
        for i, lab in enumerate(labels):
            t = time.perf_counter()
            router.decide([lab.question], qv[i : i + 1])
            out[i] = (time.perf_counter() - t) * 1000
    return out


def _model_threads() -> int:
    import os

    return max(1, int(os.environ.get("R2A_MODEL_THREADS", "1")))


def _time_two_way(
    decide: Callable[[str, np.ndarray], bool], labels: Sequence[StrategyLabel], qv: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    from threadpoolctl import threadpool_limits

    decide(labels[0].question, qv[:1])
    graph, ms = np.zeros(len(labels), dtype=bool), np.zeros(len(labels))
    with threadpool_limits(_model_threads()):
        for i, lab in enumerate(labels):
            t = time.perf_counter()
            graph[i] = decide(lab.question, qv[i : i + 1])
            ms[i] = (time.perf_counter() - t) * 1000
    return graph, ms


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
        choice[te] = choose(router.probs(x[te]), router.tau, router.order, router.fallback_ix)
        for b in budgets:  # each budget trained for (heads and τ), as a user would run it
            rb = (
                router
                if b == p.budget
                else _fit(x, m, tr, va, table, replace(p, budget=b), dataset)
            )
            frontier[b][te] = choose(rb.probs(x[te]), rb.tau, rb.order, rb.fallback_ix)
    return choice, frontier, routers


def mixture_ceiling(
    m: dict[str, np.ndarray], cols: Sequence[int], at_ms: float, at_passages: float
) -> tuple[float, np.ndarray]:
    """The fixed strategies' hull under both of the router's costs: the best mean recall a
    random mix of the strategies `cols` reaches (a linear programme over the mix's weights)
    with mean ms ≤ `at_ms` and mean passages ≤ `at_passages`; and each query's expected
    recall under that mix (for a paired interval). Infeasible (cheaper than every mix):
    -inf and zeros."""
    from scipy.optimize import linprog

    r = m["recall"][:, cols]
    ms, ps = m["ms"][:, cols].mean(axis=0), m["passages"][:, cols].mean(axis=0)
    lp = linprog(
        -r.mean(axis=0),
        A_ub=np.vstack([ms, ps]),
        b_ub=[at_ms, at_passages],
        A_eq=np.ones((1, len(cols))),
        b_eq=[1.0],
        bounds=(0.0, 1.0),
        method="highs",
    )
    if lp.status != 0:
        return float("-inf"), np.zeros(len(r))
    return float(-lp.fun), r @ lp.x


def paired_interval(a: np.ndarray, b: np.ndarray, seed: int = 13) -> dict[str, Any]:
    """Mean of a − b over queries and its 95% paired bootstrap interval."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    rng = np.random.default_rng(seed)
    boots = d[rng.integers(0, len(d), size=(N_BOOT, len(d)))].mean(axis=1)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return {"diff": float(d.mean()), "ci95": [float(lo), float(hi)]}


def _two_way_choice(
    graph: np.ndarray, table: Sequence[Strategy], graph_side: str = ""
) -> np.ndarray:
    """A two-way router's choice as strategy columns: dense@5, or graph@5 (`graph_side`:
    another graph strategy, e.g. graph+rw@5)."""
    names = [s.name for s in table]
    return np.where(graph, names.index(graph_side or TWO_WAY[1]), names.index(TWO_WAY[0]))


REWRITTEN_GRAPH = "graph+rw@5"  # a two-way router's graph side when the rewrite fires


def _with_two_way(names: Sequence[str]) -> list[str]:
    return list(names) + [s for s in TWO_WAY if s not in names]


def kway_report(
    dataset: str,
    protocol: str = "cv5",
    budget: float | None = None,
    ablate: bool = True,
    two_way: Sequence[str] = ("r2a", "r2a_embed"),
) -> dict[str, Any]:
    from r2adapter.config import label_params
    from r2adapter.label.annotate import db_labels

    if protocol not in PROTOCOLS:
        raise R2AError(f"unknown protocol {protocol!r}: choose {', '.join(PROTOCOLS)}")
    if budget is not None and not 0.0 <= budget <= 1.0:
        raise R2AError(f"--budget must be in [0, 1], not {budget}")
    every = kway_params() if budget is None else kway_params(budget=budget)
    p = every.routed()  # the strategies the router chooses among (kway.route)
    names = _with_two_way(every.strategies)  # every labelled strategy: the always_* rows
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
    routers: dict[str, dict[str, Any]] = {}
    zero = np.zeros(len(labels))
    for j, s in enumerate(table):
        routers[f"always_{s.name}"] = router_figures(np.full(len(labels), j), zero, m, table)

    # the k-way router's heads see only the configured strategies' columns
    mk = _columns(m, kway_cols)
    tk = [table[j] for j in kway_cols]
    frontier: list[dict[str, Any]] = []
    chosen: dict[str, np.ndarray] = {}
    ablation: dict[str, Any] = {}
    if protocol == "cv5":
        folds = np.array([fold_of(lab.query_id) for lab in labels])
        choice_k, per_budget, fold_routers = _oof_kway(x, mk, folds, tk, p, dataset, BUDGETS)
        lat = _time_kway(fold_routers[0].bind(dataset, _graphs()), labels, qv)
        fixed = range(len(table))
        for b, ch in per_budget.items():
            picked = np.array([kway_cols[c] for c in ch])
            fig = router_figures(picked, lat, m, table)
            keep = ("recall", "fcr", "mean_ms", "mean_passages", "graph_usage")
            # the fixed strategies' best mix at this point's own costs, paired on the queries
            hull, mixed = mixture_ceiling(m, fixed, fig["mean_ms"], fig["mean_passages"])
            got = m["recall"][np.arange(len(picked)), picked]
            vs = paired_interval(got, mixed) if np.isfinite(hull) else None
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
                ma = _columns(m, cols)
                pa = kway_params(budget=p.budget, route=())
                ch_all, _, _ = _oof_kway(x, ma, folds, [table[j] for j in cols], pa, dataset)
                picked = np.array([cols[c] for c in ch_all])
                ablation["routing_every_strategy"] = router_figures(picked, lat, m, table)
            ablation["moonshot"] = _moonshot(x, m, folds, table, every, dataset, lat)
    else:
        mk_all = _columns(m_all, kway_cols)
        kr = _served_kway(dataset, p, protocol, x_all, mk_all, splits, tk, notes)
        served = kr
        if protocol == "all":
            # the routed strategies' prices on this corpus: timings, not labels
            b = p.budget if budget is None else budget
            prices = (mk["ms"].mean(axis=0), mk["passages"].mean(axis=0))
            kr = calibrate_kway(served, x, b, p, notes, *prices)
        kr.bind(dataset, _graphs())
        lat = _time_kway(kr, labels, qv)
        choice_k = choose(kr.probs(x), kr.tau, kr.order, kr.fallback_ix)
        if protocol == "all" and ablate:
            # the other transfer rule on the same queries (kway.transfer)
            other = "shift" if p.transfer == "plugin" else "plugin"
            alt = calibrate_kway(served, x, b, replace(p, transfer=other), [], *prices)
            ch = np.array(
                [kway_cols[c] for c in choose(alt.probs(x), alt.tau, alt.order, alt.fallback_ix)]
            )
            ablation[f"transfer_{other}"] = router_figures(ch, lat, m, table)
    choice = np.array([kway_cols[c] for c in choice_k])
    routers["kway"] = router_figures(choice, lat, m, table)
    chosen["kway"] = choice
    records = {r.query_id: r for r in db_labels(dataset, label_params().rule, None)}
    for kind in two_way:
        try:
            if protocol == "cv5":
                graph = _two_way_oof(kind, dataset, labels, records)
                lat2 = _two_way_latency(kind, dataset, labels, qv, notes)
            else:
                graph, lat2 = _two_way_champion(kind, dataset, labels, qv, protocol, notes)
            chosen[kind] = _two_way_choice(graph, table)
            routers[kind] = router_figures(chosen[kind], lat2, m, table)
            if REWRITTEN_GRAPH in [s.name for s in table]:
                # as served with the structural rewriter: every graph-bound query rewritten
                # (router.structural_epsilon), so its graph side is graph+rw@5
                rw = f"{kind}_rw"
                chosen[rw] = _two_way_choice(graph, table, REWRITTEN_GRAPH)
                routers[rw] = router_figures(chosen[rw], lat2, m, table)
        except R2AError as e:
            notes.append(f"{kind}: {e}")
    if protocol == "cv5":
        ablation["frontier_at_two_way_cost"] = _frontier_at(
            {k: v for k, v in chosen.items() if k != "kway"}, routers, frontier, per_budget, m,
            kway_cols,
        )  # fmt: skip
    ner_graph, ner_ms = _ner(labels, qv)
    routers["ner"] = router_figures(_two_way_choice(ner_graph, table), ner_ms, m, table)
    # the oracle over every labelled strategy, and over the ones kway routes among (its ceiling)
    routers["oracle"] = router_figures(_oracle(m, table, range(len(table))), zero, m, table)
    routers["oracle_routed"] = router_figures(_oracle(m, table, kway_cols), zero, m, table)
    from r2adapter.adr.evaluate import merge_adr_rows  # ADR's routers (issue 16)

    merge_adr_rows(dataset, protocol, [lab.query_id for lab in labels], routers, notes)
    return {
        "dataset": dataset,
        "protocol": protocol,
        "n_queries": len(labels),
        "budget": p.budget,
        "max_passages": p.max_passages,
        "strategies": list(p.strategies),  # what kway routes among (kway.route)
        "labelled_strategies": list(every.strategies),
        "routers": routers,
        "frontier": frontier,
        "ablation": ablation,
        "paired": _paired(chosen, m, table, routers),
        "notes": notes,
    }


def _served_kway(dataset, p, protocol, x, mk, splits, tk, notes) -> KwayRouter:
    """The registered k-way champion; for the test split, when there is none (or it was
    trained over another strategy table), one trained here on train with τ from val."""
    from r2adapter.kway.registry import load_kway

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


def _two_way_champion(kind, dataset, labels, qv, protocol, notes):
    """A registered two-way champion's decisions, timed; on `all`, τ calibrated label-free to
    its graph budget on the corpus's own questions."""
    from r2adapter.registry.models import load_router
    from r2adapter.route.kinds import TRAINED_ROUTERS

    router, version = load_router(kind, "champion")
    router.bind(dataset, _graphs())
    if protocol == "all":
        usage = router_params(TRAINED_ROUTERS[kind].backbone).max_graph_usage
        tau = router.calibrate([lab.question for lab in labels], usage, qv)
        notes.append(f"{kind}: champion v{version}, τ calibrated to {tau:.3f} (usage {usage})")
    return _time_two_way(lambda q, v: bool(router.decide([q], v).graph[0]), labels, qv)


def _graphs():
    from r2adapter.retrieve.graph_index import GRAPHS

    return GRAPHS


def _oracle(m: dict[str, np.ndarray], table: Sequence[Strategy], cols: Sequence[int]) -> np.ndarray:
    """Per query, the cheapest (mean ms, then passages) strategy reaching the best recall."""
    c = np.asarray(cols)
    mean_ms = m["ms"][:, c].mean(axis=0)
    order = c[np.lexsort((m["passages"][:, c].mean(axis=0), mean_ms))]
    best = m["recall"][:, c].max(axis=1)
    out = np.zeros(len(best), dtype=int)
    for i in range(len(best)):
        out[i] = next(j for j in order if m["recall"][i, j] >= best[i] - 1e-9)
    return out


def _frontier_at(
    two_way: dict[str, np.ndarray],
    routers: dict[str, dict[str, Any]],
    frontier: list[dict[str, Any]],
    per_budget: dict[float, np.ndarray],
    m: dict[str, np.ndarray],
    kway_cols: Sequence[int],
) -> dict[str, Any]:
    """For each two-way router, kway's two frontier points around its mean ms: `within`,
    the costliest budget at no more ms, and `above`, the cheapest budget over it (a
    frontier point a few tenths of a ms dearer is the same cost within timing noise); each
    paired with the router on the same queries."""
    out: dict[str, Any] = {}
    rows = np.arange(len(m["recall"]))
    for name, ch in two_way.items():
        ms = routers[name]["mean_ms"]
        sides = {
            "within": max(
                (f for f in frontier if f["mean_ms"] <= ms + 1e-9),
                key=lambda f: f["mean_ms"],
                default=None,
            ),
            "above": min(
                (f for f in frontier if f["mean_ms"] > ms + 1e-9),
                key=lambda f: f["mean_ms"],
                default=None,
            ),
        }
        out[name] = {"router_recall": routers[name]["recall"], "router_ms": ms}
        for side, f in sides.items():
            if f is None:
                out[name][side] = None
                continue
            picked = np.array([kway_cols[c] for c in per_budget[f["budget"]]])
            out[name][side] = {
                "budget": f["budget"],
                "kway_recall": f["recall"],
                "kway_ms": f["mean_ms"],
                "paired": paired_interval(m["recall"][rows, picked], m["recall"][rows, ch]),
            }
    return out


MOONSHOT_MS, MOONSHOT_PASSAGES = 0.7, 3.5  # of always-graph@5's mean ms; passages at most


def budgeted_oracle(
    m: dict[str, np.ndarray], cap_ms: float, cap_passages: float
) -> tuple[float, np.ndarray]:
    """The best mean recall a per-query choice among every labelled strategy reaches with
    mean ms ≤ `cap_ms` and mean passages ≤ `cap_passages` (Lagrangian: each query takes
    argmax recall − λ·ms − μ·passages, over a grid of λ, μ; the best feasible choice)."""
    r, ms, ps = m["recall"], m["ms"], m["passages"]
    rows = np.arange(len(r))
    best: tuple[float, np.ndarray] = (float("-inf"), np.zeros(len(r), dtype=int))
    for lam in np.concatenate([[0.0], np.geomspace(1e-4, 1.0, 60)]):
        for mu in np.concatenate([[0.0], np.geomspace(1e-3, 1.0, 40)]):
            ch = np.argmax(r - lam * ms - mu * ps - 1e-9 * ms, axis=1)
            if ms[rows, ch].mean() <= cap_ms + 1e-9 and ps[rows, ch].mean() <= cap_passages:
                got = float(r[rows, ch].mean())
                if got > best[0]:
                    best = (got, ch)
    return best


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
    ma = _columns(m, cols)
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


def _two_way_oof(kind, dataset, labels, records) -> np.ndarray:
    from r2adapter.evaluate.folds import two_way_oof

    missing = [lab.query_id for lab in labels if lab.query_id not in records]
    if missing:
        raise R2AError(f"{len(missing)} queries have no two-way labels: run `r2a label`")
    oof = two_way_oof(kind, [records[lab.query_id] for lab in labels], dataset)
    return np.array(
        [
            oof[q]["p_graph"] - oof[q]["p_dense"] > oof[q]["tau"]
            for q in (lab.query_id for lab in labels)
        ]
    )


def _two_way_latency(kind, dataset, labels, qv, notes) -> np.ndarray:
    """The registered champion's routing latency per query (the folds' routers are the same
    network shape); without a champion, routing counts as free, and the note says so."""
    from r2adapter.registry.models import load_router

    try:
        router, _ = load_router(kind, "champion")
    except R2AError as e:
        notes.append(f"{kind}: routing latency not measured ({e})")
        return np.zeros(len(labels))
    router.bind(dataset, _graphs())
    _, ms = _time_two_way(lambda q, v: bool(router.decide([q], v).graph[0]), labels, qv)
    return ms


def _ner(labels, qv) -> tuple[np.ndarray, np.ndarray]:
    from r2adapter.route.baselines import NERRouter

    ner = NERRouter()
    return _time_two_way(lambda q, v: bool(ner.decide([q]).graph[0]), labels, qv)


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


def _paired(
    chosen: dict[str, np.ndarray],
    m: dict[str, np.ndarray],
    table: Sequence[Strategy],
    routers: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """kway against each router and the best fixed strategies, paired on the same queries;
    and against the fixed strategies' hull (the best random mix of them) at kway's own mean
    ms and mean passages."""
    if "kway" not in chosen:
        return {}
    rows = np.arange(len(chosen["kway"]))
    kr = m["recall"][rows, chosen["kway"]]
    out: dict[str, Any] = {}
    for name, ch in chosen.items():
        if name != "kway":
            out[f"kway_vs_{name}"] = paired_interval(kr, m["recall"][rows, ch])
    for j, s in enumerate(table):
        if s.name in ("graph@5", "catrag@5"):
            out[f"kway_vs_always_{s.name}"] = paired_interval(kr, m["recall"][:, j])
    k = routers["kway"]
    ceiling, mixed = mixture_ceiling(m, range(len(table)), k["mean_ms"], k["mean_passages"])
    out["hull_at_kway_cost"] = {
        "hull_recall": ceiling if np.isfinite(ceiling) else None,
        "kway_recall": k["recall"],
        "gap": k["recall"] - ceiling if np.isfinite(ceiling) else None,
        "paired": paired_interval(kr, mixed) if np.isfinite(ceiling) else None,
    }
    return out
