"""OpenIE with an LLM, HippoRAG-style: per passage, named entities first, then
[subject, relation, object] triples conditioned on those entities.

Replies are JSON objects (`{"named_entities": [...]}`, `{"triples": [...]}`), found even when
wrapped in prose or code fences. A reply without one gives that passage an empty Extraction,
counted in `n_malformed`; a failed call (timeout, HTTP error after retries) raises LLMError.
Passages run on a small thread pool: the calls are I/O bound.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed

from tqdm import tqdm

from r2adapter.data.schema import Extraction, Passage
from r2adapter.errors import R2AError
from r2adapter.index.openie import OpenIE, clean_triples, normalize_phrase
from r2adapter.llm import LLM, extract_json_object, get_llm
from r2adapter.llm.prompts import load_prompts

log = logging.getLogger(__name__)

PROMPTS = "openie"
NO_LLM = (
    "no LLM configured: set R2A_LLM_BASE_URL (an OpenAI-compatible server, "
    "e.g. http://localhost:8000/v1) and R2A_LLM_MODEL, plus R2A_LLM_API_KEY if it needs one"
)


class LLMOpenIE(OpenIE):
    name = "llm"

    def __init__(
        self,
        llm: LLM | None = None,
        *,
        workers: int = 4,
        ner_max_tokens: int = 512,
        triple_max_tokens: int = 1024,
        progress: bool = True,
    ):
        llm = llm if llm is not None else get_llm()
        if llm is None:
            raise R2AError(NO_LLM)
        self.llm = llm
        self.prompts = load_prompts(PROMPTS)
        self.workers = max(1, workers)
        self.ner_max_tokens = ner_max_tokens
        self.triple_max_tokens = triple_max_tokens
        self.progress = progress
        self.n_passages = 0  # passages extracted by this instance, over all extract() calls
        self.n_malformed = 0  # of those, passages whose reply had no usable JSON

    def cache_key(self) -> str:
        return f"{self.name}:{self.llm.identity}:prompts-{self.prompts.digest}"

    def extract(self, passages: Sequence[Passage]) -> list[Extraction]:
        out: list[Extraction | None] = [None] * len(passages)
        if not passages:
            return []
        malformed = 0
        bar = tqdm(
            total=len(passages),
            desc="openie llm",
            unit="passage",
            leave=False,  # the index build shows its own bar over all chunks
            disable=not self.progress,
        )
        with bar, ThreadPoolExecutor(self.workers, thread_name_prefix="openie-llm") as pool:
            futures = {pool.submit(self._one, p): i for i, p in enumerate(passages)}
            try:
                for fut in as_completed(futures):
                    ext, ok = fut.result()
                    out[futures[fut]] = ext
                    malformed += not ok
                    bar.update()
                    if malformed:
                        bar.set_postfix(malformed=malformed)
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
        self.n_passages += len(passages)
        self.n_malformed += malformed
        if malformed:
            log.warning(
                "LLM OpenIE (%s): %d of %d passages gave no usable JSON reply: "
                "empty extractions for those",
                self.llm.identity,
                malformed,
                len(passages),
            )
        return [e if e is not None else Extraction() for e in out]

    def _one(self, p: Passage) -> tuple[Extraction, bool]:
        """One passage's extraction, and whether both replies parsed."""
        reply = self.llm.complete(
            self.prompts.messages("ner", title=p.title, passage=p.text),
            max_tokens=self.ner_max_tokens,
        )
        entities = parse_entities(reply)
        if entities is None:
            return Extraction(), False
        reply = self.llm.complete(
            self.prompts.messages(
                "triples",
                title=p.title,
                passage=p.text,
                entities=json.dumps({"named_entities": entities}, ensure_ascii=False),
            ),
            max_tokens=self.triple_max_tokens,
        )
        triples = parse_triples(reply)
        if triples is None:
            return Extraction(), False
        return Extraction(entities, triples), True


def parse_entities(reply: str) -> list[str] | None:
    """Unique non-empty entity strings from `{"named_entities": [...]}`; None if absent."""
    obj = extract_json_object(reply)
    raw = obj.get("named_entities") if obj else None
    if not isinstance(raw, list):
        return None
    seen: set[str] = set()
    out: list[str] = []
    for e in raw:
        if isinstance(e, str) and (e := e.strip()) and normalize_phrase(e) and e not in seen:
            seen.add(e)
            out.append(e)
    return out


def parse_triples(reply: str) -> list[tuple[str, str, str]] | None:
    """Well-formed unique triples from `{"triples": [[s, r, o], ...]}`; None if absent."""
    obj = extract_json_object(reply)
    raw = obj.get("triples") if obj else None
    if not isinstance(raw, list):
        return None
    return list(dict.fromkeys(clean_triples(raw)))
