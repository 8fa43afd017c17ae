"""`r2a index`: embed passages into pgvector, run OpenIE, build the knowledge graph and
write it as one index version. Each stage reuses what earlier runs stored (embeddings by
encoder, OpenIE by passage hash, phrase/fact embeddings by text), so a second run adds only
what is new, and a run with nothing new writes nothing. What else is built from the same
inputs and written with the version (ADR's dual hypergraph) comes in as an `IndexExtension`
that the caller hands over (r2adapter/steps.py `index`): the index knows no floor above it."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import psycopg
from tqdm import tqdm

from r2adapter.config import graph_params
from r2adapter.data.adapters import load_dataset
from r2adapter.data.schema import Dataset, Extraction, Passage
from r2adapter.index.encoder import Encoder, get_encoder
from r2adapter.index.graph import build_parts, synonym_edges
from r2adapter.index.openie import OpenIE, get_openie
from r2adapter.index.synonyms_hnsw import synonym_edges_hnsw, synonym_search
from r2adapter.store import graph_store as gs
from r2adapter.store.db import connection
from r2adapter.store.load import load as load_into_db

Log = Callable[[str], None]
EmbedCached = Callable[[str, list[str]], np.ndarray]  # (kind, texts) → rows, cached by text
Writer = Callable[[psycopg.Connection, int], None]  # (connection, version): more rows


@dataclass(frozen=True)
class BuildInputs:
    """What the index build hands an extension: the stored passages, their extractions (in
    order), the graph's entities (node order), the version's signature, the cached embedder
    and the log."""

    passages: list[Passage]
    extractions: list[Extraction]
    entities: list[str]
    signature: str
    embed: EmbedCached
    log: Log


class Prepared(Protocol):
    """An extension's rows, built before the version is written: its counts join the
    version's, its writer runs in the version's own transaction."""

    def counts(self) -> dict[str, int]: ...

    def writer(self) -> Writer: ...


class IndexExtension(Protocol):
    """Built with the index from the same inputs and written with its version. `name` is
    its timings key. `prepare` builds it for a new version (`entity_emb`: the entities'
    embeddings); `refresh` adds it to the current version when missing or stale, and returns
    its seconds, or None when nothing was built."""

    @property
    def name(self) -> str: ...

    def prepare(self, built: BuildInputs, entity_emb: np.ndarray) -> Prepared: ...

    def refresh(self, version: int, built: BuildInputs) -> float | None: ...


def _writers(prepared: Sequence[Prepared]) -> Writer | None:
    writers = [p.writer() for p in prepared]
    if not writers:
        return None
    if len(writers) == 1:
        return writers[0]

    def write(conn: psycopg.Connection, version: int) -> None:
        for w in writers:
            w(conn, version)

    return write


@dataclass
class IndexReport:
    dataset: str
    version: int
    created: bool
    encoder: str
    openie: str
    counts: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    shares_index_of: str = ""  # the dataset whose index serves this one (`shared_index`)

    def to_report(self) -> dict[str, object]:
        """reports/index/<dataset>.json (a DVC metric): these keys, in this order."""
        return {
            "dataset": self.dataset,
            "version": self.version,
            "created": self.created,
            "encoder": self.encoder,
            "openie": self.openie,
            **({"shares_index_of": self.shares_index_of} if self.shares_index_of else {}),
            **self.counts,
            **{f"seconds_{k}": v for k, v in self.timings.items()},
        }

    def metrics(self) -> dict[str, float]:
        return {
            **self.counts,
            **{f"seconds_{k}": round(v, 3) for k, v in self.timings.items()},
            "index_version": self.version,
        }


def shared_index(name: str, log: Log = print) -> IndexReport | None:
    """A dataset never indexed itself whose corpus an indexed dataset already holds (the
    same passages, by content: `graph_store.corpus_twin`) is served from that index: the
    report names it (`shares_index_of`) and nothing is embedded or extracted again."""
    if gs.own_version(name) is not None:
        return None
    twin = gs.corpus_twin(name)
    if twin is None:
        return None
    v = gs.require_version(twin)
    log(f"{name}: the same corpus as {twin} (by content): served from its index v{v.id}")
    return IndexReport(name, v.id, False, v.encoder, v.openie, dict(v.counts), {}, twin)


def make_openie(backend: str, ds: Dataset) -> OpenIE:
    if backend == "precomputed":
        from r2adapter.index.openie_precomputed import find_openie_file

        folder = Path(ds.files["corpus"]).parent
        return get_openie("precomputed", path=find_openie_file(folder), corpus=ds.passages)
    return get_openie(backend)


def _embed_cached(enc: Encoder, kind: str, texts: list[str], log: Log) -> np.ndarray:
    have = gs.cached_text_embeddings(enc.name, kind, texts)
    todo = [t for t in texts if t not in have]
    if todo:
        log(f"embedding {len(todo)} new {kind} texts ({len(have)} cached)")
        new = enc.encode(todo, progress=True, desc=f"embed {kind}s")
        gs.save_text_embeddings(enc.name, kind, todo, new)
        have.update(zip(todo, new, strict=True))
    if not texts:
        return np.zeros((0, enc.dim), dtype=np.float32)
    return np.stack([have[t] for t in texts])


def build_index(
    dataset: str,
    openie: str = "spacy",
    log: Log = print,
    extensions: Sequence[IndexExtension] = (),
    share: bool | None = None,
) -> IndexReport:
    """`share`: a dataset never indexed whose passages an indexed dataset holds is served
    from that index (`shared_index`); False builds it one of its own; None: the environment's
    `R2A_SHARE_INDEX` (default 1, share; the test suite sets 0, so that a test's copy of a
    corpus gets the index it builds).
    `extensions`: built and written with the version too (r2adapter/steps.py
    `index_extensions`: ADR's dual hypergraph when params.yaml adr.enabled)."""
    params = graph_params()  # params.yaml `graph:`
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    ds = load_dataset(dataset)
    load_into_db(ds)  # idempotent: the index always matches the stored corpus
    name = ds.name
    passages = gs.stored_passages(name)
    timings["load"] = time.perf_counter() - t0
    shared = shared_index(name, log) if gs.sharing(share) else None
    if shared is not None:
        shared.timings.update(timings)
        return shared

    t = time.perf_counter()
    enc = get_encoder()
    timings["encoder_load"] = time.perf_counter() - t
    t = time.perf_counter()
    todo = gs.missing_passage_embeddings(name, enc.name)
    if todo:
        log(f"embedding {len(todo)} new passages ({len(passages) - len(todo)} already stored)")
        emb = enc.encode(
            [f"{p.title}\n{p.text}" for p in todo], progress=True, desc="embed passages"
        )
        gs.save_passage_embeddings(name, enc.name, [p.id for p in todo], emb)
    timings["passage_embeddings"] = time.perf_counter() - t

    t = time.perf_counter()
    backend = make_openie(openie, ds)  # the dataset read above, not a second parse
    key = backend.cache_key()
    ids = [p.id for p in passages]
    cached = gs.cached_extractions(key, ids)
    missing = [p for p in passages if p.id not in cached]
    if missing:
        log(f"OpenIE ({key}) on {len(missing)} new passages ({len(cached)} cached)")
        step = 256
        with tqdm(total=len(missing), desc=f"openie {openie}", unit="passage") as bar:
            for i in range(0, len(missing), step):
                chunk = missing[i : i + step]
                out = backend.extract(chunk)
                gs.save_extractions(key, [(p.id, ex) for p, ex in zip(chunk, out, strict=True)])
                cached.update((p.id, ex) for p, ex in zip(chunk, out, strict=True))
                bar.update(len(chunk))
    extractions: list[Extraction] = [cached[p.id] for p in passages]
    timings["openie"] = time.perf_counter() - t

    parts = build_parts(ids, extractions)
    synonym_method = synonym_search(params, len(parts.entities))
    # the method enters the signature only when it is HNSW (approximate): the signatures of
    # the indexes built before graph.synonym_search existed, all exact, stay as they were
    how = ["synonyms:hnsw"] if synonym_method == "hnsw" else []
    signature = hashlib.sha256(
        "\0".join(
            [enc.name, key, str(params.synonym_threshold), str(params.synonym_top_k), *how, *ids]
        ).encode()
    ).hexdigest()
    built = BuildInputs(
        passages, extractions, parts.entities, signature,
        lambda kind, texts: _embed_cached(enc, kind, texts, log), log,
    )  # fmt: skip
    latest = gs.own_version(name)  # its own: a shared one was taken above (shared_index)
    if latest is not None and latest.signature == signature:
        for ext in extensions:  # the graph is current; only an extension may be missing
            added = ext.refresh(latest.id, built)
            if added is not None:
                timings[ext.name] = added
        return IndexReport(name, latest.id, False, enc.name, key, latest.counts, timings)

    t = time.perf_counter()
    ent_emb = _embed_cached(enc, "entity", parts.entities, log)
    timings["entity_embeddings"] = time.perf_counter() - t
    t = time.perf_counter()
    _embed_cached(enc, "fact", parts.fact_texts(), log)
    timings["fact_embeddings"] = time.perf_counter() - t
    t = time.perf_counter()
    if synonym_method == "hnsw":
        log(f"synonym edges of {len(parts.entities)} entities through HNSW")
        with connection() as conn:
            synonyms = synonym_edges_hnsw(
                conn, ent_emb, parts.entities, params.synonym_threshold, params.synonym_top_k
            )
    else:
        synonyms = synonym_edges(
            ent_emb, parts.entities, params.synonym_threshold, params.synonym_top_k
        )
    timings["synonyms"] = time.perf_counter() - t
    counts = {
        "passages": len(passages),
        "entities": len(parts.entities),
        "facts": len(parts.facts),
        "passage_entity_edges": len(parts.passage_entities),
        "synonym_edges": len(synonyms),
        "passages_without_facts": sum(not ex.triples for ex in extractions),
    }
    prepared = []
    for ext in extensions:
        t = time.perf_counter()
        prep = ext.prepare(built, ent_emb)
        counts.update(prep.counts())
        timings[ext.name] = time.perf_counter() - t
        prepared.append(prep)
    t = time.perf_counter()
    version = gs.write_version(
        name, enc.name, enc.dim, key, signature, parts, synonyms, counts, timings,
        also=_writers(prepared),
    )  # fmt: skip
    timings["write"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t0
    gs.update_timings(version, timings)
    return IndexReport(name, version, True, enc.name, key, counts, timings)
