"""Index versions, embeddings and graph tables in Postgres: write one version in one
transaction, read the latest version back."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from r2adapter.config import graph_params
from r2adapter.data.schema import Extraction, GraphParts, Passage
from r2adapter.errors import R2AError
from r2adapter.store.db import connection


@dataclass(frozen=True)
class IndexVersion:
    id: int
    dataset: str
    encoder: str
    dim: int
    openie: str
    signature: str
    counts: dict[str, int]


class NotIndexedError(R2AError):
    pass


def as_array(value: object) -> np.ndarray:
    """pgvector's Vector/HalfVector (or a plain sequence) as a float32 array."""
    to_numpy = getattr(value, "to_numpy", None)
    return np.asarray(to_numpy() if to_numpy else value, dtype=np.float32)


def vector_type(dim: int) -> sql.Composable:
    """`vector(d)`, or `halfvec(d)` above 2,000 dimensions (pgvector's HNSW limit)."""
    kind = "halfvec" if dim > graph_params().halfvec_above_dim else "vector"
    return sql.SQL("{}({})").format(sql.SQL(kind), sql.Literal(dim))


def _ops(dim: int) -> sql.Composable:
    return sql.SQL(
        "halfvec_cosine_ops" if dim > graph_params().halfvec_above_dim else "vector_cosine_ops"
    )


def hnsw_index_name(dataset: str, encoder: str) -> str:
    return "pe_hnsw_" + hashlib.md5(f"{dataset}\0{encoder}".encode()).hexdigest()[:16]


# maintenance_work_mem of the transactions that build HNSW indexes: at Postgres' 64 MB the
# graph of 2Wiki's 46k entity vectors (ADR's) overflows it and the build takes 22-27 s, in
# memory 11 s; a larger graph overflows again, so this bounds what a build holds
HNSW_BUILD_MEMORY = "1GB"


def hnsw_build_memory(conn: psycopg.Connection) -> None:
    """Let the HNSW builds of the caller's transaction hold their graph in memory."""
    conn.execute(
        sql.SQL("SET LOCAL maintenance_work_mem = {}").format(sql.Literal(HNSW_BUILD_MEMORY))
    )


def ensure_hnsw_index(conn: psycopg.Connection, dataset: str, encoder: str, dim: int) -> None:
    """A partial HNSW expression index per (dataset, encoder), cosine distance."""
    conn.execute(
        sql.SQL(
            "CREATE INDEX IF NOT EXISTS {name} ON passage_embeddings USING hnsw "
            "((embedding::{vt}) {ops}) WHERE dataset = {ds} AND encoder = {enc}"
        ).format(
            name=sql.Identifier(hnsw_index_name(dataset, encoder)),
            vt=vector_type(dim),
            ops=_ops(dim),
            ds=sql.Literal(dataset),
            enc=sql.Literal(encoder),
        )
    )


def stored_passages(dataset: str) -> list[Passage]:
    with connection() as conn:
        rows = conn.execute(
            "SELECT id, title, text FROM passages WHERE dataset = %s ORDER BY id", (dataset,)
        ).fetchall()
    return [Passage(*r) for r in rows]


def missing_passage_embeddings(dataset: str, encoder: str) -> list[Passage]:
    with connection() as conn:
        rows = conn.execute(
            "SELECT p.id, p.title, p.text FROM passages p LEFT JOIN passage_embeddings e"
            " ON e.dataset = p.dataset AND e.passage_id = p.id AND e.encoder = %s"
            " WHERE p.dataset = %s AND e.passage_id IS NULL ORDER BY p.id",
            (encoder, dataset),
        ).fetchall()
    return [Passage(*r) for r in rows]


def save_passage_embeddings(
    dataset: str, encoder: str, ids: Sequence[str], emb: np.ndarray
) -> None:
    with connection() as conn, conn.transaction(), conn.cursor() as cur:
        copy_binary(
            cur,
            "passage_embeddings (dataset, passage_id, encoder, embedding)",
            ("text", "text", "text", "vector"),
            ((dataset, pid, encoder, vec) for pid, vec in zip(ids, emb, strict=True)),
        )


