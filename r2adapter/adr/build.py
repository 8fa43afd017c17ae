"""The index step's ADR part: the dual hypergraph of one index version, computed before the
version's transaction and written inside it (or, for a version that already exists, in a
transaction of its own); a second `r2a index` finds the build's signature and adds nothing."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import psycopg

from r2adapter.adr import store
from r2adapter.adr.hypergraph import DualHypergraph, build_dual_hypergraph
from r2adapter.config import AdrParams
from r2adapter.data.schema import Extraction
from r2adapter.index.build import BuildInputs

Log = Callable[[str], None]
EmbedCached = Callable[[str, list[str]], np.ndarray]


def reader_tokenizer(p: AdrParams):  # -> a transformers tokenizer
    """The reader's tokenizer (adr.tokenizer, local files only); default: the encoder's."""
    if p.tokenizer:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(p.tokenizer, local_files_only=True)
    from r2adapter.index.encoder import get_encoder

    return get_encoder().model.tokenizer


def token_counter(p: AdrParams) -> Callable[[list[str]], list[int]]:
    tok = reader_tokenizer(p)

    def count(texts: list[str]) -> list[int]:
        if not texts:
            return []
        ids = tok(texts, add_special_tokens=False, truncation=False)["input_ids"]
        return [len(x) for x in ids]

    return count


@dataclass
class PreparedHypergraph:
    signature: str
    graph: DualHypergraph
    entity_emb: np.ndarray
    seconds: float

    def counts(self) -> dict[str, int]:
        return self.graph.counts()

    def writer(self) -> Callable[[psycopg.Connection, int], None]:
        """Writes the rows into the index version's own transaction."""

        def write(conn: psycopg.Connection, version: int) -> None:
            store.write_hypergraph(
                conn, version, self.signature, self.graph, self.entity_emb,
                {"build": self.seconds},
            )  # fmt: skip

        return write


def prepare_hypergraph(
    passages: Sequence[tuple[str, str, str]],
    extractions: Sequence[Extraction],
    entities: Sequence[str],
    entity_emb: np.ndarray,
    embed: EmbedCached,
    version_signature: str,
    p: AdrParams,
    log: Log = print,
) -> PreparedHypergraph:
    t = time.perf_counter()
    writer = None
    llm_name = ""
    if p.insight_text == "llm":
        from r2adapter.adr.insights import llm_writer

        writer, llm_name = llm_writer(p, log)
    graph = build_dual_hypergraph(
        passages,
        extractions,
        {name: i for i, name in enumerate(entities)},
        embed,
        token_counter(p),
        p,
        writer,
    )
    seconds = time.perf_counter() - t
    c = graph.counts()
    log(
        f"ADR hypergraph: {c['adr_hyperedges']} higher-order hyperedges / insight vertices, "
        f"{c['adr_insight_edges']} deep insight edges (largest {c['adr_largest_insight_edge']})"
        f" in {seconds:.1f} s"
    )
    return PreparedHypergraph(
        store.build_signature(version_signature, p, llm_name), graph, entity_emb, seconds
    )


def wanted_signature(version_signature: str, p: AdrParams) -> str:
    llm = ""
    if p.insight_text == "llm":
        from r2adapter.adr.insights import llm_identity

        llm = llm_identity()
    return store.build_signature(version_signature, p, llm)


def ensure_hypergraph(
    version: int,
    version_signature: str,
    passages: Sequence[object],
    extractions: Sequence[Extraction],
    entities: Sequence[str],
    embed: EmbedCached,
    p: AdrParams,
    log: Log = print,
) -> float | None:
    """The hypergraph of an existing index version, unless one of these parameters is
    already stored: its seconds, or None when nothing was built."""
    if store.built_signature(version) == wanted_signature(version_signature, p):
        return None
    t = time.perf_counter()
    rows = [(q.id, q.title, q.text) for q in passages]  # type: ignore[attr-defined]
    prep = prepare_hypergraph(
        rows, extractions, entities, embed("entity", list(entities)), embed,
        version_signature, p, log,
    )  # fmt: skip
    store.write_hypergraph_alone(
        version, prep.signature, prep.graph, prep.entity_emb, {"build": prep.seconds}
    )
    return time.perf_counter() - t


@dataclass(frozen=True)
class HypergraphIndexing:
    """ADR's dual hypergraph as an extension of the index build (r2adapter/index/build.py
    `IndexExtension`): r2adapter/steps.py hands it to `build_index` when ADR is on."""

    p: AdrParams
    name: str = "adr"  # its timings key

    def prepare(self, built: BuildInputs, entity_emb: np.ndarray) -> PreparedHypergraph:
        return prepare_hypergraph(
            [(q.id, q.title, q.text) for q in built.passages], built.extractions,
            built.entities, entity_emb, built.embed, built.signature, self.p, built.log,
        )  # fmt: skip

    def refresh(self, version: int, built: BuildInputs) -> float | None:
        return ensure_hypergraph(
            version, built.signature, built.passages, built.extractions, built.entities,
            built.embed, self.p, built.log,
        )  # fmt: skip
