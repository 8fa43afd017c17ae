"""The k-way router in the MLflow registry: its own model (`r2a-router-kway`), trained on
the strategy labels' train split with τ searched on val, registered as `candidate`; the gate
promotes a candidate only when it is not worse on recall and not costlier on the frozen test
split than the champion."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from r2adapter.config import KwayParams, kway_params
from r2adapter.errors import R2AError
from r2adapter.kway.columns import KWAY_COLUMNS, KwayColumns
from r2adapter.kway.model import MODEL, load_kway
from r2adapter.label.corpora import training_corpora
from r2adapter.registry.promote import gate
from r2adapter.registry.training import Fitted, TrainingReport, train_and_register
from r2adapter.route.family import Encode, Route, query_vectors

log = logging.getLogger(__name__)


@dataclass
class SplitData:
    x: np.ndarray
    m: dict[str, np.ndarray]
    split: np.ndarray
    questions: list[str]
    qvecs: np.ndarray
    corpora: list[str] = field(default_factory=list)  # whose labels these are


def split_data(dataset: str, p: KwayParams) -> SplitData:
    """The strategy labels of `dataset` and of every corpus of p.train_corpora (each one's
    features read on its own graph), stacked: the union the router trains and is gated on."""
    from r2adapter.kway.labels import strategy_label_path

    corpora = training_corpora(dataset, p.train_corpora, strategy_label_path)
    parts = [corpus_split_data(c, p) for c in corpora]
    if len(parts) == 1:
        return parts[0]
    return SplitData(
        np.vstack([d.x for d in parts]),
        {k: np.concatenate([d.m[k] for d in parts]) for k in parts[0].m},
        np.concatenate([d.split for d in parts]),
        [q for d in parts for q in d.questions],
        np.vstack([d.qvecs for d in parts]),
        corpora,
    )


def corpus_split_data(dataset: str, p: KwayParams) -> SplitData:
    from r2adapter.kway.features import KwayFeatures, embed_questions
    from r2adapter.kway.labels import outcome_matrix, read_strategy_labels
    from r2adapter.kway.strategies import strategy_table
    from r2adapter.retrieve.passage_view import PASSAGE_VIEWS

    labels = read_strategy_labels(dataset, p)
    m = outcome_matrix(labels, strategy_table(p.strategies))
    questions = [lab.question for lab in labels]
    qv = embed_questions(questions)
    x = KwayFeatures(dataset, PASSAGE_VIEWS, p.features)(questions, qv)  # the labels' view
    return SplitData(
        x, m, np.array([lab.split for lab in labels]), [lab.question for lab in labels], qv,
        [dataset],
    )  # fmt: skip


def test_figures(router: Any, d: SplitData) -> dict[str, float]:
    """Recall, FCR, mean ms, passages and tokens of the router's choices on the test split."""

    te = np.where(d.split == "test")[0]
    if not len(te):
        return {}
    ch = router.choose(d.x[te])
    rows = np.arange(len(te))
    return {
        "recall": float(d.m["recall"][te][rows, ch].mean()),
        "fcr": float(d.m["full"][te][rows, ch].mean()),
        "mean_ms": float(d.m["ms"][te][rows, ch].mean()),
        "mean_cost": float(d.m["cost"][te][rows, ch].mean()),
        "mean_passages": float(d.m["passages"][te][rows, ch].mean()),
        "mean_tokens": float(d.m["tokens"][te][rows, ch].mean()),
    }


def train_and_register_kway(dataset: str, p: KwayParams | None = None) -> TrainingReport:
    """The k-way router trained on the strategy labels' train split with τ searched on val
    (the budget caps the cost under params.yaml cost.profile: kway/costs.py), in the one
    training run every family shares (r2adapter/registry/training.py)."""
    import mlflow

    from r2adapter.kway.cascade import Costs
    from r2adapter.kway.model import fit_kway

    t0 = time.perf_counter()
    p = (p or kway_params()).routed()  # the heads cover the strategies it routes among
    d = split_data(dataset, p)
    tr, va = np.where(d.split == "train")[0], np.where(d.split == "val")[0]
    if not len(tr) or not len(va):
        raise R2AError(f"{dataset}: the strategy labels need train and val queries")

    def costs(rows: np.ndarray) -> Costs:
        return Costs(d.m["recall"][rows], d.m["cost"][rows], d.m["passages"][rows])

    logged = {
        **{f"kway.{k}": v for k, v in asdict(p).items() if k != "strategies"},
        "kway.strategies": ",".join(p.strategies),
        "n_train": len(tr),
        "n_val": len(va),
        "kway.trained_on": ",".join(d.corpora),
    }

    def fit(run: object) -> Fitted:
        router, hist = fit_kway(
            d.x[tr], d.m["suitable"][tr], d.x[va], costs(va), costs(tr), p.strategies, p, dataset
        )
        for step, r, ms in zip(hist.steps, hist.val_recall, hist.val_ms, strict=True):
            mlflow.log_metrics({"val_recall": r, "val_mean_ms": ms}, step=step)
        return Fitted(
            MODEL,
            KWAY_COLUMNS,
            router.save,
            test_figures(router, d),
            {
                "best_step": hist.best_step,
                "thresholds": dict(zip(p.strategies, router.cfg.thresholds, strict=True)),
                "fallback": router.cfg.fallback,
                "trained_on": d.corpora,
            },
            {"best_step": hist.best_step},
        )

    return train_and_register("kway", dataset, logged, fit, started=t0)


