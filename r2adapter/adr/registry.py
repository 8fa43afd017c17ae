"""ADR's trained intent classifier in the MLflow registry, as the R²Adapter and k-way
routers are: `r2a train --router adr` fits the softmax head on the ADR labels' train and
val splits (`labels/<dataset>.adr.jsonl`), logs the run, registers `r2a-router-adr` with
alias `candidate` and its test-split figures as tags; `r2a promote --router adr` (the one
promotion skeleton, r2adapter/registry/promote.py, over `AdrFamily`) moves `champion` to
it when the gate holds on the frozen test split: recall and FCR not worse
(the k-way gate's tolerance), context tokens, ms and passages not costlier (its cost
tolerance). The first model becomes champion; a changed γ is another operating point
and replaces the champion."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from r2adapter.adr.columns import ADR_COLUMNS, AdrColumns
from r2adapter.adr.labels import AdrLabel, adr_label_path, figures, read_adr_labels
from r2adapter.adr.router import AdrRouter, decide
from r2adapter.config import AdrParams, adr_params
from r2adapter.errors import R2AError
from r2adapter.label.corpora import training_corpora
from r2adapter.registry.promote import COST_TOLERANCE, RECALL_TOLERANCE
from r2adapter.registry.promote import gate as cost_gate
from r2adapter.registry.training import Fitted, TrainingReport, train_and_register
from r2adapter.route.family import Encode, Route, query_vectors

MODEL = "r2a-router-adr"


def test_figures(router: AdrRouter, labels: list[AdrLabel], x: np.ndarray) -> dict[str, float]:
    """Recall, FCR, passages, context tokens and ms of the router's operators on the test
    split (the labels' ms: the operator's, query embedding included)."""
    te = [i for i, lab in enumerate(labels) if lab.split == "test"]
    if not te:
        return {}
    ds = router.decide(x[te])
    f = figures([labels[i] for i in te], [d.operator for d in ds], np.zeros(len(te)))
    out = {k: float(f[k]) for k in ("recall", "fcr", "mean_passages", "mean_tokens", "mean_ms")}
    out["fallback_share"] = float(np.mean([d.fallback for d in ds]))
    return out


def _labels_and_x(dataset: str, more: Sequence[str] = ()) -> tuple[list[AdrLabel], np.ndarray, str]:
    """The ADR labels of `dataset` and of the corpora `more` (adr.train_corpora), with
    their questions' embeddings."""
    from r2adapter.index.encoder import get_encoder

    corpora = training_corpora(dataset, more, adr_label_path)
    labels = [lab for c in corpora for lab in read_adr_labels(c)]
    enc = get_encoder()
    return labels, enc.encode([lab.question for lab in labels]), enc.name


def train_and_register_adr(dataset: str, p: AdrParams | None = None) -> TrainingReport:
    """ADR's intent head trained on the ADR labels' train and val splits with γ chosen on
    them (adr/gamma.py), in the one training run every family shares
    (r2adapter/registry/training.py)."""
    import mlflow

    from r2adapter.adr.gamma import fit_with_gamma

    t0 = time.perf_counter()
    p = p or adr_params()
    labels, x, encoder = _labels_and_x(dataset, p.train_corpora)
    tr = [i for i, lab in enumerate(labels) if lab.split != "test"]
    if not tr:
        raise R2AError(f"{dataset}: the ADR labels have no train or val queries to train on")
    corpora = training_corpora(dataset, p.train_corpora, adr_label_path)
    md5 = ",".join(hashlib.md5(adr_label_path(c).read_bytes()).hexdigest() for c in corpora)
    logged = {
        "adr.gamma": p.gamma,
        "adr.classifier_c": p.classifier_c,
        "adr.seed": p.seed,
        "encoder": encoder,
        "label_md5": md5,
        "trained_on": ",".join(corpora),
        "n_train": len(tr),
        "n_test": len(labels) - len(tr),
    }

    def fit(run: object) -> Fitted:
        head, gamma, how = fit_with_gamma([labels[i] for i in tr], p, x[tr])
        mlflow.log_params({"adr.gamma_chosen": gamma, "adr.token_budget": p.token_budget})
        router = AdrRouter(head, gamma, encoder, dataset)
        return Fitted(
            MODEL,
            ADR_COLUMNS,
            router.save,
            test_figures(router, labels, x),
            {"gamma": gamma, "gamma_chosen": how, "trained_on": corpora, "n_train": len(tr)},
            {"gamma": gamma},
        )

    return train_and_register("adr", dataset, logged, fit, started=t0)


