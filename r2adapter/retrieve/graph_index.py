"""The graph of one index version held in memory: CSR transition, fact and passage
embeddings. Loaded from Postgres once per version, reloaded when a new version appears."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp

from r2adapter.config import GraphParams, graph_params
from r2adapter.data.schema import fact_text
from r2adapter.errors import DatabaseError
from r2adapter.retrieve.graph_memory import check_graph_memory
from r2adapter.retrieve.ppr import Transition
from r2adapter.store import graph_store as gs

# edge kinds of GraphIndex.edges
FACT_EDGE, PASSAGE_EDGE, SYNONYM_EDGE = 0, 1, 2


@dataclass(frozen=True)
class Edges:
    """The graph's undirected edges as loaded, unscaled: fact edges weigh their
    co-occurrence count, passage–phrase edges 1, synonym edges their cosine."""

    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    kind: np.ndarray  # FACT_EDGE | PASSAGE_EDGE | SYNONYM_EDGE

    def scaled(self, fact_scale: float, synonym_scale: float) -> np.ndarray:
        scale = np.array([fact_scale, 1.0, synonym_scale])
        return self.weight * scale[self.kind]


@dataclass(frozen=True)
class Operator:
    """The transition of the graph under one pair of edge scales, with the symmetric
    weighted adjacency (caller's node order) that query-time edits read, and each node's
    weighted degree (strength)."""

    transition: Transition
    adjacency: sp.csr_matrix  # float64, symmetric, duplicate pairs summed
    strength: np.ndarray  # weighted degree per node
    # phrase nodes come first (0 .. n_entities - 1); 0: unknown, the entity-normalised
    # structure figures are then left out
    n_entities: int = 0

    @classmethod
    def build(
        cls,
        n: int,
        edges: Edges,
        fact_scale: float,
        synonym_scale: float,
        transition: Transition | None = None,
        n_entities: int = 0,
    ) -> Operator:
        """`transition`: the one these scales give, when the caller already has it;
        `n_entities`: how many of the first nodes are phrase nodes."""
        w = edges.scaled(fact_scale, synonym_scale)
        t = transition or Transition.from_edges(n, edges.src, edges.dst, w)
        rows = np.concatenate([edges.src, edges.dst])
        cols = np.concatenate([edges.dst, edges.src])
        adj = sp.csr_matrix((np.concatenate([w, w]), (rows, cols)), shape=(n, n))
        adj.sum_duplicates()
        adj.sort_indices()
        return cls(t, adj, np.asarray(adj.sum(axis=1)).ravel(), n_entities)

    @cached_property
    def hubs(self) -> np.ndarray:
        """The top 1% of nodes by weighted degree (CatRAG's "super hubs"), as a mask."""
        n = len(self.strength)
        k = max(1, int(np.ceil(0.01 * n)))
        mask = np.zeros(n, dtype=bool)
        mask[np.argsort(-self.strength, kind="stable")[:k]] = True
        return mask

    @cached_property
    def entity_hubs(self) -> np.ndarray:
        """The top 1% of phrase nodes by weighted degree, as a mask over the phrase nodes
        (CatRAG's hubs are bridge entities; passage nodes are left out)."""
        strength = self.strength[: self.n_entities]
        k = max(1, int(np.ceil(0.01 * len(strength))))
        mask = np.zeros(len(strength), dtype=bool)
        mask[np.argsort(-strength, kind="stable")[:k]] = True
        return mask


@dataclass
class GraphIndex:
    version: gs.IndexVersion
    n_entities: int
    passage_ids: list[str]  # node id = n_entities + position
    passage_titles: list[str]  # aligned with passage_ids (routing reads them)
    passage_emb: np.ndarray  # (P, d), normalised
    fact_emb: np.ndarray  # (F, d), normalised
    fact_ends: np.ndarray  # (F, 2) subject and object entity ids
    entity_passages: np.ndarray  # passages containing each entity (HippoRAG 2's divisor)
    transition: Transition  # at edge scales (1, 1): the weights as stored
    load_seconds: float = 0.0
    entity_names: list[str] = field(default_factory=list)  # normalised phrases, by entity id
    edges: Edges | None = None
    # per-version structures built on first use (operators per edge scales, CatRAG's maps)
    extras: dict[Any, Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def n_nodes(self) -> int:
        return self.n_entities + len(self.passage_ids)

    def operator(self, fact_scale: float = 1.0, synonym_scale: float = 1.0) -> Operator:
        """The graph's transition, adjacency and strengths with fact and synonym edges
        scaled (graph.fact_edge_scale, graph.synonym_edge_scale); built once per pair."""
        key = ("operator", float(fact_scale), float(synonym_scale))
        op = self.extras.get(key)
        if op is None:
            if self.edges is None:
                raise ValueError("this graph index holds no edge list to rescale")
            with self._lock:
                op = self.extras.get(key)
                if op is None:
                    stored = self.transition if (fact_scale, synonym_scale) == (1.0, 1.0) else None
                    op = Operator.build(
                        self.n_nodes, self.edges, fact_scale, synonym_scale, stored, self.n_entities
                    )
                    self.extras[key] = op
        return op

    def transition_for(self, fact_scale: float = 1.0, synonym_scale: float = 1.0) -> Transition:
        if (fact_scale, synonym_scale) == (1.0, 1.0):
            return self.transition
        return self.operator(fact_scale, synonym_scale).transition

    def cached(self, key: Any, build: Any) -> Any:
        """`build()` once per key for this version (thread-safe)."""
        value = self.extras.get(key)
        if value is None:
            with self._lock:
                value = self.extras.get(key)
                if value is None:
                    value = build()
                    self.extras[key] = value
        return value


def load_graph_index(version: gs.IndexVersion, params: GraphParams | None = None) -> GraphIndex:
    """Refused in one line when its estimated size at load is over the memory limit
    (graph.load_memory_limit_gb, `graph_memory.py`), before anything is read."""
    check_graph_memory(version, params or graph_params())
    t0 = time.perf_counter()
    rows = gs.read_graph_rows(version.id)
    pids, pemb = gs.passage_embeddings(version.dataset, version.encoder)
    n_e = len(rows.entities)
    pos = {pid: n_e + i for i, pid in enumerate(pids)}
    texts = [fact_text(rows.entities[s], r, rows.entities[o]) for s, r, o, _ in rows.facts]
    cached = gs.cached_text_embeddings(version.encoder, "fact", list(set(texts)))
    dim = pemb.shape[1] if len(pids) else version.dim
    fact_emb = (
        np.stack([cached[t] for t in texts]) if texts else np.zeros((0, dim), dtype=np.float32)
    )
    titles = gs.passage_titles(version.dataset)
    fact_ends = np.array([(s, o) for s, _, o, _ in rows.facts], dtype=np.int64).reshape(-1, 2)

    src, dst, w, kind = [], [], [], []
    for s, _, o, weight in rows.facts:  # fact edges, co-occurrence weighted
        src.append(s)
        dst.append(o)
        w.append(weight)
        kind.append(FACT_EDGE)
    ent_count = np.zeros(n_e, dtype=np.float64)
    for pid, e in rows.passage_entities:  # passage–entity edges
        src.append(pos[pid])
        dst.append(e)
        w.append(1.0)
        kind.append(PASSAGE_EDGE)
        ent_count[e] += 1
    for a, b, score in rows.synonyms:  # synonym edges
        src.append(a)
        dst.append(b)
        w.append(score)
        kind.append(SYNONYM_EDGE)
    edges = Edges(
        np.array(src, dtype=np.int64),
        np.array(dst, dtype=np.int64),
        np.array(w, dtype=np.float64),
        np.array(kind, dtype=np.int64),
    )
    transition = Transition.from_edges(n_e + len(pids), edges.src, edges.dst, edges.weight)
    return GraphIndex(
        version,
        n_e,
        pids,
        [titles.get(pid, "") for pid in pids],
        pemb,
        fact_emb,
        fact_ends,
        ent_count,
        transition,
        time.perf_counter() - t0,
        list(rows.entities),
        edges,
    )


class GraphCache:
    """One in-memory graph per dataset, swapped atomically when the latest version changes."""

    def __init__(self, check_every_s: float = 5.0) -> None:
        self._graphs: dict[str, GraphIndex] = {}
        self._checked: dict[str, float] = {}
        self._lock = threading.Lock()
        self.check_every_s = check_every_s

    def get(self, dataset: str) -> GraphIndex:
        """The dataset's latest version in memory, loaded when it changes (checked every
        `check_every_s`). With the database down the version check fails and the graph in
        memory serves: the routers read only its embeddings and titles, so routing decides
        as before, while retrieval, which reads passages from the database, answers 503."""
        now = time.monotonic()
        g = self._graphs.get(dataset)
        if g is not None and now - self._checked.get(dataset, 0) < self.check_every_s:
            return g
        try:
            latest = gs.require_version(dataset)
        except DatabaseError:
            if g is None:
                raise
            return g  # checked again on the next call
        with self._lock:
            g = self._graphs.get(dataset)
            if g is None or g.version.id != latest.id:
                g = load_graph_index(latest)
                self._graphs[dataset] = g
            self._checked[dataset] = now
        return g


GRAPHS = GraphCache()