class KwayFamily:
    """The k-way router as a router family (r2adapter/route/family.py): labelled by every
    strategy ranked and timed, gated on recall, ms and passages over the strategy labels'
    test split; a changed strategy table, features or cost budget replaces the champion."""

    name = "kway"
    model = MODEL
    columns: KwayColumns = KWAY_COLUMNS  # its registered model's (kway/columns.py)
    label_set = "strategies"  # labels/<dataset>.strategies.jsonl
    train_device = "cpu"  # a numpy/scikit-learn head: seconds on the CPU
    train_command = "r2a train --router kway"
    passed = "not worse on recall, not costlier in ms or passages"

    def label(self, dataset: str) -> dict[str, object]:
        from r2adapter.kway.labels import label_strategies

        return label_strategies(dataset)

    def label_path(self, dataset: str) -> Path:
        from r2adapter.kway.labels import strategy_label_path

        return strategy_label_path(dataset)

    def fit(self, dataset: str, params: Any = None) -> TrainingReport:
        """`params` None: params.yaml's, at the route and budget chosen on nested transfers
        between the corpora it trains on when params.yaml names candidates (kway/transfer.py
        `served_point`)."""
        if params is None:
            from dataclasses import replace

            from r2adapter.kway.transfer import served_point

            params = kway_params()
            chosen = served_point(dataset, params)
            if chosen:
                params = replace(params, route=chosen[0], budget=chosen[1])
        return train_and_register_kway(dataset, params)

    def load(self, alias: str = "champion", version: str | None = None) -> tuple[Any, str]:
        return load_kway(alias, version)

    def test_split(self, dataset: str, candidate: Any, tags: Mapping[str, str]) -> SplitData:
        """The strategy labels under the candidate's table and features."""
        p = kway_params(
            strategies=candidate.cfg.strategies, features=candidate.cfg.features, route=()
        )
        return split_data(dataset, p)

    def figures(self, model: Any, split: SplitData) -> dict[str, float]:
        return test_figures(model, split)

    def replaces(self, candidate: Any, champion: Any) -> str | None:
        c, ch = candidate.cfg, champion.cfg
        if ch.strategies != c.strategies or ch.features != c.features:
            return "the strategy table or features changed: the candidate replaces"
        if ch.budget != c.budget:  # another operating point, not a rival
            return f"the cost budget changed ({ch.budget} → {c.budget})"
        return None

    def gate(
        self, candidate: Mapping[str, float], champion: Mapping[str, float]
    ) -> tuple[bool, list[str]]:
        return gate(candidate, champion)

    def route(
        self,
        model: Any,
        queries: Sequence[str],
        qvecs: np.ndarray | None = None,
        version: str = "",
        encode: Encode | None = None,
    ) -> list[Route]:
        """One `decide` for the batch (one matrix product over the corpus's embeddings, one
        index-version check); `p_dense`/`p_graph` are the most confident dense-side and
        graph-side heads, what a two-way client reads."""
        from r2adapter.kway.strategies import parse_strategy

        qvecs = query_vectors(queries, qvecs, encode, model.cfg.encoder)
        d = model.decide(list(queries), qvecs)
        tau = np.asarray(model.tau, dtype=np.float64)
        graph_side = {n: parse_strategy(n).graph_side for n in d.strategies}
        out = []
        for i, name in enumerate(d.strategy):
            s = parse_strategy(name)
            scores = {n: float(v) for n, v in zip(d.strategies, d.scores[i], strict=True)}
            out.append(
                Route(
                    s.name,
                    s.mode,
                    s.k,
                    s.rewritten,  # a `+rw` strategy (graph+rw@5) rewrites first
                    scores,
                    float(tau[d.strategies.index(name)]),
                    self.name,
                    version,
                    bool(d.fallback[i]),
                    side="graph" if s.graph_side else "dense",
                    p_dense=max((v for n, v in scores.items() if not graph_side[n]), default=0.0),
                    p_graph=max((v for n, v in scores.items() if graph_side[n]), default=0.0),
                    qvec=qvecs[i],
                )
            )
        return out

    def serve(self, model: Any, dataset: str) -> Any:
        """The features read `dataset`'s corpus and graph."""
        from r2adapter.retrieve.graph_index import GRAPHS

        model.bind(dataset, GRAPHS)
        return model
