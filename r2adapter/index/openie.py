"""OpenIE behind one protocol: passages in, entities and [subject, relation, object] out.

Backends are found by name in OPENIE_BACKENDS (`precomputed`, `spacy`, `llm`); results are
cached per passage hash by the index build, so a backend never sees a passage twice.
"""

from __future__ import annotations

import importlib
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence

from r2adapter.data.schema import Extraction, Passage, Triple
from r2adapter.errors import R2AError


class OpenIE(ABC):
    """`extract(passages) -> one Extraction per passage, in order`."""

    name: str = ""
    # CPU-bound on one core and built from its name alone (`get_openie(name)`): the index
    # build runs it in a process of its own beside the passage embeddings (index/build.py)
    side_process: bool = False

    @abstractmethod
    def extract(self, passages: Sequence[Passage]) -> list[Extraction]: ...

    def cache_key(self) -> str:
        """Backend identity for the cache; include anything that changes the output."""
        return self.name


# The OpenIE backends by name, each "module:class": the one table that `get_openie`, the
# CLI's `--openie` choices and the pipeline's parameter check read. A backend's module is
# imported only when it is asked for (spaCy and the LLM clients are heavy).
OPENIE_BACKENDS: dict[str, str] = {
    "precomputed": "r2adapter.index.openie_precomputed:PrecomputedOpenIE",
    "spacy": "r2adapter.index.openie_spacy:SpacyOpenIE",
    "llm": "r2adapter.index.openie_llm:LLMOpenIE",
}


def backend_class(name: str) -> type[OpenIE]:
    """The OpenIE class registered as `name`; an unknown name is a one-line error."""
    if name not in OPENIE_BACKENDS:
        raise R2AError(
            f"unknown OpenIE backend '{name}': choose one of {', '.join(OPENIE_BACKENDS)}"
        )
    module, cls = OPENIE_BACKENDS[name].split(":")
    found = getattr(importlib.import_module(module), cls)
    assert issubclass(found, OpenIE), f"{OPENIE_BACKENDS[name]} is not an OpenIE backend"
    return found


def get_openie(name: str, **kwargs: object) -> OpenIE:
    return backend_class(name)(**kwargs)


def normalize_phrase(text: str) -> str:
    """HippoRAG's phrase key: lower case, non-alphanumerics to spaces, spaces collapsed."""
    return " ".join(re.sub(r"[^a-z0-9 ]", " ", text.lower()).split())


def clean_triples(raw: object) -> list[Triple]:
    """Keep well-formed [s, r, o] string triples with non-empty normalised ends."""
    out: list[Triple] = []
    if not isinstance(raw, list):
        return out
    for t in raw:
        if isinstance(t, list | tuple) and len(t) == 3 and all(isinstance(x, str) for x in t):
            s, r, o = (x.strip() for x in t)
            if normalize_phrase(s) and normalize_phrase(o) and r:
                out.append((s, r, o))
    return out