def load_adr(alias: str = "champion", version: str | None = None) -> tuple[AdrRouter, str]:
    """The registered ADR classifier behind an alias (or that `version`), and its version;
    none is a one-line error naming the commands that make one."""
    from r2adapter.adr import AdrUnavailable
    from r2adapter.registry.models import load_alias

    router, version = load_alias(
        MODEL,
        alias,
        "`r2a train --dataset D --router adr` then `r2a promote --router adr`",
        AdrUnavailable,
        version,
    )
    return router, version


def gate(cand: Mapping[str, float], champ: Mapping[str, float]) -> tuple[bool, list[str]]:
    """The k-way gate (recall, ms, passages) plus ADR's own terms: FCR not worse, context
    tokens not costlier."""
    ok, why = cost_gate(cand, champ)
    if cand["fcr"] < champ["fcr"] - RECALL_TOLERANCE:
        why.append(f"fcr {cand['fcr']:.3f} < champion {champ['fcr']:.3f}")
    if cand["mean_tokens"] > champ["mean_tokens"] * (1 + COST_TOLERANCE):
        why.append(f"mean_tokens {cand['mean_tokens']:.0f} > champion {champ['mean_tokens']:.0f}")
    return not why, why


@dataclass(frozen=True)
class AdrSplit:
    labels: list[AdrLabel]
    x: np.ndarray  # the labels' query embeddings


class AdrFamily:
    """ADR's head as a router family (r2adapter/route/family.py): labelled by ADR's three
    operators on every query, gated on recall, FCR, tokens, ms and passages over the ADR
    labels' test split; a changed γ or encoder replaces the champion."""

    name = "adr"
    model = MODEL
    columns: AdrColumns = ADR_COLUMNS  # its registered model's (adr/columns.py)
    label_set = "adr"  # labels/<dataset>.adr.jsonl
    train_device = "cpu"  # a numpy/scikit-learn head: seconds on the CPU
    train_command = "r2a train --dataset D --router adr"
    passed = "not worse on recall and FCR, not costlier in tokens, ms or passages"

    def label(self, dataset: str) -> dict[str, object]:
        from r2adapter.adr.labels import label_adr

        return label_adr(dataset)

    def label_path(self, dataset: str) -> Path:
        return adr_label_path(dataset)

    def fit(self, dataset: str, params: Any = None) -> TrainingReport:
        return train_and_register_adr(dataset, params)

    def load(self, alias: str = "champion", version: str | None = None) -> tuple[AdrRouter, str]:
        return load_adr(alias, version)

    def test_split(self, dataset: str, candidate: Any, tags: Mapping[str, str]) -> AdrSplit:
        labels, x, _ = _labels_and_x(dataset, adr_params().train_corpora)
        if not any(lab.split == "test" for lab in labels):
            raise R2AError(f"{dataset}: the ADR labels have no test split to gate on")
        return AdrSplit(labels, x)

    def figures(self, model: AdrRouter, split: AdrSplit) -> dict[str, float]:
        return test_figures(model, split.labels, split.x)

    def replaces(self, candidate: AdrRouter, champion: AdrRouter) -> str | None:
        if champion.gamma != candidate.gamma or champion.encoder != candidate.encoder:
            moved = f"{champion.gamma}/{champion.encoder} → {candidate.gamma}/{candidate.encoder}"
            return f"γ or the encoder changed ({moved}): the candidate replaces"
        return None

    def gate(
        self, candidate: Mapping[str, float], champion: Mapping[str, float]
    ) -> tuple[bool, list[str]]:
        return gate(candidate, champion)

    def route(
        self,
        model: AdrRouter,
        queries: Sequence[str],
        qvecs: np.ndarray | None = None,
        version: str = "",
        encode: Encode | None = None,
    ) -> list[Route]:
        from r2adapter.adr.operators import OPERATORS
        from r2adapter.config import adr_params

        qvecs = query_vectors(queries, qvecs, encode, model.encoder)
        probs = model.head.probs(qvecs)
        k = adr_params().max_passages
        return [
            Route(
                d.operator,
                f"adr_{d.operator}",
                k,
                False,
                {op: float(p) for op, p in zip(OPERATORS, row, strict=True)},
                model.gamma,
                self.name,
                version,
                d.fallback,
                side="graph",  # every operator walks the hypergraph
                qvec=qvecs[i],
            )
            for i, (d, row) in enumerate(zip(decide(probs, model.gamma), probs, strict=True))
        ]

    def serve(self, model: AdrRouter, dataset: str) -> AdrRouter:
        """The head reads the query embedding only: nothing to bind."""
        return model