def copy_binary(
    cur: psycopg.Cursor, target: str, types: Sequence[str], rows: Iterable[tuple[object, ...]]
) -> None:
    """COPY in binary, `types` the columns' (vectors as numpy arrays): each float32 stored
    as computed, with no text in between (formatting 384 floats as text took longer than
    the Postgres side of the write: 2Wiki's 110k entity and fact vectors, ~20 s)."""
    with cur.copy(f"COPY {target} FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(list(types))
        for row in rows:
            copy.write_row(row)


def passage_embeddings(dataset: str, encoder: str) -> tuple[list[str], np.ndarray]:
    with connection() as conn:
        rows = conn.execute(
            "SELECT passage_id, embedding FROM passage_embeddings WHERE dataset = %s AND"
            " encoder = %s ORDER BY passage_id",
            (dataset, encoder),
        ).fetchall()
    if not rows:
        return [], np.zeros((0, 0), dtype=np.float32)
    return [r[0] for r in rows], np.stack([as_array(r[1]) for r in rows])


# ---- OpenIE cache ----------------------------------------------------------------------


def cached_extractions(backend: str, ids: Sequence[str]) -> dict[str, Extraction]:
    with connection() as conn:
        rows = conn.execute(
            "SELECT passage_hash, entities, triples FROM openie_cache WHERE backend = %s AND"
            " passage_hash = ANY(%s)",
            (backend, list(ids)),
        ).fetchall()
    return {h: Extraction(list(e), [tuple(t) for t in tr]) for h, e, tr in rows}


def save_extractions(backend: str, items: Iterable[tuple[str, Extraction]]) -> None:
    with connection() as conn, conn.transaction():
        conn.cursor().executemany(
            "INSERT INTO openie_cache (backend, passage_hash, entities, triples) VALUES"
            " (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
            [
                (backend, h, Jsonb(ex.entities), Jsonb([list(t) for t in ex.triples]))
                for h, ex in items
            ],
        )


# ---- phrase and fact embeddings, cached by text ------------------------------------------


def cached_text_embeddings(encoder: str, kind: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
    with connection() as conn:
        rows = conn.execute(
            "SELECT text, embedding FROM text_embeddings WHERE encoder = %s AND kind = %s AND"
            " text = ANY(%s)",
            (encoder, kind, list(texts)),
            binary=True,  # the vectors as stored, without parsing text
        ).fetchall()
    return {t: as_array(e) for t, e in rows}


def cached_text_keys(encoder: str, kind: str, texts: Sequence[str]) -> set[str]:
    """The texts among `texts` whose embeddings are cached (not the vectors)."""
    with connection() as conn:
        rows = conn.execute(
            "SELECT text FROM text_embeddings WHERE encoder = %s AND kind = %s AND text = ANY(%s)",
            (encoder, kind, list(texts)),
        ).fetchall()
    return {r[0] for r in rows}


def save_text_embeddings(encoder: str, kind: str, texts: Sequence[str], emb: np.ndarray) -> None:
    with connection() as conn, conn.transaction(), conn.cursor() as cur:
        cur.execute("CREATE TEMP TABLE te_in (LIKE text_embeddings) ON COMMIT DROP")
        copy_binary(
            cur,
            "te_in (encoder, kind, text, embedding)",
            ("text", "text", "text", "vector"),
            ((encoder, kind, t, vec) for t, vec in zip(texts, emb, strict=True)),
        )
        cur.execute("INSERT INTO text_embeddings SELECT * FROM te_in ON CONFLICT DO NOTHING")


# ---- index versions --------------------------------------------------------------------


def own_version(dataset: str) -> IndexVersion | None:
    """The latest index version built for `dataset` itself."""
    with connection() as conn:
        row = conn.execute(
            "SELECT id, dataset, encoder, dim, openie, signature, counts FROM index_versions"
            " WHERE dataset = %s ORDER BY id DESC LIMIT 1",
            (dataset,),
        ).fetchone()
    return IndexVersion(*row) if row else None


def corpus_twin(dataset: str, openie: str | None = None) -> str | None:
    """An indexed dataset whose stored corpus is `dataset`'s, recognised by content: the same
    passage ids (an id is md5(title + "\\n" + text), so the same set is the same texts). A
    query set over an already indexed corpus (musique_dev_mixed over musique_dev's
    paragraphs) is served from that index and never indexed twice. `openie`: only a twin
    whose latest index was built by that OpenIE backend (`spacy`, `precomputed`, `llm`): a
    graph of another backend's triples is another index. None when no indexed dataset holds
    the same corpus (or `dataset` has no passages)."""
    with connection() as conn:
        row = conn.execute(
            "WITH mine AS (SELECT count(*) AS n, md5(string_agg(id, ',' ORDER BY id)) AS h"
            "              FROM passages WHERE dataset = %(d)s)"
            " SELECT p.dataset FROM passages p"
            " WHERE p.dataset <> %(d)s"
            "   AND p.dataset IN (SELECT dataset FROM (SELECT DISTINCT ON (dataset) dataset,"
            "        openie FROM index_versions ORDER BY dataset, id DESC) v"
            "        WHERE %(o)s::text IS NULL OR split_part(v.openie, ':', 1) = %(o)s)"
            " GROUP BY p.dataset"
            " HAVING count(*) = (SELECT n FROM mine) AND (SELECT n FROM mine) > 0"
            "   AND md5(string_agg(p.id, ',' ORDER BY p.id)) = (SELECT h FROM mine)"
            " ORDER BY p.dataset LIMIT 1",
            {"d": dataset, "o": openie},
        ).fetchone()
    return str(row[0]) if row else None


_CORPUS_KEYS: dict[tuple[str, str], str | None] = {}


def corpus_key(dataset: str) -> str | None:
    """The identity of `dataset`'s stored corpus: md5 over its sorted passage ids (ids are
    content hashes, so two query sets over the same passages share it); None when nothing
    is stored under that name. Memoised per content (the dataset's load checksum)."""
    with connection() as conn:
        row = conn.execute(
            "SELECT content_sha256 FROM datasets WHERE name = %s", (dataset,)
        ).fetchone()
        if row is None:
            return None
        memo = (dataset, str(row[0]))
        if memo not in _CORPUS_KEYS:
            key = conn.execute(
                "SELECT md5(string_agg(id, ',' ORDER BY id)) FROM passages WHERE dataset = %s",
                (dataset,),
            ).fetchone()
            _CORPUS_KEYS[memo] = str(key[0]) if key and key[0] else None
    return _CORPUS_KEYS[memo]


def sharing(share: bool | None = None) -> bool:
    """Whether a dataset never indexed itself is served from an indexed dataset holding the
    same passages (`corpus_twin`): `share` when given, else the environment's
    `R2A_SHARE_INDEX` (default 1; the test suite sets 0, so that a test's copy of a corpus
    is a dataset of its own)."""
    if share is not None:
        return share
    return os.environ.get("R2A_SHARE_INDEX", "1").strip().lower() not in ("0", "false", "no")


def latest_version(dataset: str) -> IndexVersion | None:
    """The index `dataset` is served from: its own latest version, else (never indexed
    itself) the latest version of the indexed dataset holding the same corpus
    (`corpus_twin`; the version's `dataset` then names that one)."""
    own = own_version(dataset)
    if own is not None or not sharing():
        return own
    twin = corpus_twin(dataset)
    return own_version(twin) if twin else None


def require_version(dataset: str) -> IndexVersion:
    v = latest_version(dataset)
    if v is None:
        raise NotIndexedError(
            f"dataset '{dataset}' is not indexed: run `r2a index --dataset {dataset}` first"
        )
    return v


def write_version(
    dataset: str,
    encoder: str,
    dim: int,
    openie: str,
    signature: str,
    parts: GraphParts,
    synonyms: Sequence[tuple[int, int, float]],
    counts: dict[str, int],
    timings: dict[str, float],
    also: Callable[[psycopg.Connection, int], None] | None = None,
) -> int:
    """One transaction: the version row and all its graph rows, or nothing. `also` writes
    more rows of the version (ADR's hypergraph) inside the same transaction."""
    with connection() as conn, conn.transaction():
        hnsw_build_memory(conn)
        ensure_hnsw_index(conn, dataset, encoder, dim)
        row = conn.execute(
            "INSERT INTO index_versions (dataset, encoder, dim, openie, signature, counts,"
            " timings) VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (dataset, encoder, dim, openie, signature, Jsonb(counts), Jsonb(timings)),
        ).fetchone()
        assert row is not None  # INSERT … RETURNING always returns the row
        vid = int(row[0])
        with conn.cursor() as cur:
            _copy(
                cur,
                "entities (index_version, id, name)",
                ((vid, i, name) for i, name in enumerate(parts.entities)),
            )
            _copy(
                cur,
                "facts (index_version, id, subject_id, relation, object_id, weight)",
                (
                    (vid, i, s, r, o, w)
                    for i, ((s, r, o), w) in enumerate(
                        zip(parts.facts, parts.fact_weight, strict=True)
                    )
                ),
            )
            _copy(
                cur,
                "fact_passages (index_version, fact_id, passage_id)",
                ((vid, f, p) for f, p in parts.fact_passages),
            )
            _copy(
                cur,
                "passage_entities (index_version, passage_id, entity_id)",
                ((vid, p, e) for p, e in parts.passage_entities),
            )
            _copy(
                cur,
                "synonym_edges (index_version, a, b, score)",
                ((vid, a, b, s) for a, b, s in synonyms),
            )
        if also is not None:
            also(conn, vid)
    return int(vid)


def update_timings(version: int, timings: dict[str, float]) -> None:
    with connection() as conn:
        conn.execute(
            "UPDATE index_versions SET timings = %s WHERE id = %s", (Jsonb(timings), version)
        )


def _copy(cur: psycopg.Cursor, target: str, rows: Iterable[tuple[object, ...]]) -> None:
    with cur.copy(f"COPY {target} FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


@dataclass
class GraphRows:
    entities: list[str]
    facts: list[tuple[int, str, int, float]]  # subject, relation, object, weight
    passage_entities: list[tuple[str, int]]
    synonyms: list[tuple[int, int, float]]


def read_graph_rows(version: int) -> GraphRows:
    with connection() as conn:
        ents = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM entities WHERE index_version = %s ORDER BY id", (version,)
            )
        ]
        facts = conn.execute(
            "SELECT subject_id, relation, object_id, weight FROM facts WHERE index_version = %s"
            " ORDER BY id",
            (version,),
        ).fetchall()
        pe = conn.execute(
            "SELECT passage_id, entity_id FROM passage_entities WHERE index_version = %s",
            (version,),
        ).fetchall()
        syn = conn.execute(
            "SELECT a, b, score FROM synonym_edges WHERE index_version = %s", (version,)
        ).fetchall()
    return GraphRows(ents, facts, pe, syn)


def read_fact_passages(version: int) -> list[tuple[int, str]]:
    """(fact id, passage id): the passages each fact was extracted from."""
    with connection() as conn:
        rows = conn.execute(
            "SELECT fact_id, passage_id FROM fact_passages WHERE index_version = %s",
            (version,),
        ).fetchall()
    return [(int(f), str(p)) for f, p in rows]


def passage_titles(dataset: str) -> dict[str, str]:
    with connection() as conn:
        rows = conn.execute(
            "SELECT id, title FROM passages WHERE dataset = %s", (dataset,)
        ).fetchall()
    return {r[0]: r[1] for r in rows}


def passages_by_id(dataset: str, ids: Sequence[str]) -> dict[str, Passage]:
    with connection() as conn:
        rows = conn.execute(
            "SELECT id, title, text FROM passages WHERE dataset = %s AND id = ANY(%s)",
            (dataset, list(ids)),
        ).fetchall()
    return {r[0]: Passage(*r) for r in rows}
