"""The graph of one index version held in memory: CSR transition, fact and passage
embeddings. Loaded from Postgres once per version, reloaded when a new version appears."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from r2adapter.index.graph import fact_text
from r2adapter.retrieve.ppr import Transition
from r2adapter.store import graph_store as gs


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
    transition: Transition
    load_seconds: float = 0.0

    @property
    def n_nodes(self) -> int:
        return self.n_entities + len(self.passage_ids)


def load_graph_index(version: gs.IndexVersion) -> GraphIndex:
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

    src, dst, w = [], [], []
    for s, _, o, weight in rows.facts:  # fact edges, co-occurrence weighted
        src.append(s)
        dst.append(o)
        w.append(weight)
    ent_count = np.zeros(n_e, dtype=np.float64)
    for pid, e in rows.passage_entities:  # passage–entity edges
        src.append(pos[pid])
        dst.append(e)
        w.append(1.0)
        ent_count[e] += 1
    for a, b, score in rows.synonyms:  # synonym edges
        src.append(a)
        dst.append(b)
        w.append(score)
    transition = Transition.from_edges(
        n_e + len(pids), np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), np.array(w)
    )
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
    )


class GraphCache:
    """One in-memory graph per dataset, swapped atomically when the latest version changes."""

    def __init__(self, check_every_s: float = 5.0) -> None:
        self._graphs: dict[str, GraphIndex] = {}
        self._checked: dict[str, float] = {}
        self._lock = threading.Lock()
        self.check_every_s = check_every_s

    def get(self, dataset: str) -> GraphIndex:
        now = time.monotonic()
        g = self._graphs.get(dataset)
        if g is not None and now - self._checked.get(dataset, 0) < self.check_every_s:
            return g
        latest = gs.require_version(dataset)
        with self._lock:
            g = self._graphs.get(dataset)
            if g is None or g.version.id != latest.id:
                g = load_graph_index(latest)
                self._graphs[dataset] = g
            self._checked[dataset] = now
        return g


GRAPHS = GraphCache()
