"""The router-family protocol: what every family of trained routers offers the registry, the
loop and the CLI — the two-way routers (r2adapter/twoway/family.py), the k-way router
(r2adapter/kway/registry.py) and ADR's head (r2adapter/adr/registry.py) each implement it,
and r2adapter/families.py holds the one table of them. RouteLLM's `Router` base class, one
`route(prompt, threshold)` for every router, is the model.

A family registers its trained model under `model` in the MLflow registry (alias
`candidate`), and the one promotion skeleton (r2adapter/registry/promote.py) moves
`champion` to it: it loads candidate and champion (`load`), prepares the frozen test split
once (`test_split`), measures both on it (`figures`), lets the family say when the
candidate replaces the champion without a comparison (`replaces`: another operating point,
not a rival) and otherwise asks its `gate`.

`route` is the one decision record every family gives for a batch of queries: `Route`.
Its registered MLflow model is the one pyfunc every family shares (r2adapter/registry/
pyfunc.py `RouterModel`), handed the family's `columns` when it is logged: how the router
saved in the model loads, and the columns its predict answers (`ModelColumns`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

Encode = Callable[[list[str]], np.ndarray]  # the caller's retrieval encoder, batch → vectors
NAN = float("nan")


@dataclass(frozen=True)
class Route:
    """One query's routing decision, whichever family decided it."""

    strategy: str  # what the family chose: "graph"/"dense", a k-way strategy ("graph@5"),
    # an ADR operator ("moderate")
    mode: str  # the retrieval mode that runs it (r2adapter/retrieve/strategies.py)
    k: int | None  # the passages it delivers (None: the caller's k)
    rewrite: bool  # rewrite the query before retrieval (eq. 7, or a `+rw` strategy)
    scores: dict[str, float] = field(default_factory=dict)  # the router's score per choice
    threshold: float = float("nan")  # τ (two-way), the chosen strategy's τ_s (k-way), γ (ADR)
    router: str = ""  # the family's name (`r2a promote --router`)
    version: str = ""  # the registered version that decided ("" when not registered)
    fallback: bool = False  # no choice was confident: the family's conservative fallback
    side: str = ""  # "dense" or "graph": the side a two-way client reads (/route's decision)
    p_dense: float = NAN  # the most confident dense-side score (two-way: p_dense itself)
    p_graph: float = NAN  # the most confident graph-side score
    epsilon: float = NAN  # eq. 7's ε (two-way routers); NaN where the strategy says it
    # the query's retrieval embedding when the family read it: retrieval reuses it
    qvec: np.ndarray | None = field(default=None, compare=False, repr=False)


def query_vectors(
    queries: Sequence[str], qvecs: np.ndarray | None, encode: Encode | None, encoder: str
) -> np.ndarray:
    """The retrieval embeddings a family reads: the caller's `qvecs`, else its `encode`
    (the service's encoder, so retrieval can reuse them), else the model's own `encoder`."""
    if qvecs is not None:
        return qvecs
    if encode is not None:
        return encode(list(queries))
    from r2adapter.index.encoder import get_encoder

    return get_encoder(encoder).encode(list(queries))


class ModelColumns(Protocol):
    """What a family's registered MLflow model does inside the one pyfunc: load the router
    saved in its artifact, and answer a batch of queries with the columns of `output`."""

    @property
    def output(self) -> Mapping[str, str]:
        """The columns predict returns, in order, each with its MLflow type (the model's
        signature)."""

    def load(self, folder: Path) -> Any:
        """The router saved in `folder` (the model's artifact `router`), ready to answer."""

    def frame(self, router: Any, queries: list[str]) -> dict[str, Any]:
        """`output`'s columns for `queries` (non-empty strings), each a sequence of one
        value per query or one value for all."""


class RouterFamily(Protocol):
    """A family of trained routers, as the registry, the loop and the CLI see it."""

    @property
    def name(self) -> str:
        """`r2a train/promote --router`, the reports' key (reports/promote/<name>.json)."""

    @property
    def model(self) -> str:
        """The MLflow registered model."""

    @property
    def columns(self) -> ModelColumns:
        """What its registered model loads and answers (the one pyfunc's part of it)."""

    @property
    def train_command(self) -> str:
        """The command that registers a candidate (named when there is none)."""

    @property
    def passed(self) -> str:
        """The reason given when the gate holds and says nothing."""

    @property
    def label_set(self) -> str:
        """The name of the label set the family writes itself (`label`: "strategies",
        "adr"; the `label` step's stats key), or "": it trains on the two-way labels."""

    @property
    def train_device(self) -> str:
        """Where its trainer gains: "gpu" (the Kubeflow pipeline schedules its train task on
        a GPU node, in the CUDA image: pipelines/retrain.py TRAINERS) or "cpu"."""

    def label_path(self, dataset: str) -> Path:
        """The label file of `dataset` this family trains on (a pipeline task puts its
        label artifact there first: `steps.receive_labels`)."""

    def label(self, dataset: str) -> Any:
        """Label `dataset` for this family's training (the file it trains on); a summary."""

    def fit(self, dataset: str, params: Any = None) -> Any:
        """Train on the labels, register as `candidate` in one MLflow run; the report."""

    def load(self, alias: str = "champion", version: str | None = None) -> tuple[Any, str]:
        """The registered model behind `alias` (or that exact `version`: a caller that
        resolved the alias once, so what it read and what it loads are the same), and its
        version."""

    def test_split(self, dataset: str, candidate: Any, tags: Mapping[str, str]) -> Any:
        """The frozen test split the gate reads, prepared once for candidate and champion
        (`tags`: the candidate version's registry tags)."""

    def figures(self, model: Any, split: Any) -> dict[str, float]:
        """The model's gate figures on `split`."""

    def replaces(self, candidate: Any, champion: Any) -> str | None:
        """Why the candidate replaces the champion without a comparison (another operating
        point, not a rival), or None: the gate decides."""

    def gate(
        self, candidate: Mapping[str, float], champion: Mapping[str, float]
    ) -> tuple[bool, list[str]]:
        """Whether the candidate's figures may replace the champion's, and why not."""

    def route(
        self,
        model: Any,
        queries: Sequence[str],
        qvecs: np.ndarray | None = None,
        version: str = "",
        encode: Encode | None = None,
    ) -> list[Route]:
        """The model's decision for each query (`qvecs`: their retrieval embeddings; a
        family that reads them and gets none computes them with `encode`, else with its
        model's encoder: `query_vectors`)."""

    def serve(self, model: Any, dataset: str) -> Any:
        """Prepare a loaded model to decide on `dataset` (bind the corpus its features
        read); the model that serves. The service then warms it with one `route`."""


@dataclass(frozen=True)
class Champion:
    """A family's registered model as it serves: `route` sends a batch through the family."""

    family: RouterFamily
    model: Any
    version: str

    @property
    def name(self) -> str:
        return self.family.name

    def route(
        self,
        queries: Sequence[str],
        qvecs: np.ndarray | None = None,
        encode: Encode | None = None,
    ) -> list[Route]:
        return self.family.route(self.model, list(queries), qvecs, self.version, encode)


# where a retrieval strategy that a family's champion decides (ADR's `adr`) reads the one
# serving now, on each query: the service's champion table, else a plain load of it
ChampionSource = Callable[[], Champion]
