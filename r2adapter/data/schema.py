"""The canonical schema every dataset adapter produces."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

# A passage is a retrieval unit (a Wikipedia abstract: the shipped corpora's longest has
# 6,434 characters), not a book: the encoder reads its first 256 tokens, and spaCy's parser
# needs about 1 GB per 100,000 characters. Longer passages are refused by validation and load.
MAX_PASSAGE_CHARS = 100_000


def passage_id(title: str, text: str) -> str:
    """Identity from title + text (HippoRAG's chunk id), never title alone.

    MuSiQue has 1,890 passages under 1,764 titles, so titles are not unique.
    """
    return "chunk-" + hashlib.md5(f"{title}\n{text}".encode()).hexdigest()


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str

    @classmethod
    def of(cls, title: str, text: str) -> Passage:
        return cls(passage_id(title, text), title, text)


@dataclass(frozen=True)
class Query:
    id: str
    question: str
    answers: list[str]
    gold_passage_ids: list[str]
    type: str
    source: str
    # False when some gold passage is not in the corpus (2Wiki: 140 of 1,000 questions).
    gold_complete: bool = True


@dataclass
class Dataset:
    name: str
    corpus_format: str
    query_format: str
    passages: list[Passage]
    queries: list[Query]
    files: dict[str, str] = field(default_factory=dict)
    # where it was read from: `data/<name>` for a shipped one (R2A_DATA_DIR), else the
    # folder's absolute path; the store keeps it, so another folder cannot take the name
    source: str = ""

    @property
    def n_complete(self) -> int:
        return sum(q.gold_complete for q in self.queries)


# What OpenIE (r2adapter/index/openie.py) makes of a passage, and the graph the index build
# makes of them (r2adapter/index/graph.py): data, so the store below the index writes them.
Triple = tuple[str, str, str]


@dataclass(frozen=True)
class Extraction:
    entities: list[str] = field(default_factory=list)
    triples: list[Triple] = field(default_factory=list)


@dataclass
class GraphParts:
    entities: list[str]  # normalised phrases; the node id is the list index
    facts: list[tuple[int, str, int]]  # (subject id, relation, object id), unique
    fact_weight: list[int]  # occurrences of each fact over all passages
    fact_passages: list[tuple[int, str]]  # (fact id, passage id)
    passage_entities: list[tuple[str, int]]  # (passage id, entity id)

    def fact_texts(self) -> list[str]:
        return [fact_text(self.entities[s], r, self.entities[o]) for s, r, o in self.facts]


def fact_text(subject: str, relation: str, obj: str) -> str:
    """The text a fact is embedded as, for query–fact matching."""
    return f"{subject} {relation.strip().lower()} {obj}"
