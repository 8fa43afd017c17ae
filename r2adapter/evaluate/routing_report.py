"""`r2a evaluate routing`: every router under the same protocol. Two reports, one room:

- `routing_report`: the two-way routers and the baselines on a labelled split (dense vs
  graph at five passages, from the two-way labels).
- the plane's pieces (`Plane`, `router_figures`, the oracles, the mixture ceiling) that
  r2adapter/reports/plane.py `plane_report` (`--protocol cv5|test|all`) and the families'
  own evaluations read.

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
from r2adapter.label.annotate import db_labels
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
