"""`r2a evaluate routing --protocol loco --dataset D`: leave one corpus out (issue 24).

The k-way router is trained on the union of every *other* labelled corpus
(labels/<C>.strategies.jsonl for each shipped or named corpus C ≠ D; heads on their train
splits, thresholds on their val splits, each corpus's features read on its own graph), then
transferred to D without D's labels, as `--protocol all` transfers the champion
(`kway.transfer`: `plugin` re-searches the thresholds at D's own strategy ms, timed without
gold, with the heads' suitabilities standing in for recall). D's labels score it and every
fixed strategy (`always_<strategy>`) on all of D's labelled queries, paired.

Two operating points, each trained and transferred the same way. `kway` is the quality
point (kway.quality_route at kway.quality_budget): the one issue 24's target is about,
the best fixed strategy's recall at no more than its cost. After the plug-in search its
thresholds are raised by a margin chosen on the training corpora alone (`nested_margin`:
trained on one, transferred to another). `kway_served` is the served point (kway.route at
kway.budget, R²Adapter's target: always-graph@5's recall at less), transferred with no
margin (its cost cap binds: params.yaml says why). Without a quality route `kway` is the
served point and there is no second row.

Nothing is chosen on D: the route sets, budgets and settings are params.yaml's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from r2adapter.config import kway_params
from r2adapter.errors import R2AError
from r2adapter.evaluate.routing_report import cost_of, graphs, oracle_choice, router_figures
from r2adapter.evaluate.stats import paired_bootstrap, ratio_interval
from r2adapter.kway.costs import price
from r2adapter.kway.evaluate import _time_kway
from r2adapter.kway.transfer import (
    Point,
    _choice,
    _concat,
    _Corpus,
    _train,
    _transfer,
    choose_point,
    corpus_groups,
    read_corpora,
    training_corpora,
)
from r2adapter.kway.trim import choose_base, choose_trim, fit_trim, trim_features, trim_strategies
from r2adapter.reports.plane import paired_rows


def loco_report(
    dataset: str,
    budget: float | None = None,
    corpora: Sequence[str] | None = None,
    profile: str | None = None,
) -> dict[str, Any]:
    """`dataset` held out (with every query set over its passages); `profile` the cost
    profile the routers train and are judged under (default params.yaml cost.profile)."""
    from r2adapter.config import COST_PROFILES, cost_params

    if budget is not None and not 0.0 <= budget <= 1.0:
        raise R2AError(f"--budget must be in [0, 1], not {budget}")
    prof = cost_params().priced(profile)
    every = kway_params() if budget is None else kway_params(budget=budget)
    train_on = training_corpora(dataset, corpora)
    if not train_on:
        raise R2AError(
            f"loco: no other corpus has strategy labels to train on; run `r2a label --dataset "
            f"C` for another corpus C (held out: {dataset})"
        )
    trims = [t for b in every.trim_bases for t in trim_strategies(b, every.trim_ks)]
    extra = tuple(dict.fromkeys(t for t in trims if t not in every.strategies))
    names, table, data = read_corpora(
        (*train_on, dataset), replace(every, strategies=every.strategies + extra), prof.name
    )
    groups = corpus_groups(train_on, data)
    pool = list(groups.values())
    held = data[dataset]
    m, n = held.m, len(held.labels)
    qt = [lab.qtype for lab in held.labels]
    zero = np.zeros(n)
    routers: dict[str, dict[str, Any]] = {
        f"always_{s.name}": router_figures(np.full(n, j), zero, m, table, qt)
        for j, s in enumerate(table)
    }
    notes: list[str] = [f"cost profile {prof.name}: {prof.unit} ({prof.source})"]
    points: dict[str, Any] = {}
    choices: dict[str, np.ndarray] = {}
    latencies: dict[str, np.ndarray] = {}
    point, nested = choose_point(groups, names, table, every)
    how = "chosen in the fold" if nested else "params.yaml's quality point (one training corpus)"
    runs = [("kway", how, point, nested)]
    runs.append(("kway_served", "served", Point(every.routed().strategies, every.budget, 0.0), []))
    for row, how, pt, rows in runs:
        p = replace(every, route=pt.route, budget=pt.budget).routed()
        if pt.transfer:
            p = replace(p, transfer=pt.transfer)
        cols = [names.index(s) for s in p.strategies]
        tk = [table[j] for j in cols]
        router, n_tr, n_va = _train(pool, cols, tk, p, "+".join(groups))
        kr = _transfer(router, held, cols, p, notes)
        choice = _choice(kr, held.x, pt.margin, cols)
        kr = kr.with_thresholds(np.clip(kr.tau + pt.margin, 0.0, 1.0)).bind(dataset, graphs())
        latencies[row] = _time_kway(kr, held.labels, held.qv)
        routers[row] = router_figures(choice, latencies[row], m, table, qt)
        choices[row] = choice
        points[row] = {
            "point": how,
            "strategies": list(p.strategies),
            "budget": p.budget,
            "transfer_margin": pt.margin,
            "transfer": p.transfer,
            "nested": rows,
        }
        notes.append(
            f"{row} ({how}): {', '.join(p.strategies)} at budget {p.budget}, margin "
            f"{pt.margin:+.2f}, transfer {p.transfer}; trained on "
            f"{' + '.join(f'{c} ({len(data[c].labels)})' for c in train_on)}"
            f" (heads on {n_tr} train, thresholds on {n_va} val queries; a query asked in two"
            f" query sets of one corpus counted once); {dataset} held out"
        )
        routers[f"oracle_routed{row[4:]}"] = router_figures(
            oracle_choice(m, table, cols), zero, m, table, qt
        )
    if every.trim_bases:
        trim_row(dataset, groups, held, names, table, every, qt, routers, choices, latencies,
                 points, notes)  # fmt: skip
    routers["oracle"] = router_figures(
        oracle_choice(m, table, range(len(table))), zero, m, table, qt
    )
    paired = paired_rows(choices, m, table, routers)
    for row in choices:
        cmp = best_fixed_comparison(choices[row], m, table, routers, row, latencies[row])
        paired.update(cmp)
        if cmp:
            routers[row]["paired_best_fixed"] = next(iter(cmp.values()))
    costs = {
        name: {
            row: float(_profile_cost(held, name, choices[row], latencies[row]).mean())
            for row in choices
        }
        for name in COST_PROFILES
    }
    return {
        "dataset": dataset,
        "protocol": "loco",
        "cost_profile": prof.name,
        "cost_unit": prof.unit,
        "costs_by_profile": costs,
        "n_queries": n,
        "trained_on": {c: len(data[c].labels) for c in train_on},
        "point": runs[0][1],
        "budget": point.budget,
        "max_passages": every.max_passages,
        "strategies": list(point.route),
        "labelled_strategies": list(every.strategies),
        "points": points,
        "routers": routers,
        "frontier": [],
        "ablation": {},
        "paired": paired,
        "notes": notes,
        # each router's strategy per held-out query (`r2a evaluate answers --router-report`)
        "choices": {
            row: {lab.query_id: table[int(c)].name for lab, c in zip(held.labels, ch, strict=True)}
            for row, ch in choices.items()
        },
    }


def trim_row(
    dataset: str,
    groups: dict[str, _Corpus],
    held: _Corpus,
    names: Sequence[str],
    table: Sequence[Any],
    every: Any,
    qt: Sequence[str],
    routers: dict[str, Any],
    choices: dict[str, np.ndarray],
    latencies: dict[str, np.ndarray],
    points: dict[str, Any],
    notes: list[str],
) -> None:
    """The `trim` row (kway/trim.py): its base and threshold chosen on the training
    corpora's nested transfers, then fitted on all of them and applied to `dataset`. Its
    routing cost is dense retrieval's (the ranking it compares base's with), at each
    query's labelled price."""
    views = graphs()
    base = choose_base(groups, names, every.trim_bases)

    def feats(name: str, d: _Corpus) -> np.ndarray:  # a group's passages: its first member's
        return trim_features(d.labels, d.qv, views.get(name.split("+")[0]), base)

    x = {k: feats(k, d) for k, d in groups.items()}
    point, rows = choose_trim(groups, names, every, base, x)
    cols = [names.index(s) for s in trim_strategies(base, every.trim_ks)]
    trim = fit_trim(np.vstack(list(x.values())), _concat(list(groups.values())).m, cols, every.seed)
    if point.threshold is None:
        choice = np.full(len(held.labels), cols[-1])
    else:
        choice = trim.decide(feats(dataset, held), point.threshold)
    route_ms = np.array([lab.prices(every.cost).get("dense", 0.0) for lab in held.labels])
    routers["trim"] = router_figures(choice, route_ms, held.m, table, qt)
    choices["trim"], latencies["trim"] = choice, route_ms
    points["trim"] = {
        "point": "chosen in the fold",
        "base": base,
        "ks": list(every.trim_ks),
        "threshold": point.threshold,
        "nested": rows,
    }
    notes.append(
        f"trim (chosen in the fold): {base} cut to the first k of {list(every.trim_ks)} where"
        f" the classifier's probability reaches {point.threshold} (None: never); fitted on "
        f"{' + '.join(groups)}; {dataset} held out; routing cost: dense retrieval's ms"
    )


