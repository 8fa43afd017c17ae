"""Write a dataset into Postgres in one transaction: all of it or none of it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import psycopg
from psycopg.types.json import Jsonb

from r2adapter.data.adapters import shipped_source
from r2adapter.data.schema import Dataset
from r2adapter.data.validate import corpus_problems
from r2adapter.errors import DatabaseError, DataError
from r2adapter.store.db import connection
from r2adapter.store.migrate import migrate


@dataclass(frozen=True)
class LoadResult:
    dataset: str
    passages_added: int
    passages_removed: int
    queries_added: int
    queries_changed: int
    queries_removed: int

    @property
    def changed(self) -> bool:
        return any(
            (
                self.passages_added,
                self.passages_removed,
                self.queries_added,
                self.queries_changed,
                self.queries_removed,
            )
        )

    def to_report(self) -> dict[str, object]:
        return {"dataset": self.dataset, **self.metrics(), "changed": self.changed}

    def metrics(self) -> dict[str, float]:
        return {
            "passages_added": self.passages_added,
            "passages_removed": self.passages_removed,
            "queries_added": self.queries_added,
            "queries_changed": self.queries_changed,
            "queries_removed": self.queries_removed,
        }


def content_sha256(ds: Dataset) -> str:
    h = hashlib.sha256()
    for p in sorted(ds.passages, key=lambda p: p.id):
        h.update(p.id.encode())
    for q in sorted(ds.queries, key=lambda q: q.id):
        h.update(
            json.dumps(
                [q.id, q.question, q.answers, q.gold_passage_ids, q.type, q.source, q.gold_complete]
            ).encode()
        )
    return h.hexdigest()


_UPSERT_QUERY = """
INSERT INTO queries (dataset, id, question, answers, gold_passage_ids, type, source,
                     gold_complete)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (dataset, id) DO UPDATE SET
    question = EXCLUDED.question, answers = EXCLUDED.answers,
    gold_passage_ids = EXCLUDED.gold_passage_ids, type = EXCLUDED.type,
    source = EXCLUDED.source, gold_complete = EXCLUDED.gold_complete
WHERE (queries.question, queries.answers, queries.gold_passage_ids, queries.type,
       queries.source, queries.gold_complete)
  IS DISTINCT FROM (EXCLUDED.question, EXCLUDED.answers, EXCLUDED.gold_passage_ids,
                    EXCLUDED.type, EXCLUDED.source, EXCLUDED.gold_complete)
RETURNING (xmax = 0) AS inserted
"""


_UPSERT_DATASET = """
INSERT INTO datasets (name, corpus_format, query_format, n_passages, n_queries,
                      content_sha256, source)
VALUES (%s, %s, %s, %s, %s, %s, NULLIF(%s, ''))
ON CONFLICT (name) DO UPDATE SET
    corpus_format = EXCLUDED.corpus_format, query_format = EXCLUDED.query_format,
    n_passages = EXCLUDED.n_passages, n_queries = EXCLUDED.n_queries,
    content_sha256 = EXCLUDED.content_sha256, loaded_at = now(),
    source = COALESCE(EXCLUDED.source, datasets.source)
WHERE datasets.content_sha256 IS DISTINCT FROM EXCLUDED.content_sha256
   OR datasets.source IS DISTINCT FROM COALESCE(EXCLUDED.source, datasets.source)
"""


def load(ds: Dataset, replace: bool = False) -> LoadResult:
    """Make the stored dataset equal to `ds`; a second identical load changes nothing.

    A corpus validation fails on for repeated or over-long passages, or blank questions, is
    refused whole (a one-line DataError, nothing written) rather than stored with the
    repeats dropped. A name stored from another source (or a shipped name, from a folder
    that is not the shipped one) is refused too, unless `replace`: the stored dataset is
    what every label, index and router of that name was made from."""
    problems = corpus_problems(ds)
    if problems:
        raise DataError(
            f"{ds.name}: not loaded, nothing written: {'; '.join(problems)} "
            f"(`r2a data validate` fails on the same)"
        )
    migrate()
    try:
        with connection() as conn, conn.transaction():
            row = conn.execute(
                "SELECT source FROM datasets WHERE name = %s FOR UPDATE", (ds.name,)
            ).fetchone()
            owner = (row[0] if row else None) or shipped_source(ds.name)
            if ds.source and owner and owner != ds.source and not replace:
                raise DataError(
                    f"{ds.name}: not loaded, nothing written: the name is stored from {owner},"
                    f" not {ds.source}; rename the folder, or replace it with `r2a data load"
                    f" --dataset {ds.source} --replace`"
                )
            conn.execute(
                _UPSERT_DATASET,
                (
                    ds.name,
                    ds.corpus_format,
                    ds.query_format,
                    len(ds.passages),
                    len(ds.queries),
                    content_sha256(ds),
                    ds.source,
                ),
            )
            existing = {
                r[0] for r in conn.execute("SELECT id FROM passages WHERE dataset = %s", (ds.name,))
            }
            ids = [p.id for p in ds.passages]
            added = len(set(ids) - existing)
            cur = conn.cursor()
            # Passage ids are content hashes: an existing id is already the same passage.
            cur.executemany(
                "INSERT INTO passages (dataset, id, title, text) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT DO NOTHING",
                [(ds.name, p.id, p.title, p.text) for p in ds.passages],
            )
            removed = conn.execute(
                "DELETE FROM passages WHERE dataset = %s AND NOT (id = ANY(%s))", (ds.name, ids)
            ).rowcount
            q_added = q_changed = 0
            for q in ds.queries:
                row = conn.execute(
                    _UPSERT_QUERY,
                    (
                        ds.name,
                        q.id,
                        q.question,
                        Jsonb(q.answers),
                        q.gold_passage_ids,
                        q.type,
                        q.source,
                        q.gold_complete,
                    ),
                ).fetchone()
                if row is not None:
                    q_added += int(row[0])
                    q_changed += int(not row[0])
            q_removed = conn.execute(
                "DELETE FROM queries WHERE dataset = %s AND NOT (id = ANY(%s))",
                (ds.name, [q.id for q in ds.queries]),
            ).rowcount
    except psycopg.Error as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DatabaseError(f"load of '{ds.name}' failed, nothing was written: {first}") from None
    return LoadResult(ds.name, added, removed, q_added, q_changed, q_removed)
