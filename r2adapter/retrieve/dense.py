"""Dense retrieval: cosine top-k in pgvector through the partial HNSW index."""

from __future__ import annotations

import numpy as np
from psycopg import sql

from r2adapter.config import graph_params
from r2adapter.errors import R2AError
from r2adapter.index.encoder import Encoder, get_encoder
from r2adapter.retrieve.base import Hit, Retriever
from r2adapter.store.db import connection
from r2adapter.store.graph_store import IndexVersion, require_version, vector_type


def check_encoder(version: IndexVersion, enc: Encoder) -> None:
    if version.encoder != enc.name or version.dim != enc.dim:
        raise R2AError(
            f"index of '{version.dataset}' was built with {version.encoder} ({version.dim}-d); "
            f"the configured encoder is {enc.name} ({enc.dim}-d), whose vectors are not mixed "
            f"with another's: set encoder.model/backend (R2A_ENCODER, R2A_ENCODER_BACKEND) to "
            f"match, or rebuild it with `r2a index --dataset {version.dataset} --rebuild`"
        )


class DenseRetriever(Retriever):
    mode = "dense"

    def __init__(self, dataset: str, encoder: Encoder | None = None) -> None:
        self.dataset = dataset
        self.encoder = encoder or get_encoder()
        version = require_version(dataset)
        check_encoder(version, self.encoder)
        vt = vector_type(self.encoder.dim)
        # dataset and encoder as literals so the planner can match the partial index; the
        # index's dataset (a query set over another dataset's corpus reads that one's)
        self._sql = sql.SQL(
            "SELECT e.passage_id, 1 - (e.embedding::{vt} <=> %(q)s::{vt}) AS score, p.title, p.text"
            " FROM (SELECT passage_id, embedding FROM passage_embeddings"
            "       WHERE dataset = {ds} AND encoder = {enc}"
            "       ORDER BY embedding::{vt} <=> %(q)s::{vt} LIMIT %(k)s) e"
            " JOIN passages p ON p.dataset = {ds} AND p.id = e.passage_id"
            " ORDER BY score DESC"
        ).format(vt=vt, ds=sql.Literal(version.dataset), enc=sql.Literal(self.encoder.name))
        self._ef = graph_params().hnsw_ef_search

    def retrieve(self, query: str, k: int = 5, qvec: np.ndarray | None = None) -> list[Hit]:
        vec = self.encoder.encode_query(query.strip()) if qvec is None else qvec
        with connection() as conn:
            conn.execute(
                sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(max(self._ef, k)))
            )
            rows = conn.execute(self._sql, {"q": vec.astype(np.float32), "k": k}).fetchall()
        return [Hit(pid, float(score), title, text) for pid, score, title, text in rows]
