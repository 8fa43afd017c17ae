"""`r2a evaluate routing`: every router under the same protocol on a labelled split. The
trained routers come from the caller (`champion`: r2adapter/steps.py loads them from the
registry, a floor above), so the report does not reach up to the registry."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

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
