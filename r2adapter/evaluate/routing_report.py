"""`r2a evaluate routing`: every router under the same protocol. Two reports, one room:

- `routing_report`: the two-way routers and the baselines on a labelled split (dense vs
  graph at five passages, from the two-way labels).
- `plane_report` (`--protocol cv5|test|all`): every router and every single strategy on the
  quality–cost plane of the strategy labels, with the k-way family's plane and rows
  (r2adapter/kway/evaluate.py `kway_plane`), paired intervals (r2adapter/evaluate/stats.py).

The trained routers come from the caller (`champion`: r2adapter/steps.py loads them from the
registry, a floor above; another family's rows are handed in as `extra`), so the report
reaches up to no registry and no family. Routing latencies come from the one timer
(r2adapter/evaluate/timing.py) and its thread policy."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from r2adapter.config import label_params
from r2adapter.errors import R2AError
from r2adapter.evaluate.routing import evaluate_routers, recovered_gain
from r2adapter.evaluate.stats import paired_bootstrap
from r2adapter.evaluate.timing import time_per_query
from r2adapter.label.annotate import LabelRecord, db_labels
from r2adapter.route.base import Router
from r2adapter.route.baselines import AlwaysDense, AlwaysGraph, LLMRouter, NERRouter, OracleRouter
from r2adapter.route.kinds import TRAINED_ROUTERS

if TYPE_CHECKING:
    from r2adapter.route.trained import TrainedRouter

Champion = Callable[[str], "tuple[TrainedRouter, str]"]  # router kind → its champion and version


def routing_report(
    dataset: str,
    champion: Champion,
    split: str = "test",
    rule: str | None = None,
    calibrate: float | None = None,
) -> dict[str, object]:
    """`champion(kind)` loads each trained router (r2adapter/steps.py: the registry's
    `champion` alias); an R2AError leaves that router out, with a note. With `calibrate`,
    the trained routers' τ is set, without labels, so that this share of the corpus's
    questions goes to graph (for a corpus they were not trained on)."""
    from r2adapter.index.encoder import get_encoder
    from r2adapter.retrieve.graph_index import GRAPHS
    from r2adapter.store.queries import stored_queries

    if calibrate is not None and not 0.0 <= calibrate <= 1.0:
        raise R2AError(f"--calibrate-usage must be in [0, 1], not {calibrate}")
    rule = rule or label_params().rule
    records = db_labels(dataset, rule, split)
    routers: list[Router] = [
        AlwaysDense(),
        AlwaysGraph(),
        NERRouter(),
        OracleRouter({r.question: r.preference for r in records}),
    ]
    notes, versions, taus = [], {}, {}
    corpus: list[str] = []
    corpus_emb = None
    if calibrate is not None:  # the corpus's questions, encoded once for both routers
        corpus = [q.question for q in stored_queries(dataset, complete_only=False)]
        corpus_emb = get_encoder().encode(corpus) if corpus else None
    for kind in TRAINED_ROUTERS:
        try:
            router, version = champion(kind)
            router.bind(dataset, GRAPHS)
            if calibrate is not None:  # before the router joins: a failure leaves it out
                tau_star = router.tau
                tau = router.calibrate(corpus, calibrate, corpus_emb)
                taus[kind] = {"tau_star": tau_star, "tau_calibrated": tau}
            routers.append(router)
            versions[kind] = version
        except R2AError as e:
            notes.append(str(e))
    try:
        routers.append(LLMRouter())
    except R2AError as e:
        notes.append(str(e))
    emb = get_encoder().encode([r.question for r in records])
    results = evaluate_routers(routers, records, emb)
    return {
        "dataset": dataset,
        "split": split,
        "rule": rule,
        "n_queries": len(records),
        "routers": results,
        "pgr": {k: recovered_gain(results, k) for k in versions},
        "champion_versions": versions,
        "calibration": {"usage": calibrate, "taus": taus} if calibrate is not None else None,
        "notes": notes,
    }


# ---- every router on the quality–cost plane (`r2a evaluate routing --protocol cv5|test|all`)
#
# The plane is one strategy-label matrix (`m`: per query × strategy recall, full chain,
# passages, tokens, ms) over one strategy table; a router is a choice of a column per query.
# The k-way family builds the plane and its own rows (r2adapter/kway/evaluate.py
# `kway_plane`); r2adapter/steps.py hands it here with the two-way champions and any other
# family's rows (ADR's `merge_adr_rows`), so this floor imports no family above it.

TWO_WAY = ("dense@5", "graph@5")  # the two-way routers' strategies (label.top_k passages)
REWRITTEN_GRAPH = "graph+rw@5"  # a two-way router's graph side when the rewrite fires

Matrix = dict[str, np.ndarray]
# a family's extra rows: (dataset, protocol, query ids, routers, notes) → merged in place
ExtraRows = Callable[[str, str, Sequence[str], dict[str, dict[str, Any]], list[str]], None]


class StrategyLike(Protocol):
    """What the report reads of a strategy (r2adapter/kway/strategies.py `Strategy`)."""

    @property
    def name(self) -> str: ...

    @property
    def graph_side(self) -> bool: ...


@dataclass
class Plane:
    """The k-way family's part of the report: the plane and the k-way router on it."""

    dataset: str
    protocol: str
    query_ids: list[str]
    questions: list[str]
    qv: np.ndarray  # the query embeddings (what the retrievers compute anyway)
    m: Matrix  # every labelled strategy's outcomes on the report's queries
    table: Sequence[StrategyLike]
    kway_cols: list[int]  # the columns k-way routes among
    budget: float
    max_passages: float
    strategies: list[str]  # what kway routes among (kway.route)
    labelled_strategies: list[str]
    kway_choice: np.ndarray  # a column of `table` per query
    kway_ms: np.ndarray  # k-way's routing ms per query
    frontier: list[dict[str, Any]] = field(default_factory=list)
    per_budget: dict[float, np.ndarray] = field(default_factory=dict)  # cols of kway_cols
    ablation: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def with_two_way(names: Sequence[str]) -> list[str]:
    """The strategies `names`, and the two-way routers' two if missing."""
    return list(names) + [s for s in TWO_WAY if s not in names]


