"""What CatRAG reads per index version, built once and cached on the graph index: the
entity → facts and fact → passages maps its edits walk, and the entity embeddings its
entity match and learned tiers read (below catrag.py, catrag_tiers.py, catrag_llm.py and
catrag_train.py, which all read them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from r2adapter.errors import R2AError
from r2adapter.retrieve.graph_index import GraphIndex


@dataclass(frozen=True)
class CatragMaps:
    """Built once per index version: entity name → id, entity → facts, fact → passages."""

    name_to_entity: dict[str, int]
    ent_fact_ptr: np.ndarray  # CSR: facts of entity e are ent_fact_idx[ptr[e]:ptr[e+1]]
    ent_fact_idx: np.ndarray
    fact_pass_ptr: np.ndarray  # CSR: passage node ids of fact f
    fact_pass_idx: np.ndarray

    def facts_of(self, e: int) -> np.ndarray:
        return self.ent_fact_idx[self.ent_fact_ptr[e] : self.ent_fact_ptr[e + 1]]

    def passages_of(self, f: int) -> np.ndarray:
        return self.fact_pass_idx[self.fact_pass_ptr[f] : self.fact_pass_ptr[f + 1]]


def _csr(n: int, keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr, values[order].astype(np.int64)


def build_maps(g: GraphIndex, fact_passages: list[tuple[int, str]]) -> CatragMaps:
    """`fact_passages`: (fact id, passage id) rows of the index (graph_store)."""
    n_f = len(g.fact_ends)
    if n_f and not fact_passages:
        v = g.version
        raise R2AError(
            f"index version {v.id} of '{v.dataset}' has no fact–passage rows, which catrag "
            f"needs: rebuild it with `r2a index --dataset {v.dataset}`"
        )
    if n_f and not g.entity_names:
        raise R2AError("this graph index holds no entity names, which catrag needs")
    ends = g.fact_ends.reshape(-1, 2)
    ent_keys = np.concatenate([ends[:, 0], ends[:, 1]]).astype(np.int64)
    fact_ids = np.concatenate([np.arange(n_f), np.arange(n_f)]).astype(np.int64)
    ent_ptr, ent_idx = _csr(g.n_entities, ent_keys, fact_ids)
    pos = {pid: g.n_entities + i for i, pid in enumerate(g.passage_ids)}
    rows = [(f, pos[p]) for f, p in fact_passages if p in pos and f < n_f]
    fk = np.array([f for f, _ in rows], dtype=np.int64)
    pv = np.array([p for _, p in rows], dtype=np.int64)
    f_ptr, f_idx = _csr(n_f, fk, pv)
    names = {name: i for i, name in enumerate(g.entity_names)}
    return CatragMaps(names, ent_ptr, ent_idx, f_ptr, f_idx)


def catrag_maps(g: GraphIndex) -> CatragMaps:
    from r2adapter.store.graph_store import read_fact_passages

    return g.cached("catrag_maps", lambda: build_maps(g, read_fact_passages(g.version.id)))


def entity_embeddings(g: GraphIndex) -> np.ndarray:
    """The index's entity embeddings (E × d, normalised), read once per version from the
    embedding cache the index build wrote; a missing one names the index to rebuild."""

    def load() -> np.ndarray:
        from r2adapter.store.graph_store import cached_text_embeddings

        have = cached_text_embeddings(g.version.encoder, "entity", g.entity_names)
        missing = sum(name not in have for name in g.entity_names)
        if missing:
            v = g.version
            raise R2AError(
                f"{missing} entity embeddings of index version {v.id} of '{v.dataset}' are "
                f"missing, which catrag's entity match needs: rebuild it with "
                f"`r2a index --dataset {v.dataset}`"
            )
        if not g.entity_names:
            return np.zeros((0, g.passage_emb.shape[1]), dtype=np.float32)
        return np.stack([have[n] for n in g.entity_names]).astype(np.float32)

    out: np.ndarray = g.cached("entity_embeddings", load)
    return out
