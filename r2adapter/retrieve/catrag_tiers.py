"""Stage II of CatRAG's query-aware edge weighting (CatRAG §3): the tier of each seed →
neighbour transition that survived Stage I, and so its multiplier, from one of three
sources behind one interface (`TierSource.multipliers`; catrag.py's `tier_source()` picks by
name):

- `similarity` (no LLM): bands (`similarity_bands`) over the normalised query score of the
  best fact joining seed and neighbour, which the graph search has computed already.
- `learned` (no LLM): a logistic scorer over four cheap features (FEATURES) trained on the
  training split with "the neighbour is an entity of a gold passage" as the label
  (r2adapter/retrieve/catrag_train.py); its probability falls in bands calibrated on the
  training transitions so that each tier takes there the share the similarity bands give
  it (the same number of edits, ranked by the scorer instead of the fact score).
- `llm` (the paper's judge): r2adapter/retrieve/catrag_llm.py.

Every source returns one multiplier per transition (`tier_multipliers(p)[tier]`); a source
that cannot answer for a query (an LLM timeout) answers with the similarity tiers and
counts the fallback in `stats()`.
"""

from __future__ import annotations

import hashlib
import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from r2adapter.config import GraphParams, label_params, settings
from r2adapter.data.schema import Query
from r2adapter.errors import R2AError
from r2adapter.index.openie import normalize_phrase
from r2adapter.retrieve.catrag_graph import CatragMaps, entity_embeddings
from r2adapter.retrieve.graph_index import GraphIndex, Operator

TIERS = ("irrelevant", "weak", "high", "direct")  # index = tier, weakest first
FEATURES = ("query_fact", "query_neighbour", "log_strength", "dense_top5_title")
DENSE_TOP = 5  # "whether it is a dense top-5 title"


def tier_multipliers(p: GraphParams) -> np.ndarray:
    """Multiplier by tier index (TIERS)."""
    return np.array([p.tier_irrelevant, p.tier_weak, p.tier_high, p.tier_direct])


def banded(values: np.ndarray, bands: tuple[float, ...]) -> np.ndarray:
    """Tier index of each value: ≥ bands[0] direct, ≥ bands[1] high, ≥ bands[2] weak."""
    direct, high, weak = bands
    return np.select([values >= direct, values >= high, values >= weak], [3, 2, 1], default=0)


@dataclass(frozen=True)
class Transitions:
    """One query's Stage I survivors: row i is seeds[i] → nbrs[i], best joined by fact
    facts[i] whose min-max normalised query score is scores[i]."""

    seeds: np.ndarray
    nbrs: np.ndarray
    facts: np.ndarray
    scores: np.ndarray

    def __len__(self) -> int:
        return len(self.nbrs)


@dataclass(frozen=True)
class TierQuery:
    """What a tier source may read about the query besides its transitions."""

    g: GraphIndex
    op: Operator
    qvec: np.ndarray
    query: str
    passage_scores: np.ndarray  # dense score per passage (the graph search's seeding)
    fact_scores: np.ndarray | None = None  # normalised query score per fact


class TierSource(ABC):
    """Stage II's judge: a multiplier for each kept transition of a query."""

    name = ""

    def __init__(self, params: GraphParams) -> None:
        self.params = params

    @abstractmethod
    def tiers(self, q: TierQuery, t: Transitions) -> np.ndarray:
        """Tier index (TIERS) per transition."""

    def multipliers(self, q: TierQuery, t: Transitions) -> np.ndarray:
        if not len(t):
            return np.zeros(0)
        return tier_multipliers(self.params)[self.tiers(q, t)]

    def warmup(self, g: GraphIndex) -> None:  # noqa: B027 - optional hook
        """Load what the first query would (a model, embeddings)."""

    def stats(self) -> dict[str, Any]:
        """Counts for the evaluation report (fallbacks of a source that can fail)."""
        return {}


class SimilarityTiers(TierSource):
    name = "similarity"

    def tiers(self, q: TierQuery, t: Transitions) -> np.ndarray:
        return banded(t.scores, self.params.similarity_bands)


# ---- learned ------------------------------------------------------------------------------


# ---- Stage I: what Stage II judges ----------------------------------------------------


