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
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from r2adapter.config import KwayParams, kway_params
from r2adapter.errors import R2AError
from r2adapter.evaluate.routing_report import (
    columns,
    cost_of,
    graphs,
    oracle_choice,
    router_figures,
    with_two_way,
)
from r2adapter.evaluate.stats import paired_bootstrap, ratio_interval
from r2adapter.kway.costs import price
from r2adapter.kway.evaluate import _embed, _features, _fit, _time_kway, calibrate_kway
from r2adapter.kway.labels import outcome_matrix, read_strategy_labels, strategy_label_path
from r2adapter.kway.strategies import strategy_table
from r2adapter.reports.plane import paired_rows


def training_corpora(held_out: str, corpora: Sequence[str] | None = None) -> list[str]:
    """The corpora a leave-one-out router trains on: those given, else every shipped one
    with strategy labels, less the held-out corpus and every query set over the same
    passages (musique_dev_mixed is held out with musique_dev: `corpus_key`)."""
    from r2adapter.data.adapters import SHIPPED_DATASETS

    names = list(corpora) if corpora else list(SHIPPED_DATASETS)
    held = corpus_key(held_out)
    return [
        c
        for c in names
        if c != held_out
        and strategy_label_path(c).is_file()
        and (held is None or corpus_key(c) != held)
    ]


def corpus_key(dataset: str) -> str | None:
    """The stored corpus's identity (graph_store.corpus_key); None when the dataset is not
    loaded or the database cannot be reached (then it is its own corpus)."""
    from r2adapter.store.graph_store import corpus_key as key

    try:
        return key(dataset)
    except R2AError:
        return None


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
    best worst gap."""
    cands = candidate_points(every)
    transfers = list(every.transfer_candidates) or [every.transfer]
    keys = list(groups)
    if len(keys) < 2:
        route, budget = cands[0]
        return Point(route, budget, 0.0, transfers[0]), []
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
                cost = d.m["cost"]
                best_rec, best_cost = float(d.m["recall"][:, j].mean()), float(cost[:, j].mean())
                rr = np.arange(len(d.labels))
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
                            "recall": float(d.m["recall"][rr, ch].mean()),
                            "mean_cost": float(cost[rr, ch].mean()),
                            "best_fixed": table[j].name,
                            "best_fixed_recall": best_rec,
                            "best_fixed_cost": best_cost,
                        }
                    )
    return pick_point(rows, every.loco_tolerance), rows


def pick_point(rows: Sequence[dict[str, Any]], tolerance: float) -> Point:
    """`choose_point`'s rule over its nested rows."""
    by: dict[tuple[tuple[str, ...], float, float, str], list[dict[str, Any]]] = {}
    for r in rows:
        key = (tuple(r["route"]), r["budget"], r["margin"], r.get("transfer", ""))
        by.setdefault(key, []).append(r)

    def gap(rs: list[dict[str, Any]]) -> float:
        return round(min(r["recall"] - r["best_fixed_recall"] for r in rs), 9)

    def ratio(rs: list[dict[str, Any]]) -> float:
        return float(np.mean([r["mean_cost"] / max(r["best_fixed_cost"], 1e-12) for r in rs]))

    holds = [k for k, rs in by.items() if gap(rs) >= -tolerance - 1e-12]
    if holds:
        key = min(holds, key=lambda k: (round(ratio(by[k]), 6), -gap(by[k]), k[2]))
    else:
        key = max(by, key=lambda k: (gap(by[k]), -ratio(by[k]), -k[2]))
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
    names, table, data = read_corpora((*train_on, dataset), every, prof.name)
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
    runs = [("kway", "chosen in the fold", point, nested)]
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