def columns(m: Matrix, cols: Sequence[int]) -> Matrix:
    """The outcome matrix of the strategies `cols` alone: suitable again means reaching the
    best recall among them (as `r2a train --router kway` labels it), not among every
    labelled strategy."""
    out = {k: v[:, cols] if v.ndim == 2 else v for k, v in m.items()}
    out["suitable"] = out["recall"] >= out["recall"].max(axis=1, keepdims=True) - 1e-9
    return out


def router_figures(
    choice: np.ndarray,
    route_ms: np.ndarray,
    m: Matrix,
    table: Sequence[StrategyLike],
    qtypes: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The report's fields for a router that chose strategy index `choice[i]` for query i;
    `mean_ms` is routing plus retrieval (the chosen strategy's ms as labelled); `mean_cost`
    what the query costs the user under the matrix's cost profile (retrieval, the reader's
    prompt and answer, the strategy's LLM calls, and the routing ms at the profile's ms
    price: r2adapter/kway/costs.py); with `qtypes`, `by_type` splits the figures by query
    type (`1hop`, `1hop_template`, `2hop`, …; `multihop`: every type but the 1hops)."""
    rows = np.arange(len(choice))
    names = [s.name for s in table]
    picked = [names[c] for c in choice]
    share = {n: float(np.mean([p == n for p in picked])) for n in names}
    cost = cost_of(m)[rows, choice] + m.get("ms_price", np.ones(len(choice))) * route_ms
    out = {
        "recall": float(m["recall"][rows, choice].mean()),
        "fcr": float(m["full"][rows, choice].mean()),
        "mean_passages": float(m["passages"][rows, choice].mean()),
        "mean_tokens": float(m["tokens"][rows, choice].mean()),
        "mean_ms": float((m["ms"][rows, choice] + route_ms).mean()),
        "mean_cost": float(cost.mean()),
        "graph_usage": float(np.mean([table[c].graph_side for c in choice])),
        "share": {n: v for n, v in share.items() if v > 0},
        "latency_ms_p50": float(np.median(route_ms)),
    }
    if "prompt_tokens" in m:
        out["mean_prompt_tokens"] = float(m["prompt_tokens"][rows, choice].mean())
    if qtypes is not None:
        out["by_type"] = by_type(choice, cost, m, qtypes)
    return out


def cost_of(m: Matrix) -> np.ndarray:
    """The per query × strategy cost: the profile's (`cost`), else the retrieval ms."""
    return m["cost"] if "cost" in m else m["ms"]


def type_groups(qtypes: Sequence[str]) -> dict[str, np.ndarray]:
    """Query type → its rows: each type, and `multihop` (every type not a 1hop) beside
    `1hop_all` (every 1hop type) where both occur."""
    t = np.asarray(list(qtypes))
    groups = {str(k): np.where(t == k)[0] for k in sorted(set(t.tolist()))}
    one = np.array([str(x).startswith("1hop") for x in t], dtype=bool)
    if one.any() and (~one).any():
        groups["1hop_all"] = np.where(one)[0]
        groups["multihop"] = np.where(~one)[0]
    return groups


def by_type(
    choice: np.ndarray, cost: np.ndarray, m: Matrix, qtypes: Sequence[str]
) -> dict[str, dict[str, float]]:
    """Recall, FCR, passages, prompt tokens and cost of the chosen strategies per type."""
    rows = np.arange(len(choice))
    out = {}
    for name, ix in type_groups(qtypes).items():
        c = choice[ix]
        out[name] = {
            "n": int(len(ix)),
            "recall": float(m["recall"][rows[ix], c].mean()),
            "fcr": float(m["full"][rows[ix], c].mean()),
            "mean_passages": float(m["passages"][rows[ix], c].mean()),
            "mean_cost": float(cost[ix].mean()),
        }
        if "prompt_tokens" in m:
            out[name]["mean_prompt_tokens"] = float(m["prompt_tokens"][rows[ix], c].mean())
    return out


def mixture_ceiling(
    m: Matrix, cols: Sequence[int], at_ms: float, at_passages: float
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


def budgeted_oracle(m: Matrix, cap_ms: float, cap_passages: float) -> tuple[float, np.ndarray]:
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


def oracle_choice(m: Matrix, table: Sequence[StrategyLike], cols: Sequence[int]) -> np.ndarray:
    """Per query, the cheapest strategy reaching the best recall: by that query's own cost
    under the matrix's profile (ties: mean cost, then passages)."""
    c = np.asarray(cols)
    cost = cost_of(m)
    order = c[np.lexsort((m["passages"][:, c].mean(axis=0), cost[:, c].mean(axis=0)))]
    best = m["recall"][:, c].max(axis=1)
    out = np.zeros(len(best), dtype=int)
    for i in range(len(best)):
        reach = [j for j in order if m["recall"][i, j] >= best[i] - 1e-9]
        out[i] = min(reach, key=lambda j: cost[i, j])  # stable: order breaks ties
    return out


def two_way_choice(
    graph: np.ndarray, table: Sequence[StrategyLike], graph_side: str = ""
) -> np.ndarray:
    """A two-way router's choice as strategy columns: dense@5, or graph@5 (`graph_side`:
    another graph strategy, e.g. graph+rw@5)."""
    names = [s.name for s in table]
    return np.where(graph, names.index(graph_side or TWO_WAY[1]), names.index(TWO_WAY[0]))


def graphs() -> Any:
    """Where the routers read a corpus's passages: its saved view beside its labels, else its
    index (r2adapter/retrieve/passage_view.py)."""
    from r2adapter.retrieve.passage_view import PASSAGE_VIEWS

    return PASSAGE_VIEWS


def _time_two_way(
    decide: Callable[[str, np.ndarray], bool], questions: Sequence[str], qv: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A two-way router's graph decisions and routing ms, one query at a time (the one
    timer, r2adapter/evaluate/timing.py)."""
    graph, ms = time_per_query(lambda i: decide(questions[i], qv[i : i + 1]), len(questions))
    return np.array(graph, dtype=bool), ms


def _two_way_oof(kind: str, plane: Plane, records: dict[str, LabelRecord]) -> np.ndarray:
    from r2adapter.evaluate.folds import two_way_oof

    missing = [q for q in plane.query_ids if q not in records]
    if missing:
        raise R2AError(f"{len(missing)} queries have no two-way labels: run `r2a label`")
    oof = two_way_oof(kind, [records[q] for q in plane.query_ids], plane.dataset)
    return np.array(
        [oof[q]["p_graph"] - oof[q]["p_dense"] > oof[q]["tau"] for q in plane.query_ids]
    )


def _two_way_latency(kind: str, plane: Plane, champion: Champion, notes: list[str]) -> np.ndarray:
    """The registered champion's routing latency per query (the folds' routers are the same
    network shape); without a champion, routing counts as free, and the note says so."""
    try:
        router, _ = champion(kind)
    except R2AError as e:
        notes.append(f"{kind}: routing latency not measured ({e})")
        return np.zeros(len(plane.query_ids))
    router.bind(plane.dataset, graphs())
    _, ms = _time_two_way(
        lambda q, v: bool(router.decide([q], v).graph[0]), plane.questions, plane.qv
    )
    return ms


def _two_way_champion(
    kind: str, plane: Plane, champion: Champion, notes: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """A registered two-way champion's decisions, timed; on `all`, τ calibrated label-free to
    its graph budget on the corpus's own questions."""
    from r2adapter.config import router_params

    router, version = champion(kind)
    router.bind(plane.dataset, graphs())
    if plane.protocol == "all":
        usage = router_params(TRAINED_ROUTERS[kind].backbone).max_graph_usage
        tau = router.calibrate(plane.questions, usage, plane.qv)
        notes.append(f"{kind}: champion v{version}, τ calibrated to {tau:.3f} (usage {usage})")
    return _time_two_way(
        lambda q, v: bool(router.decide([q], v).graph[0]), plane.questions, plane.qv
    )


def _ner(plane: Plane) -> tuple[np.ndarray, np.ndarray]:
    ner = NERRouter()
    return _time_two_way(lambda q, v: bool(ner.decide([q]).graph[0]), plane.questions, plane.qv)


def frontier_at(
    two_way: dict[str, np.ndarray],
    routers: dict[str, dict[str, Any]],
    frontier: list[dict[str, Any]],
    per_budget: dict[float, np.ndarray],
    m: Matrix,
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
                "paired": paired_bootstrap(m["recall"][rows, picked], m["recall"][rows, ch]),
            }
    return out


def paired_rows(
    chosen: dict[str, np.ndarray],
    m: Matrix,
    table: Sequence[StrategyLike],
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
            out[f"kway_vs_{name}"] = paired_bootstrap(kr, m["recall"][rows, ch])
    for j, s in enumerate(table):
        if s.name in ("graph@5", "catrag@5"):
            out[f"kway_vs_always_{s.name}"] = paired_bootstrap(kr, m["recall"][:, j])
    k = routers["kway"]
    ceiling, mixed = mixture_ceiling(m, range(len(table)), k["mean_ms"], k["mean_passages"])
    out["hull_at_kway_cost"] = {
        "hull_recall": ceiling if np.isfinite(ceiling) else None,
        "kway_recall": k["recall"],
        "gap": k["recall"] - ceiling if np.isfinite(ceiling) else None,
        "paired": paired_bootstrap(kr, mixed) if np.isfinite(ceiling) else None,
    }
    return out


def plane_report(
    plane: Plane,
    champion: Champion,
    two_way: Sequence[str] = tuple(TRAINED_ROUTERS),
    extra: Sequence[ExtraRows] = (),
) -> dict[str, Any]:
    """Every router on the plane: each fixed strategy (`always_<strategy>`), k-way (the
    plane's), each two-way router in `two_way` (cv5: trained out of fold,
    r2adapter/evaluate/folds.py, timed as its registered `champion`; test/all: the
    champion), with the structural rewrite (`<kind>_rw`) when graph+rw@5 is labelled, the
    NER baseline, the oracles, `extra` families' rows, and the paired intervals."""
    table, m, n = plane.table, plane.m, len(plane.query_ids)
    notes = list(plane.notes)
    routers: dict[str, dict[str, Any]] = {}
    zero = np.zeros(n)
    for j, s in enumerate(table):
        routers[f"always_{s.name}"] = router_figures(np.full(n, j), zero, m, table)
    routers["kway"] = router_figures(plane.kway_choice, plane.kway_ms, m, table)
    chosen: dict[str, np.ndarray] = {"kway": plane.kway_choice}
    ablation = dict(plane.ablation)
    records = {r.query_id: r for r in db_labels(plane.dataset, label_params().rule, None)}
    names = [s.name for s in table]
    for kind in two_way:
        try:
            if plane.protocol == "cv5":
                graph = _two_way_oof(kind, plane, records)
                lat2 = _two_way_latency(kind, plane, champion, notes)
            else:
                graph, lat2 = _two_way_champion(kind, plane, champion, notes)
            chosen[kind] = two_way_choice(graph, table)
            routers[kind] = router_figures(chosen[kind], lat2, m, table)
            if REWRITTEN_GRAPH in names:
                # as served with the structural rewriter: every graph-bound query rewritten
                # (router.structural_epsilon), so its graph side is graph+rw@5
                rw = f"{kind}_rw"
                chosen[rw] = two_way_choice(graph, table, REWRITTEN_GRAPH)
                routers[rw] = router_figures(chosen[rw], lat2, m, table)
        except R2AError as e:
            notes.append(f"{kind}: {e}")
    if plane.protocol == "cv5":
        ablation["frontier_at_two_way_cost"] = frontier_at(
            {k: v for k, v in chosen.items() if k != "kway"},
            routers,
            plane.frontier,
            plane.per_budget,
            m,
            plane.kway_cols,
        )
    ner_graph, ner_ms = _ner(plane)
    routers["ner"] = router_figures(two_way_choice(ner_graph, table), ner_ms, m, table)
    # the oracle over every labelled strategy, and over the ones kway routes among (its ceiling)
    routers["oracle"] = router_figures(oracle_choice(m, table, range(len(table))), zero, m, table)
    routers["oracle_routed"] = router_figures(
        oracle_choice(m, table, plane.kway_cols), zero, m, table
    )
    for rows in extra:  # another family's routers (ADR's, issue 16)
        rows(plane.dataset, plane.protocol, plane.query_ids, routers, notes)
    return {
        "dataset": plane.dataset,
        "protocol": plane.protocol,
        "n_queries": n,
        "budget": plane.budget,
        "max_passages": plane.max_passages,
        "strategies": plane.strategies,
        "labelled_strategies": plane.labelled_strategies,
        "routers": routers,
        "frontier": plane.frontier,
        "ablation": ablation,
        "paired": paired_rows(chosen, m, table, routers),
        "notes": notes,
    }
