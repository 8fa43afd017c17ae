"""OpenIE read from HippoRAG files shipped with a dataset (`<name>_openie_*.json`).

HippoRAG v1 docs carry `title` and `text`; HippoRAG 2 docs carry `idx` (our chunk id) and
`passage` (= title + "\\n" + text). Both map onto passage ids computed from title + text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from r2adapter.data.schema import Extraction, Passage, passage_id
from r2adapter.errors import DataError
from r2adapter.index.openie import OpenIE, clean_triples


def find_openie_file(dataset_dir: Path) -> Path:
    files = sorted(dataset_dir.glob(f"{dataset_dir.name}_openie*.json"))
    if not files:
        raise DataError(
            f"{dataset_dir}: no precomputed OpenIE file ({dataset_dir.name}_openie_*.json); "
            "use --openie spacy or llm"
        )
    return files[0]


def _doc_id(doc: dict[str, object], by_passage: dict[str, str]) -> str | None:
    if isinstance(doc.get("idx"), str) and str(doc["idx"]).startswith("chunk-"):
        return str(doc["idx"])
    if isinstance(doc.get("title"), str) and isinstance(doc.get("text"), str):
        return passage_id(str(doc["title"]), str(doc["text"]))
    if isinstance(doc.get("passage"), str):
        return by_passage.get(str(doc["passage"]))
    return None


class PrecomputedOpenIE(OpenIE):
    name = "precomputed"

    def __init__(self, path: Path | str | None = None, corpus: Sequence[Passage] = ()) -> None:
        if path is None:
            raise DataError("precomputed OpenIE needs the dataset's OpenIE file")
        self.path = Path(path)
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DataError(f"{self.path}: file not found") from None
        except json.JSONDecodeError as e:
            raise DataError(f"{self.path}: malformed JSON at line {e.lineno}: {e.msg}") from None
        docs = raw.get("docs") if isinstance(raw, dict) else None
        if not isinstance(docs, list):
            raise DataError(f"{self.path}: not a HippoRAG OpenIE file (no 'docs' list)")
        by_passage = {f"{p.title}\n{p.text}": p.id for p in corpus}
        self.by_id: dict[str, Extraction] = {}
        for i, doc in enumerate(docs):
            if not isinstance(doc, dict):
                raise DataError(f"{self.path}: docs[{i}] is not an object")
            pid = _doc_id(doc, by_passage)
            if pid is None:
                raise DataError(f"{self.path}: docs[{i}] has neither idx, title+text nor passage")
            ents = doc.get("extracted_entities") or []
            self.by_id[pid] = Extraction(
                [e for e in ents if isinstance(e, str)] if isinstance(ents, list) else [],
                clean_triples(doc.get("extracted_triples")),
            )

    def cache_key(self) -> str:
        return f"precomputed:{self.path.name}"

    def extract(self, passages: Sequence[Passage]) -> list[Extraction]:
        missing = [p for p in passages if p.id not in self.by_id]
        if missing:
            raise DataError(
                f"{self.path}: OpenIE file does not match the corpus: {len(missing)} of "
                f"{len(passages)} passages have no extraction (e.g. '{missing[0].title}')"
            )
        return [self.by_id[p.id] for p in passages]