def stage_one(
    g: GraphIndex, maps: CatragMaps, seed: int, fact_scores: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stage I's ranking: the seed's fact neighbours by their best joining fact's score,
    best first (ties by id), as (neighbours, that fact, its score)."""
    facts = maps.facts_of(seed)
    ends = g.fact_ends[facts]
    other = np.where(ends[:, 0] == seed, ends[:, 1], ends[:, 0])
    score = fact_scores[facts]
    keep = other != seed
    other, score, facts = other[keep], score[keep], facts[keep]
    if not len(other):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    order = np.lexsort((other, -score))  # best score first, ties by id
    other, score, facts = other[order], score[order], facts[order]
    _, first = np.unique(other, return_index=True)  # each neighbour at its best fact
    first.sort()
    return other[first], facts[first], score[first]


def stage_one_kept(
    g: GraphIndex,
    maps: CatragMaps,
    weights: dict[int, float],
    fact_scores: np.ndarray,
    p: GraphParams,
) -> tuple[Transitions, dict[int, np.ndarray]]:
    """Stage I for the top `n_seed` seeds by reset weight: the transitions kept for
    Stage II (each seed's first `k_edge` neighbours, seeds in that order) and each seed's
    ranked neighbours (those with any)."""
    chosen = sorted(weights, key=lambda e: -weights[e])[: p.n_seed]
    ranked: dict[int, np.ndarray] = {}
    parts: list[tuple[np.ndarray, ...]] = []
    for u in chosen:
        nbrs, facts, best = stage_one(g, maps, u, fact_scores)
        if len(nbrs):
            ranked[u] = nbrs
            k = min(p.k_edge, len(nbrs))
            parts.append((np.full(k, u, dtype=np.int64), nbrs[:k], facts[:k], best[:k]))
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return Transitions(empty, empty, empty, np.zeros(0)), ranked
    cols = [np.concatenate(c) for c in zip(*parts, strict=True)]
    return Transitions(*cols), ranked


def title_entities(g: GraphIndex) -> np.ndarray:
    """Per passage, the phrase node its title names (normalised exact match), else −1."""

    def build() -> np.ndarray:
        names = {name: i for i, name in enumerate(g.entity_names)}
        return np.array(
            [names.get(normalize_phrase(t), -1) for t in g.passage_titles], dtype=np.int64
        )

    out: np.ndarray = g.cached("catrag_title_entities", build)
    return out


def features(q: TierQuery, t: Transitions) -> np.ndarray:
    """(n, 4) in FEATURES' order: the best joining fact's normalised query score, the
    cosine of query and neighbour name, log(1 + the neighbour's weighted degree), and
    whether the neighbour is the title of one of the dense top 5 passages."""
    g = q.g
    emb = entity_embeddings(g)
    sim_nbr = emb[t.nbrs] @ q.qvec.astype(np.float32)
    strength = np.log1p(q.op.strength[t.nbrs])
    k = min(DENSE_TOP, len(q.passage_scores))
    top = np.argpartition(-q.passage_scores, k - 1)[:k] if k else np.zeros(0, dtype=np.int64)
    titled = title_entities(g)[top]
    in_top = np.isin(t.nbrs, titled[titled >= 0])
    return np.column_stack([t.scores, sim_nbr, strength, in_top]).astype(np.float64)


@dataclass(frozen=True)
class TierModel:
    """A logistic scorer over standardised FEATURES and its probability bands."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    bands: tuple[float, float, float]  # probability ≥ direct, ≥ high, ≥ weak
    meta: dict[str, Any] = field(default_factory=dict)

    def proba(self, x: np.ndarray) -> np.ndarray:
        z = (x - np.array(self.mean)) / np.array(self.scale) @ np.array(self.coef)
        return 1.0 / (1.0 + np.exp(-(z + self.intercept)))

    def to_json(self) -> dict[str, Any]:
        return {"features": list(FEATURES), **asdict(self)}

    @classmethod
    def from_json(cls, d: dict[str, Any], where: str = "tier model") -> TierModel:
        try:
            if d.get("features") != list(FEATURES):
                raise ValueError("other features")
            m = cls(
                tuple(float(x) for x in d["mean"]),
                tuple(float(x) for x in d["scale"]),
                tuple(float(x) for x in d["coef"]),
                float(d["intercept"]),
                tuple(float(x) for x in d["bands"]),  # type: ignore[arg-type]
                dict(d.get("meta", {})),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise R2AError(f"{where} is not a tier model ({e}): delete it to retrain") from None
        n = len(FEATURES)
        if not (len(m.mean) == len(m.scale) == len(m.coef) == n and len(m.bands) == 3):
            raise R2AError(f"{where} has the wrong shape: delete it to retrain")
        return m


def fit_tiers(x: np.ndarray, y: np.ndarray, reference: np.ndarray, c: float = 1.0) -> TierModel:
    """The scorer fitted on training transitions `x` (FEATURES) with labels `y`, its bands
    set so that each tier's share of these transitions equals its share in `reference`
    (their similarity tiers): the learned source edits as many edges as similarity does,
    choosing them by the scorer."""
    from sklearn.linear_model import LogisticRegression

    if len(y) == 0 or y.min() == y.max():
        raise R2AError(
            "catrag's learned tiers need training transitions of both labels (on a gold "
            f"passage and not): got {len(y)} transitions, {int(y.sum())} positive"
        )
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-12] = 1.0
    lr = LogisticRegression(C=c, max_iter=1000).fit((x - mean) / scale, y)
    model = TierModel(
        tuple(mean.tolist()),
        tuple(scale.tolist()),
        tuple(lr.coef_[0].tolist()),
        float(lr.intercept_[0]),
        (1.0, 1.0, 1.0),
    )
    p = model.proba(x)
    bands = []
    for tier in (3, 2, 1):  # share at this tier or above → the probability that cuts it
        share = float(np.mean(reference >= tier))
        bands.append(float(np.quantile(p, 1.0 - share)) if share > 0 else np.inf)
    meta = {"transitions": int(len(y)), "positive_rate": float(y.mean())}
    return TierModel(model.mean, model.scale, model.coef, model.intercept, tuple(bands), meta)  # type: ignore[arg-type]


class LearnedTiers(TierSource):
    """`model`: a fitted TierModel; else `load(g)` gives the dataset's on first use (the
    factory in catrag.py passes `load_tiers`: the saved model, never a training run)."""

    name = "learned"

    def __init__(
        self,
        params: GraphParams,
        model: TierModel | None = None,
        load: Callable[[GraphIndex], TierModel] | None = None,
    ) -> None:
        super().__init__(params)
        self.model = model
        self.load = load
        self._lock = threading.Lock()  # concurrent first queries load once

    def warmup(self, g: GraphIndex) -> None:
        entity_embeddings(g)
        title_entities(g)
        self.model_for(g)

    def model_for(self, g: GraphIndex) -> TierModel:
        if self.model is None:
            if self.load is None:
                raise R2AError(
                    "catrag's learned tiers have no model: train one with "
                    f"`r2a catrag train-tiers --dataset {g.version.dataset}`"
                )
            with self._lock:
                if self.model is None:
                    self.model = self.load(g)
        return self.model

    def tiers(self, q: TierQuery, t: Transitions) -> np.ndarray:
        model = self.model_for(q.g)
        return banded(model.proba(features(q, t)), model.bands)


FORMAT = 1  # of the cached model file; part of its key
# the parameters that shape a query's transitions or their features
SHAPING = (
    "linking_top_k",
    "fact_top_k",
    "fact_edge_scale",
    "synonym_edge_scale",
    "seed_weighting",
    "anchor_epsilon",
    "anchor_phrases",
    "n_seed",
    "k_edge",
    "similarity_bands",
    "entity_match",
    "entity_match_threshold",
    "catrag_ablate",
)


def training_queries(dataset: str) -> list[Query]:
    """The dataset's stored queries in the training split that name a gold passage."""
    from r2adapter.data.splits import split_of
    from r2adapter.store.queries import stored_queries

    split = label_params().split
    out = [
        q
        for q in stored_queries(dataset, complete_only=False)
        if q.gold_passage_ids and split_of(q.id, split) == "train"
    ]
    if not out:
        raise R2AError(
            f"no training labels for catrag's learned tiers on '{dataset}': none of its "
            "queries in the training split has gold passages; set graph.tier_source to "
            "similarity"
        )
    return out


def model_path(g: GraphIndex, p: GraphParams, queries: Sequence[Query]) -> Path:
    v = g.version
    key = {
        "format": FORMAT,
        "encoder": v.encoder,
        "params": {k: getattr(p, k) for k in SHAPING},
        "queries": sorted(q.id for q in queries),
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=list).encode()).hexdigest()
    return settings().root / ".cache" / "catrag" / v.dataset / f"tiers-v{v.id}-{digest[:16]}.json"


def load_tiers(g: GraphIndex, p: GraphParams) -> TierModel:
    """The dataset's saved tier model for this index version and these parameters (made by
    `r2a catrag train-tiers`, catrag_train.train_tiers); a one-line R2AError naming that
    command when there is none. Loading only: no request trains a model."""
    path = model_path(g, p, training_queries(g.version.dataset))
    if not path.is_file():
        raise R2AError(
            f"catrag's learned tiers have no model for '{g.version.dataset}' at index version "
            f"{g.version.id} with these parameters: train one with "
            f"`r2a catrag train-tiers --dataset {g.version.dataset}`"
        )
    try:
        data = json.loads(path.read_text())
    except ValueError:
        raise R2AError(f"{path} is not JSON: delete it and run `r2a catrag train-tiers`") from None
    return TierModel.from_json(data, str(path))
