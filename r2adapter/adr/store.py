"""The dual hypergraph in Postgres (migration 0006_adr.sql): written in one transaction per
index version (the version's own when both are new), read back whole, and the two
pgvector HNSW searches the operators start from (ADR eq. 2 and eq. 6)."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from r2adapter.adr import AdrUnavailable
from r2adapter.adr.hypergraph import DualHypergraph
from r2adapter.config import AdrParams
from r2adapter.store import graph_store as gs
from r2adapter.store.db import connection

# the build's parameters: a change in any of these rebuilds the hypergraph
BUILD_FIELDS = (
    "min_hyperedge",
    "max_entity_insights",
    "knn",
    "knn_threshold",
    "objective",
    "resolution",
    "seed",
    "narrative_tokens",
    "insight_text",
    "tokenizer",
)
# tables with an embedding column, each searched through a partial HNSW index per version
EMBEDDED = {"adr_entity_embeddings": "entity_id", "adr_insight_edges": "id",
            "adr_insight_vertices": "id"}  # fmt: skip


class NoHypergraphError(AdrUnavailable):
    """The index has no ADR hypergraph: the service answers 503, the CLI exits 1."""


def build_signature(version_signature: str, p: AdrParams, llm: str = "") -> str:
    keep = {k: v for k, v in asdict(p).items() if k in BUILD_FIELDS}
    return hashlib.sha256(
        f"{version_signature}\0{sorted(keep.items())}\0{llm}".encode()
    ).hexdigest()


def built_signature(version: int) -> str | None:
    with connection() as conn:
        row = conn.execute(
            "SELECT signature FROM adr_builds WHERE index_version = %s", (version,)
        ).fetchone()
    return None if row is None else str(row[0])


def require_hypergraph(dataset: str) -> gs.IndexVersion:
    """The latest index version of `dataset`, which must hold a hypergraph."""
    v = gs.require_version(dataset)
    if built_signature(v.id) is None:
        raise NoHypergraphError(
            f"index version {v.id} of '{dataset}' has no ADR hypergraph: run "
            f"`r2a index --dataset {dataset} --adr` (or set adr.enabled: true in params.yaml)"
        )
    return v


def _hnsw(conn: psycopg.Connection, table: str, version: int, dim: int) -> None:
    vt, ops = gs.vector_type(dim), gs._ops(dim)
    conn.execute(
        sql.SQL(
            "CREATE INDEX IF NOT EXISTS {name} ON {table} USING hnsw ((embedding::{vt}) {ops})"
            " WHERE index_version = {v}"
        ).format(
            name=sql.Identifier(f"{table}_hnsw_{version}"),
            table=sql.Identifier(table),
            vt=vt,
            ops=ops,
            v=sql.Literal(version),
        )
    )


def write_hypergraph(
    conn: psycopg.Connection,
    version: int,
    signature: str,
    h: DualHypergraph,
    entity_emb: np.ndarray,
    timings: dict[str, float],
) -> None:
    """All of the hypergraph's rows for `version`, replacing an older build, inside the
    caller's transaction (nothing half-written)."""
    conn.execute("DELETE FROM adr_builds WHERE index_version = %s", (version,))
    conn.execute(
        "INSERT INTO adr_builds (index_version, signature, counts, timings) VALUES"
        " (%s, %s, %s, %s)",
        (version, signature, Jsonb(h.counts()), Jsonb(timings)),
    )
    with conn.cursor() as cur:
        gs._copy(
            cur,
            "adr_hyperedges (index_version, id, passage_id, sentence)",
            ((version, i, e.passage_id, e.sentence) for i, e in enumerate(h.hyperedges)),
        )
        gs._copy(
            cur,
            "adr_hyperedge_members (index_version, hyperedge_id, entity_id)",
            ((version, i, m) for i, e in enumerate(h.hyperedges) for m in e.members),
        )
        gs.copy_binary(
            cur,
            "adr_insight_vertices (index_version, id, hyperedge_id, text, tokens, embedding)",
            ("int8", "int4", "int4", "text", "int4", "vector"),
            (
                (version, i, i, e.insight, int(t), v)  # π: hyperedge i ↦ insight vertex i
                for i, (e, t, v) in enumerate(
                    zip(h.hyperedges, h.insight_tokens, h.insight_emb, strict=True)
                )
            ),
        )
        gs.copy_binary(
            cur,
            "adr_insight_edges (index_version, id, narrative, tokens, embedding)",
            ("int8", "int4", "text", "int4", "vector"),
            (
                (version, i, n, int(t), v)
                for i, (n, t, v) in enumerate(
                    zip(h.narratives, h.narrative_tokens, h.narrative_emb, strict=True)
                )
            ),
        )
        gs._copy(
            cur,
            "adr_insight_edge_members (index_version, edge_id, vertex_id, centrality)",
            ((version, i, v, float(h.centrality[v])) for i, ms in enumerate(h.edges) for v in ms),
        )
        gs.copy_binary(
            cur,
            "adr_entity_embeddings (index_version, entity_id, embedding)",
            ("int8", "int4", "vector"),
            ((version, i, v) for i, v in enumerate(entity_emb)),
        )
    dim = int(entity_emb.shape[1]) if entity_emb.ndim == 2 else int(h.insight_emb.shape[1])
    for table in EMBEDDED:
        _hnsw(conn, table, version, dim)


