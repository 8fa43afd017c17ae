"""The stored queries of a dataset (what `r2a data load` wrote), for the steps that read
them: evaluation, labelling, CatRAG's tier training."""

from __future__ import annotations

from r2adapter.data.schema import Query
from r2adapter.store.db import connection


def stored_queries(dataset: str, complete_only: bool = True) -> list[Query]:
    with connection() as conn:
        rows = conn.execute(
            "SELECT id, question, answers, gold_passage_ids, type, source, gold_complete"
            " FROM queries WHERE dataset = %s"
            + (" AND gold_complete" if complete_only else "")
            + " ORDER BY id",
            (dataset,),
        ).fetchall()
    return [Query(r[0], r[1], list(r[2]), list(r[3]), r[4], r[5], r[6]) for r in rows]
