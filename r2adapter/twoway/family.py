"""The two-way routers as a router family (r2adapter/route/family.py): one family per trained
kind of route/kinds.py (r2a, r2a_embed), labelled by the two-way labelling, trained with the
periodic threshold search, registered under the kind's model and gated on hybrid R@5,
graph F1 and graph usage (models.Gate) over the stored test labels of the candidate's rule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from r2adapter.route.family import Encode, Route
from r2adapter.route.kinds import RouterKind
from r2adapter.twoway.columns import TWO_WAY_COLUMNS, TwoWayColumns

if TYPE_CHECKING:
    from r2adapter.config import RouterParams
    from r2adapter.label.annotate import LabelRecord
    from r2adapter.label.step import LabelResult
    from r2adapter.registry.models import Gate
    from r2adapter.registry.training import TrainingReport
    from r2adapter.route.trained import TrainedRouter


@dataclass(frozen=True)
class TwoWaySplit:
    dataset: str
    test: list[LabelRecord]  # the stored test labels of the candidate's rule


@dataclass(frozen=True)
class TwoWayFamily:
    kind: RouterKind
    rule: Gate | None = None  # None: models.Gate at params.yaml router.max_graph_usage
    label_set: ClassVar[str] = ""  # no label set of its own: the two-way labels (run_label)
    columns: ClassVar[TwoWayColumns] = TWO_WAY_COLUMNS  # its registered model's (columns.py)

    @property
    def name(self) -> str:
        return self.kind.name

    @property
    def model(self) -> str:
        return self.kind.model

    @property
    def train_device(self) -> str:
        """Only a trainer that fine-tunes an encoder gains on a GPU: r2a (the MiniLM
        backbone). The embedding head (r2a_embed) trains a linear layer over fixed
        embeddings and was measured slower on one (6.5 s against 5.2 s on 16 CPU threads,
        docs/routing.md)."""
        return "cpu" if self.kind.backbone == "embedding" else "gpu"

    @property
    def train_command(self) -> str:
        return "r2a train"

    @property
    def passed(self) -> str:
        return "not worse on hybrid R@5, graph F1 and graph usage"

    def label(self, dataset: str) -> LabelResult:
        from r2adapter.label.step import run_label

        return run_label(dataset)

    def label_path(self, dataset: str) -> Path:
        from r2adapter.label.step import label_paths

        return label_paths(dataset)[0]

    def params(self, backbone: str | None = None, **overrides: object) -> RouterParams:
        """params.yaml's `router:` and `router_<backbone>:` (this kind's backbone unless
        another is given), then `overrides` (epochs, ...): what `fit` trains with."""
        from r2adapter.config import router_params

        return router_params(backbone or self.kind.backbone, None, **overrides)

    def fit(self, dataset: str, params: Any = None) -> TrainingReport:
        from r2adapter.config import router_params
        from r2adapter.twoway.register import train_and_register

        return train_and_register(dataset, params or router_params(self.kind.backbone, None))

    def load(
        self, alias: str = "champion", version: str | None = None
    ) -> tuple[TrainedRouter, str]:
        from r2adapter.registry.models import load_router

        return load_router(self.kind.name, alias, version)

    def test_split(self, dataset: str, candidate: Any, tags: Mapping[str, str]) -> TwoWaySplit:
        from r2adapter.config import label_params
        from r2adapter.label.annotate import db_labels

        rule = tags.get("label_rule", label_params().rule)
        return TwoWaySplit(dataset, db_labels(dataset, rule, "test"))

    def figures(self, model: TrainedRouter, split: TwoWaySplit) -> dict[str, float]:
        from r2adapter.evaluate.routing import routing_metrics

        model.bind(split.dataset)
        questions = [r.question for r in split.test]
        return routing_metrics(np.asarray(model.route(questions)), split.test)

    def replaces(self, candidate: Any, champion: Any) -> str | None:
        return None  # every two-way candidate is a rival: the gate decides

    def gate(
        self, candidate: Mapping[str, float], champion: Mapping[str, float]
    ) -> tuple[bool, list[str]]:
        from r2adapter.config import router_params
        from r2adapter.registry.models import Gate

        rule = self.rule or Gate(max_graph_usage=router_params().max_graph_usage)
        return rule.check(dict(candidate), dict(champion))

    def route(
        self,
        model: TrainedRouter,
        queries: Sequence[str],
        qvecs: np.ndarray | None = None,
        version: str = "",
        encode: Encode | None = None,
    ) -> list[Route]:
        # eqs. 4 and 7; a router that reads the retrieval embedding gets it from `encode`
        d = model.decide(queries, qvecs, encode=encode)
        vecs = d.qvecs
        out = []
        for i in range(len(d)):
            side, p_d, p_g = d.label(i), float(d.p_dense[i]), float(d.p_graph[i])
            out.append(
                Route(
                    side,
                    side,
                    None,
                    bool(d.rewrite[i]),
                    {"dense": p_d, "graph": p_g},
                    d.tau,
                    self.name,
                    version,
                    side=side,
                    p_dense=p_d,
                    p_graph=p_g,
                    epsilon=d.epsilon,
                    qvec=vecs[i] if vecs is not None else None,
                )
            )
        return out

    def serve(self, model: TrainedRouter, dataset: str) -> TrainedRouter:
        """ε follows the rewriter (a structural rewrite is nearly free, so eq. 7 rewrites
        every graph-bound query: `trigger_epsilon`); the features read `dataset`'s corpus."""
        from r2adapter.llm.base import LLMError
        from r2adapter.rewrite.rewriter import default_backend, trigger_epsilon

        try:
            backend = default_backend()
        except LLMError:  # an LLM endpoint configured wrongly: the rewrite falls back
            backend = "llm"
        model.epsilon = trigger_epsilon(backend, model.epsilon)
        model.bind(dataset)
        return model