def _profile_cost(d: _Corpus, profile: str, choice: np.ndarray, route_ms: np.ndarray) -> np.ndarray:
    """Per query, what the chosen strategies cost under another profile."""
    rows = np.arange(len(choice))
    m = d.m
    return np.asarray(
        price(
            profile,
            m["ms"][rows, choice] + route_ms,
            m["prompt_tokens"][rows, choice],
            m["llm_calls"][rows, choice],
        )
    )


def best_fixed_comparison(
    choice: np.ndarray,
    m: dict[str, np.ndarray],
    table: Sequence[Any],
    routers: dict[str, Any],
    row: str = "kway",
    route_ms: np.ndarray | None = None,
) -> dict[str, Any]:
    """A k-way row against the best fixed strategy at ≤ 5 passages (`kway.max_passages`;
    ties: the cheaper), paired on the same queries: the recall difference and the cost
    ratio (under the matrix's profile), each with its 95% bootstrap interval. It "matches"
    when the recall interval's lower bound is ≥ −.02, it is "cheaper" when the cost
    ratio's upper bound is < 1."""
    fair = [
        (j, s)
        for j, s in enumerate(table)
        if routers[f"always_{s.name}"]["mean_passages"] <= kway_params().max_passages + 0.01
    ]
    if not fair:
        return {}
    j, s = max(
        fair,
        key=lambda js: (
            routers[f"always_{js[1].name}"]["recall"],
            -routers[f"always_{js[1].name}"].get(
                "mean_cost", routers[f"always_{js[1].name}"]["mean_ms"]
            ),
        ),
    )
    best = routers[f"always_{s.name}"]
    k = routers[row]
    rows = np.arange(len(choice))
    cost = cost_of(m)
    mine = cost[rows, choice] + m.get("ms_price", np.ones(len(choice))) * (
        np.zeros(len(choice)) if route_ms is None else route_ms
    )
    rec = paired_bootstrap(m["recall"][rows, choice], m["recall"][:, j])
    ratio = ratio_interval(mine, cost[:, j]) if cost[:, j].sum() > 0 else None
    return {
        "best_fixed" + row[4:]: {
            "strategy": s.name,
            "recall": best["recall"],
            "mean_ms": best["mean_ms"],
            "mean_cost": best.get("mean_cost"),
            "kway_recall": k["recall"],
            "kway_mean_ms": k["mean_ms"],
            "kway_mean_cost": k.get("mean_cost"),
            "ms_ratio": k["mean_ms"] / best["mean_ms"] if best["mean_ms"] > 0 else None,
            "cost_ratio": ratio,
            "paired": rec,
            "diff": rec["diff"],
            "ci95": rec["ci95"],
            "matches": rec["ci95"][0] >= -0.02,
            "cheaper": bool(ratio and ratio["ci95"][1] < 1.0),
        }
    }
