"""Lexical retrieval: BM25 over the index version's lexicon (r2adapter/index/lexicon.py),
scored in Postgres.

score(d, q) = Σ over q's distinct terms t in d of
    idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·|d|/avg|d|)),
idf(t) = ln(1 + (N − df + .5)/(df + .5)): Robertson's BM25 as Lucene scores it (params.yaml
`lexical:`). No query embedding is needed: `qvec` is ignored. Ties are broken by passage id,
so a ranking is the same on every run."""

from __future__ import annotations

import numpy as np

from r2adapter.config import lexical_params
from r2adapter.index.encoder import Encoder
from r2adapter.index.lexicon import ensure_lexicon, terms
from r2adapter.retrieve.base import Hit, Retriever
from r2adapter.store.db import connection
from r2adapter.store.graph_store import require_version

_BM25 = """
WITH df AS (
    SELECT term, count(*) AS df FROM lexicon_postings
    WHERE index_version = %(v)s AND term = ANY(%(terms)s) GROUP BY term
), scored AS (
    SELECT lp.passage_id,
           sum(ln(1 + (%(n)s - df.df + 0.5) / (df.df + 0.5))
               * lp.tf * (%(k1)s + 1)
               / (lp.tf + %(k1)s * (1 - %(b)s + %(b)s * lp.doc_length / %(avg)s))) AS score
    FROM lexicon_postings lp JOIN df USING (term)
    WHERE lp.index_version = %(v)s AND lp.term = ANY(%(terms)s)
    GROUP BY lp.passage_id
    ORDER BY score DESC, lp.passage_id LIMIT %(k)s
)
SELECT s.passage_id, s.score, p.title, p.text
FROM scored s JOIN passages p ON p.dataset = %(ds)s AND p.id = s.passage_id
ORDER BY s.score DESC, s.passage_id
"""


class LexicalRetriever(Retriever):
    mode = "lexical"

    def __init__(self, dataset: str, encoder: Encoder | None = None) -> None:
        self.dataset = dataset
        version = require_version(dataset)  # a query set over a twin corpus reads its index
        lex = ensure_lexicon(version.id, version.dataset)
        p = lexical_params()
        self._args = {
            "v": version.id,
            "n": float(lex.n_docs),
            "avg": max(lex.avg_length, 1e-9),
            "k1": p.k1,
            "b": p.b,
            "ds": version.dataset,
        }

    def retrieve(self, query: str, k: int = 5, qvec: np.ndarray | None = None) -> list[Hit]:
        words = sorted(set(terms(query)))
        if not words:  # only function words: nothing to match (a visible query still)
            return []
        with connection() as conn:
            rows = conn.execute(_BM25, {**self._args, "terms": words, "k": k}).fetchall()
        return [Hit(pid, float(score), title, text) for pid, score, title, text in rows]
