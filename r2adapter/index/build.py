"""`r2a index`: embed passages into pgvector, run OpenIE, build the knowledge graph and
write it as one index version. Each stage reuses what earlier runs stored (embeddings by
encoder, OpenIE by passage hash, phrase/fact embeddings by text), so a second run adds only
what is new, and a run with nothing new writes nothing. What else is built from the same
inputs and written with the version (ADR's dual hypergraph) comes in as an `IndexExtension`
that the caller hands over (r2adapter/steps.py `index`): the index knows no floor above it."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Protocol

import numpy as np
import psycopg
from tqdm import tqdm

from r2adapter.config import graph_params
from r2adapter.data.adapters import load_dataset
from r2adapter.data.schema import Dataset, Extraction, Passage
from r2adapter.errors import R2AError
from r2adapter.index.encoder import Encoder, get_encoder
from r2adapter.index.graph import build_parts, synonym_edges
from r2adapter.index.openie import OpenIE, get_openie
from r2adapter.index.synonyms_hnsw import synonym_edges_hnsw, synonym_search
from r2adapter.index.throughput import flops_per_token, gemm_gflops, step_throughput
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
    # each step's throughput beside its limit on this machine (index/throughput.py)
    throughput: dict[str, dict[str, float]] = field(default_factory=dict)

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
            **({"throughput": self.throughput} if self.throughput else {}),
        }

    def metrics(self) -> dict[str, float]:
        return {
            **self.counts,
            **{f"seconds_{k}": round(v, 3) for k, v in self.timings.items()},
            "index_version": self.version,
        }


def shared_index(name: str, openie: str, log: Log = print) -> IndexReport | None:
    """A dataset never indexed itself whose corpus an indexed dataset already holds (the
    same passages, by content: `graph_store.corpus_twin`), indexed by the same OpenIE
    backend (`openie`), is served from that index: the report names it (`shares_index_of`)
    and nothing is embedded or extracted again. A twin of another backend is not shared (a
    `spacy` index asked for is not served from `precomputed` triples): the dataset gets an
    index of its own."""
    if gs.own_version(name) is not None:
        return None
    twin = gs.corpus_twin(name, openie)
    if twin is None:
        other = gs.corpus_twin(name)
        if other is not None:
            log(f"{name}: the same corpus as {other}, indexed with another OpenIE backend than"
                f" {openie}: indexed on its own")  # fmt: skip
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


OPENIE_BATCH = 256  # passages per OpenIE call and per cache transaction
# texts per encode call and per stored chunk of embeddings: what a killed build loses at
# most, and (with the encoder's lanes sorting within a chunk) all it holds of them at once
EMBED_CHUNK = 8192


def extract_batches(
    backend: OpenIE, passages: Sequence[Passage]
) -> Iterator[tuple[Sequence[Passage], list[Extraction]]]:
    """OpenIE over `passages`, each batch stored in the cache as soon as it is done (a killed
    build resumes from there); yields (batch, its extractions)."""
    key = backend.cache_key()
    for i in range(0, len(passages), OPENIE_BATCH):
        chunk = passages[i : i + OPENIE_BATCH]
        out = backend.extract(chunk)
        gs.save_extractions(key, [(p.id, ex) for p, ex in zip(chunk, out, strict=True)])
        yield chunk, out


class ChunkStore:
    """Stores embedded chunks in a thread of its own while the next chunk is embedded: one
    store at a time, in order (so at most two chunks are held); a failed store is raised
    at the next `put` or at the end of the `with`."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="store-chunk")
        self._last: Future[None] | None = None

    def put(self, store: Callable[..., None], *args: object) -> None:
        if self._last is not None:
            self._last.result()
        self._last = self._pool.submit(store, *args)

    def __enter__(self) -> ChunkStore:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._last is not None and exc[0] is None:
                self._last.result()
        finally:
            self._pool.shutdown(wait=True)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _openie_process(backend: str, passages: list[Passage], out: Connection) -> None:
    """The OpenIE process (spawned): every batch into the cache; then its seconds, or the
    error in one line, sent back."""
    t = time.perf_counter()
    try:
        try:  # one core: no BLAS threads of its own beside the encoder's lanes
            from threadpoolctl import threadpool_limits

            threadpool_limits(1)
        except ImportError:
            pass
        for _ in extract_batches(get_openie(backend), passages):
            pass
        out.send(("done", time.perf_counter() - t))
    except BaseException as e:  # noqa: BLE001 - reported to the build, which raises it
        line = str(e).strip().splitlines()[0] if str(e).strip() else "no message"
        out.send(("failed", f"{type(e).__name__}: {line}"))
    finally:
        out.close()