def write_hypergraph_alone(
    version: int,
    signature: str,
    h: DualHypergraph,
    entity_emb: np.ndarray,
    timings: dict[str, float],
) -> None:
    """The hypergraph of an existing index version, in its own transaction."""
    with connection() as conn, conn.transaction():
        gs.hnsw_build_memory(conn)
        write_hypergraph(conn, version, signature, h, entity_emb, timings)


@dataclass
class HypergraphRows:
    hyperedge_passage: list[str]  # hyperedge id → passage id
    hyperedge_members: list[list[int]]  # hyperedge id → entity ids
    insight_text: list[str]  # vertex id (= hyperedge id, π) → atomic insight
    insight_tokens: np.ndarray
    insight_emb: np.ndarray
    narrative: list[str]  # deep insight edge id → narrative
    narrative_tokens: np.ndarray
    narrative_emb: np.ndarray
    edge_members: list[list[int]]  # edge id → vertex ids, by decreasing centrality
    counts: dict[str, Any]


def read_hypergraph(version: int) -> HypergraphRows:
    with connection() as conn:
        row = conn.execute(
            "SELECT counts FROM adr_builds WHERE index_version = %s", (version,)
        ).fetchone()
        if row is None:
            raise NoHypergraphError(f"index version {version} has no ADR hypergraph")
        he = conn.execute(
            "SELECT id, passage_id FROM adr_hyperedges WHERE index_version = %s ORDER BY id",
            (version,),
        ).fetchall()
        members: list[list[int]] = [[] for _ in he]
        for hid, ent in conn.execute(
            "SELECT hyperedge_id, entity_id FROM adr_hyperedge_members WHERE index_version = %s",
            (version,),
        ):
            members[hid].append(int(ent))
        iv = conn.execute(
            "SELECT text, tokens, embedding FROM adr_insight_vertices WHERE index_version = %s"
            " ORDER BY id",
            (version,),
        ).fetchall()
        ie = conn.execute(
            "SELECT narrative, tokens, embedding FROM adr_insight_edges WHERE index_version = %s"
            " ORDER BY id",
            (version,),
        ).fetchall()
        em: list[list[tuple[float, int]]] = [[] for _ in ie]
        for eid, vid, c in conn.execute(
            "SELECT edge_id, vertex_id, centrality FROM adr_insight_edge_members"
            " WHERE index_version = %s",
            (version,),
        ):
            em[eid].append((-float(c), int(vid)))

    def stack(rows: list[Any]) -> np.ndarray:
        return np.stack([gs.as_array(r[2]) for r in rows]) if rows else np.zeros((0, 1))

    return HypergraphRows(
        [str(p) for _, p in he],
        members,
        [r[0] for r in iv],
        np.array([r[1] for r in iv], dtype=np.int64),
        stack(iv),
        [r[0] for r in ie],
        np.array([r[1] for r in ie], dtype=np.int64),
        stack(ie),
        [[v for _, v in sorted(ms)] for ms in em],
        dict(row[0]),
    )


def nearest(
    conn: psycopg.Connection, table: str, version: int, dim: int, qvec: np.ndarray, k: int
) -> list[tuple[int, float]]:
    """The k rows of `table` (this version) nearest the query by cosine, through HNSW."""
    vt = gs.vector_type(dim)
    q = sql.SQL(
        "SELECT {key}, 1 - (embedding::{vt} <=> %(q)s::{vt}) FROM {table}"
        " WHERE index_version = {v} ORDER BY embedding::{vt} <=> %(q)s::{vt} LIMIT %(k)s"
    ).format(
        key=sql.Identifier(EMBEDDED[table]),
        vt=vt,
        table=sql.Identifier(table),
        v=sql.Literal(version),
    )
    rows = conn.execute(q, {"q": qvec.astype(np.float32), "k": k}).fetchall()
    return [(int(i), float(s)) for i, s in rows]
