"""The lexical index of an index version: each passage's terms, for BM25 (the `lexical`
retriever, r2adapter/retrieve/lexical.py).

Terms are lower-cased runs of letters and digits, accents folded (NFKD), less a short list
of English function words; no stemming. The lexicon is derived from the version's passages
(title and text, as the reader sees them) and written in one transaction; a version indexed
before it existed gets one the first time it is asked for (`ensure_lexicon`)."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

import psycopg

from r2adapter.store.db import connection

TOKENIZER = "nfkd-ascii-alnum-stop1"  # stored with the build: another tokenizer rebuilds
STOPWORDS = frozenset(
    "a an and are as at be been by did do does for from had has have her his how in is it its"
    " name of on or that the their this to was were what when where which who whom whose why"
    " with".split()
)
_TERM = re.compile(r"[a-z0-9]+")
_LOCK = 0x4C455849  # "LEXI": one builder per database at a time


def terms(text: str) -> list[str]:
    """`text`'s terms in order (repeats kept)."""
    folded = unicodedata.normalize("NFKD", text.lower()).encode("ascii", "ignore").decode()
    return [t for t in _TERM.findall(folded) if t not in STOPWORDS]


@dataclass(frozen=True)
class Lexicon:
    index_version: int
    n_docs: int
    avg_length: float


def _stored(conn: psycopg.Connection, version: int) -> Lexicon | None:
    row = conn.execute(
        "SELECT n_docs, avg_length FROM lexicon_builds WHERE index_version = %s AND tokenizer = %s",
        (version, TOKENIZER),
    ).fetchone()
    return Lexicon(version, int(row[0]), float(row[1])) if row else None


def ensure_lexicon(version: int, dataset: str) -> Lexicon:
    """The lexicon of index version `version` (over `dataset`'s stored passages), built
    now in one transaction when it is missing or was built by another tokenizer."""
    with connection() as conn:
        found = _stored(conn, version)
    if found is not None:
        return found
    with connection() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        found = _stored(conn, version)  # another process built it while this one waited
        if found is not None:
            return found
        rows = conn.execute(
            "SELECT id, title, text FROM passages WHERE dataset = %s ORDER BY id", (dataset,)
        ).fetchall()
        counts = {pid: Counter(terms(f"{title}\n{text}")) for pid, title, text in rows}
        lengths = {pid: sum(c.values()) for pid, c in counts.items()}
        n = len(counts)
        avg = sum(lengths.values()) / n if n else 0.0
        conn.execute("DELETE FROM lexicon_builds WHERE index_version = %s", (version,))
        conn.execute(
            "INSERT INTO lexicon_builds (index_version, n_docs, avg_length, tokenizer)"
            " VALUES (%s, %s, %s, %s)",
            (version, n, avg, TOKENIZER),
        )
        with conn.cursor().copy(
            "COPY lexicon_postings (index_version, term, passage_id, tf, doc_length) FROM STDIN"
        ) as copy:
            for pid, c in counts.items():
                for term, tf in c.items():
                    copy.write_row((version, term, pid, tf, lengths[pid]))
    return Lexicon(version, n, avg)