class OpenIEProcess:
    """OpenIE on `passages` in a process of its own (spawned; its results go to the cache
    batch by batch, so the build reads them from there, as a rerun would). `done` is set
    when it ends, well or not; `wait` returns its seconds or raises its error."""

    def __init__(self, backend: str, passages: list[Passage]) -> None:
        ctx = get_context("spawn")
        self._recv, send = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_openie_process, args=(backend, passages, send), daemon=True)
        self.proc.start()
        send.close()
        self.done = threading.Event()
        self._result: tuple[str, object] = ("failed", "the OpenIE process ended without a word")
        self._watch = threading.Thread(target=self._wait_result, daemon=True)
        self._watch.start()

    def _wait_result(self) -> None:
        try:
            self._result = self._recv.recv()
        except (EOFError, OSError):  # killed (out of memory, a signal) before it answered
            self.proc.join()
            self._result = ("failed", f"the OpenIE process exited {self.proc.exitcode}")
        finally:
            self.done.set()

    def wait(self) -> float:
        self._watch.join()
        self.proc.join()
        status, value = self._result
        if status != "done":
            raise R2AError(f"OpenIE failed: {value}; what it extracted is cached, rerun to resume")
        return float(value)  # type: ignore[arg-type]

    def stop(self) -> None:
        """End the process if it still runs (the build stopped before it)."""
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(10)


def _embed_cached(
    enc: Encoder, kind: str, texts: list[str], log: Log, keep: bool = True
) -> np.ndarray:
    """The texts' embeddings in order: cached ones read, the others embedded and stored a
    chunk at a time (a killed build resumes from the last chunk stored). `keep=False`
    (fact texts, which the build itself never reads): only stored, an empty array back, so
    that they are never all held in memory."""
    todo = list(dict.fromkeys(texts))
    have = gs.cached_text_embeddings(enc.name, kind, todo) if keep else {}
    if not keep:
        known = gs.cached_text_keys(enc.name, kind, todo)
        todo = [t for t in todo if t not in known]
    else:
        todo = [t for t in todo if t not in have]
    if todo:
        log(f"embedding {len(todo)} new {kind} texts ({len(set(texts)) - len(todo)} cached)")
        with (
            tqdm(total=len(todo), desc=f"embed {kind}s", unit="text") as bar,
            ChunkStore() as store,
        ):
            for i in range(0, len(todo), EMBED_CHUNK):
                chunk = todo[i : i + EMBED_CHUNK]
                new = enc.encode(chunk, on_batch=bar.update)
                store.put(gs.save_text_embeddings, enc.name, kind, chunk, new)
                if keep:
                    have.update(zip(chunk, new, strict=True))
    if not texts or not keep:
        return np.zeros((0, enc.dim), dtype=np.float32)
    return np.stack([have[t] for t in texts])


