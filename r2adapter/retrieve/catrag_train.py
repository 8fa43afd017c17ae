"""Training CatRAG's learned tier source (catrag_tiers.LearnedTiers), at the edges: the
Stage I transitions of every training query as catrag makes them (the question as asked,
its anchors, the top `n_seed` seeds' first `k_edge` neighbours), each labelled by whether
the neighbour is an entity of one of the query's gold passages; a logistic scorer fitted
on them (`fit_tiers`), saved as a small JSON under
`.cache/catrag/<dataset>/tiers-v<index version>-<key>.json`, the key a hash of the
encoder, the parameters that shape the transitions and the training queries.

Training queries: the dataset's stored queries in the training split (`split_of`, the
labels' 8:1:1 split by query id) with a gold passage in the index. `r2a catrag
train-tiers --dataset D` trains (2Wiki: ~800 queries, well under a minute on 2 cores); a
learned source only loads the file (catrag_tiers.load_tiers) and, without one, says which
command trains it: no retrieval trains a model inside a request.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from r2adapter.data.schema import Query
from r2adapter.retrieve.catrag_graph import catrag_maps
from r2adapter.retrieve.catrag_tiers import (
    TierModel,
    TierQuery,
    banded,
    features,
    fit_tiers,
    model_path,
    stage_one_kept,
    training_queries,
)
from r2adapter.retrieve.graph import seed_graph
from r2adapter.retrieve.graph_index import GraphIndex

if TYPE_CHECKING:
    from r2adapter.retrieve.catrag import CatragRetriever

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TierRows:
    """Training transitions: the query of each row, its FEATURES, its label (the
    neighbour is an entity of a gold passage) and its similarity tier."""

    query_ids: np.ndarray
    x: np.ndarray
    y: np.ndarray
    reference: np.ndarray

    def subset(self, mask: np.ndarray) -> TierRows:
        return TierRows(self.query_ids[mask], self.x[mask], self.y[mask], self.reference[mask])


def gold_entities(g: GraphIndex, gold_passage_ids: Sequence[str]) -> np.ndarray:
    """The phrase nodes of the gold passages in the index (their passage edges)."""
    pos = g.cached("catrag_passage_pos", lambda: {p: i for i, p in enumerate(g.passage_ids)})
    op = g.operator()  # passage edges do not depend on the edge scales
    out: list[np.ndarray] = []
    for pid in gold_passage_ids:
        i = pos.get(pid)
        if i is not None:
            node = g.n_entities + i
            row = op.adjacency.indices[op.adjacency.indptr[node] : op.adjacency.indptr[node + 1]]
            out.append(row[row < g.n_entities])
    return np.unique(np.concatenate(out)) if out else np.zeros(0, dtype=np.int64)


def collect_rows(
    retriever: CatragRetriever, queries: Sequence[Query], progress: bool = False
) -> TierRows:
    """Every query's Stage I transitions as `retriever` makes them, with features, label
    and similarity tier; a query without gold in the index or without a fact match
    gives none."""
    from tqdm import tqdm

    g = retriever.cache.get(retriever.dataset)
    p = retriever.params
    op = g.operator(*retriever.scales)
    maps = catrag_maps(g)
    vecs = retriever.encoder.encode([q.question for q in queries], progress=progress)
    ids: list[np.ndarray] = []
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    refs: list[np.ndarray] = []
    for q, v in tqdm(
        list(zip(queries, vecs, strict=True)), desc="tiers: transitions", disable=not progress
    ):
        gold = gold_entities(g, q.gold_passage_ids)
        if not len(gold):
            continue
        seeding = seed_graph(g, v, p)  # the question as asked: no rewrite's triplets
        if not seeding.matched:
            continue
        found = retriever.anchor_candidates(g, q.question) if retriever.anchoring else None
        weights, _ = retriever.anchored(g, seeding, found)
        kept, _ = stage_one_kept(g, maps, weights, seeding.fact_scores, p)
        if not len(kept):
            continue
        tq = TierQuery(g, op, v, q.question, seeding.passage_scores)
        xs.append(features(tq, kept))
        ys.append(np.isin(kept.nbrs, gold).astype(np.int64))
        refs.append(banded(kept.scores, p.similarity_bands))
        ids.append(np.full(len(kept), q.id, dtype=object))
    if not xs:
        return TierRows(
            np.zeros(0, dtype=object), np.zeros((0, 4)), np.zeros(0, np.int64), np.zeros(0)
        )
    return TierRows(np.concatenate(ids), np.vstack(xs), np.concatenate(ys), np.concatenate(refs))


def train_tiers(retriever: CatragRetriever, progress: bool = False) -> tuple[TierModel, Path]:
    """Fit the learned tier source on the training split of `retriever`'s dataset (catrag
    with the similarity tiers, catrag.similarity_retriever) and save it (atomically)."""
    dataset, p = retriever.dataset, retriever.params
    queries = training_queries(dataset)
    g = retriever.cache.get(dataset)
    rows = collect_rows(retriever, queries, progress)
    model = fit_tiers(rows.x, rows.y, rows.reference)
    meta = {
        **model.meta,
        "queries": len(set(rows.query_ids.tolist())),
        "index_version": g.version.id,
    }
    model = TierModel(model.mean, model.scale, model.coef, model.intercept, model.bands, meta)
    path = model_path(g, p, queries)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(model.to_json(), indent=1))
    tmp.replace(path)
    return model, path


def cross_fitted(
    retriever: CatragRetriever, n_folds: int = 5, progress: bool = False
) -> dict[int, TierModel]:
    """fold → a tier model fitted on every stored query with gold outside that fold
    (`fold_of`, the k-fold split by query id), on `retriever` (catrag with the similarity
    tiers): scoring fold k's queries with model k measures the learned source out of fold."""
    from r2adapter.data.splits import fold_of
    from r2adapter.store.queries import stored_queries

    queries = [
        q for q in stored_queries(retriever.dataset, complete_only=False) if q.gold_passage_ids
    ]
    rows = collect_rows(retriever, queries, progress)
    fold = np.array([fold_of(str(q), n_folds) for q in rows.query_ids])
    out: dict[int, TierModel] = {}
    for k in range(n_folds):
        train = rows.subset(fold != k)
        m = fit_tiers(train.x, train.y, train.reference)
        meta = {**m.meta, "fold": k, "queries": len(set(train.query_ids.tolist()))}
        out[k] = TierModel(m.mean, m.scale, m.coef, m.intercept, m.bands, meta)
    return out