def build_index(
    dataset: str,
    openie: str = "spacy",
    log: Log = print,
    extensions: Sequence[IndexExtension] = (),
    share: bool | None = None,
    rebuild: bool = False,
) -> IndexReport:
    """`rebuild`: write a new version even when the latest one has the same build
    signature (the caches of embeddings and OpenIE still serve).
    `share`: a dataset never indexed whose passages an indexed dataset holds is served
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
    shared = shared_index(name, openie, log) if gs.sharing(share) else None
    if shared is not None:
        shared.timings.update(timings)
        return shared

    backend = make_openie(openie, ds)  # the dataset read above, not a second parse
    key = backend.cache_key()
    ids = [p.id for p in passages]
    cached = gs.cached_extractions(key, ids)
    missing = [p for p in passages if p.id not in cached]
    # OpenIE on one core needs no embedding: in a process of its own beside the encoder's
    # load and the passage embeddings (one lane; the second starts when OpenIE is done)
    beside = None
    if missing and backend.side_process and usable_cores() > 1:
        log(f"OpenIE ({key}) on {len(missing)} new passages ({len(cached)} cached), in a process")
        beside = OpenIEProcess(openie, missing)
    try:
        t = time.perf_counter()
        enc = get_encoder()
        todo = gs.missing_passage_embeddings(name, enc.name)
        timings["encoder_load"] = time.perf_counter() - t
        work: dict[str, dict[str, float]] = {}  # what each step did: texts, tokens, passages
        t, tok = time.perf_counter(), enc.tokens_encoded
        if todo:
            log(f"embedding {len(todo)} new passages ({len(passages) - len(todo)} already stored)")
            with (
                tqdm(total=len(todo), desc="embed passages", unit="text") as bar,
                ChunkStore() as store,
            ):
                for i in range(0, len(todo), EMBED_CHUNK):  # each chunk stored: resumable
                    chunk = todo[i : i + EMBED_CHUNK]
                    emb = enc.encode(
                        [f"{p.title}\n{p.text}" for p in chunk],
                        spare_core=beside.done if beside else None,
                        on_batch=bar.update,
                    )
                    ids_ = [p.id for p in chunk]
                    store.put(gs.save_passage_embeddings, name, enc.name, ids_, emb)
            work["passage_embeddings"] = {
                "texts": len(todo), "tokens": enc.tokens_encoded - tok
            }  # fmt: skip
        timings["passage_embeddings"] = time.perf_counter() - t
        if missing:
            work["openie"] = {"passages": len(missing)}

        t = time.perf_counter()
        if beside is not None:
            timings["openie_process"] = beside.wait()  # its own seconds, from its start
            cached = gs.cached_extractions(key, ids)
        elif missing:
            log(f"OpenIE ({key}) on {len(missing)} new passages ({len(cached)} cached)")
            with tqdm(total=len(missing), desc=f"openie {openie}", unit="passage") as bar:
                for chunk_, out in extract_batches(backend, missing):
                    cached.update((p.id, ex) for p, ex in zip(chunk_, out, strict=True))
                    bar.update(len(chunk_))
    finally:
        if beside is not None:
            beside.stop()
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
    if latest is not None and latest.signature == signature and not rebuild:
        for ext in extensions:  # the graph is current; only an extension may be missing
            added = ext.refresh(latest.id, built)
            if added is not None:
                timings[ext.name] = added
        return IndexReport(name, latest.id, False, enc.name, key, latest.counts, timings)

    t, tok = time.perf_counter(), enc.tokens_encoded
    ent_emb = _embed_cached(enc, "entity", parts.entities, log)
    timings["entity_embeddings"] = time.perf_counter() - t
    work["entity_embeddings"] = {"tokens": enc.tokens_encoded - tok}
    t, tok = time.perf_counter(), enc.tokens_encoded
    _embed_cached(enc, "fact", parts.fact_texts(), log, keep=False)
    timings["fact_embeddings"] = time.perf_counter() - t
    work["fact_embeddings"] = {"tokens": enc.tokens_encoded - tok}
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
        t, tok = time.perf_counter(), enc.tokens_encoded
        prep = ext.prepare(built, ent_emb)
        counts.update(prep.counts())
        timings[ext.name] = time.perf_counter() - t
        work[ext.name] = {"tokens": enc.tokens_encoded - tok}  # its embeddings' share
        prepared.append(prep)
    t = time.perf_counter()
    version = gs.write_version(
        name, enc.name, enc.dim, key, signature, parts, synonyms, counts, timings,
        also=_writers(prepared),
    )  # fmt: skip
    timings["write"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t0
    gs.update_timings(version, timings)
    rates = step_throughput(
        {k: v for k, v in work.items() if any(v.values())},
        timings,
        flops_per_token(enc.model),
        gemm_gflops(),
    )
    return IndexReport(name, version, True, enc.name, key, counts, timings, throughput=rates)
