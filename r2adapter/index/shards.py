"""The index build fanned out over shards of the corpus (issue 18, part 4).

A shard is the passages whose id hashes to it (`shard_of`: stable across runs, processes
and machines). `warm_shard` does the per-passage work of `build_index` for one shard only
— passage embeddings, OpenIE, and the embeddings of the shard's entity and fact texts
(normalised by the same `build_parts` the merge uses) — and writes each result into the
content-addressed caches, each batch in its own small transaction (a rerun repeats nothing
a finished batch stored). The merge is the ordinary `build_index`: it finds every
embedding and extraction cached and writes the one new index version in one transaction,
so the merged index is the single-process one by construction, and a rebuild adds only
what is new.

Locally `build_sharded` runs the shards as processes (`r2a index --shards N`); in the
Kubeflow pipeline `index_shards` plans them, `dsl.ParallelFor` runs `index_shard` per
shard and `index` merges (pipelines/retrain.py). A shard that fails stops the build before
the merge: the previous index version keeps serving and nothing of a version is written.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context

from r2adapter.data.adapters import load_dataset
from r2adapter.data.schema import Extraction, Passage
from r2adapter.errors import R2AError
from r2adapter.index.build import (
    IndexExtension,
    IndexReport,
    Log,
    build_index,
    make_openie,
    shared_index,
    usable_cores,
)
from r2adapter.index.encoder import Encoder, get_encoder
from r2adapter.index.graph import build_parts
from r2adapter.index.openie import OpenIE
from r2adapter.store import graph_store as gs
from r2adapter.store.load import load as load_into_db

MAX_SHARDS = 256
OPENIE_BATCH = 256  # passages per OpenIE call and per cache transaction (as build_index)


def shard_of(passage_id: str, n_shards: int) -> int:
    """The shard of a passage: a hash of its id (itself a content hash), modulo n. Python's
    `hash` is salted per process, so a digest: every process and machine agrees."""
    digest = hashlib.blake2b(passage_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % n_shards


def check_shards(n_shards: int, name: str = "shards") -> int:
    if isinstance(n_shards, bool) or not isinstance(n_shards, int):
        raise R2AError(f"{name} must be an integer, not {n_shards!r}")
    if not 1 <= n_shards <= MAX_SHARDS:
        raise R2AError(f"{name} must be between 1 and {MAX_SHARDS}, not {n_shards}")
    return n_shards


@dataclass(frozen=True)
class ShardReport:
    """What one shard found and added to the caches."""

    shard: int
    n_shards: int
    passages: int
    passage_embeddings: int  # new rows
    extractions: int  # passages OpenIE ran on (not cached before)
    entity_embeddings: int  # new entity texts embedded
    fact_embeddings: int  # new fact texts embedded
    seconds: float

    def line(self) -> str:
        return (
            f"shard {self.shard}/{self.n_shards}: {self.passages} passages, new: "
            f"{self.passage_embeddings} passage embeddings, {self.extractions} extractions, "
            f"{self.entity_embeddings} entity and {self.fact_embeddings} fact embeddings "
            f"({self.seconds:.1f} s)"
        )


def _embed_new(enc: Encoder, kind: str, texts: Sequence[str]) -> int:
    """Embed and store the texts the cache lacks; the number embedded."""
    have = gs.cached_text_embeddings(enc.name, kind, texts)
    todo = [t for t in dict.fromkeys(texts) if t not in have]
    if todo:
        gs.save_text_embeddings(enc.name, kind, todo, enc.encode(todo, desc=f"embed {kind}s"))
    return len(todo)


def _extract(backend: OpenIE, passages: Sequence[Passage]) -> tuple[list[Extraction], int]:
    """Extractions for the passages, the missing ones run and stored batch by batch."""
    key = backend.cache_key()
    cached = gs.cached_extractions(key, [p.id for p in passages])
    missing = [p for p in passages if p.id not in cached]
    for i in range(0, len(missing), OPENIE_BATCH):
        batch = missing[i : i + OPENIE_BATCH]
        done = list(zip((p.id for p in batch), backend.extract(batch), strict=True))
        gs.save_extractions(key, done)
        cached.update(done)
    return [cached[p.id] for p in passages], len(missing)


def warm_shard(dataset: str, openie: str, shard: int, n_shards: int) -> ShardReport:
    """Fill the caches for shard `shard` of `n_shards` of the stored corpus (loaded by
    `load_corpus`, as the plan step does). Writes nothing of an index version."""
    check_shards(n_shards)
    if not 0 <= shard < n_shards:
        raise R2AError(f"shard must be between 0 and {n_shards - 1}, not {shard}")
    t0 = time.perf_counter()
    ds = load_dataset(dataset)
    mine = [p for p in gs.stored_passages(ds.name) if shard_of(p.id, n_shards) == shard]
    enc = get_encoder()
    ids = {p.id for p in mine}
    todo = [p for p in gs.missing_passage_embeddings(ds.name, enc.name) if p.id in ids]
    if todo:
        emb = enc.encode([f"{p.title}\n{p.text}" for p in todo], desc="embed passages")
        gs.save_passage_embeddings(ds.name, enc.name, [p.id for p in todo], emb)
    extractions, extracted = _extract(make_openie(openie, ds), mine)
    # the merge's own normalisation: its entity and fact texts are the union of the shards'
    parts = build_parts([p.id for p in mine], extractions)
    entities = _embed_new(enc, "entity", parts.entities)
    facts = _embed_new(enc, "fact", parts.fact_texts())
    seconds = time.perf_counter() - t0
    return ShardReport(shard, n_shards, len(mine), len(todo), extracted, entities, facts, seconds)


def load_corpus(dataset: str) -> str:
    """The corpus into Postgres (idempotent), before the shards read it; its stored name."""
    ds = load_dataset(dataset)
    load_into_db(ds)
    return ds.name


def _init_worker(threads: int) -> None:
    """Each process gets its share of the cores (torch, and ONNX Runtime, which the encoder
    sizes from torch's thread count)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(threads)


Warm = Callable[[str, str, int, int], ShardReport]


def build_sharded(
    dataset: str,
    openie: str = "spacy",
    n_shards: int = 2,
    log: Log = print,
    extensions: Sequence[IndexExtension] = (),
    workers: int | None = None,
    warm: Warm = warm_shard,
    share: bool | None = None,
) -> IndexReport:
    """`build_index` with its per-passage work done first by `n_shards` shards in `workers`
    local processes (default: one per shard, at most one per core). `warm` is the shard
    step (a module-level function: the processes are spawned)."""
    check_shards(n_shards)
    cores = usable_cores()  # the cores this process may run on (a pod's, a taskset's)
    workers = min(n_shards, workers or cores)
    threads = max(1, cores // workers)
    t0 = time.perf_counter()
    name = load_corpus(dataset)
    shared = shared_index(name, openie, log) if gs.sharing(share) else None
    if shared is not None:  # another dataset's index holds this corpus: nothing to shard
        return shared
    log(f"{name}: {n_shards} shards in {workers} processes, {threads} thread(s) each")
    # one single-process pool per worker slot, its shards in turn: a crashed process is
    # then always the shard that slot was running
    ctx = get_context("spawn")
    pools = [
        ProcessPoolExecutor(1, mp_context=ctx, initializer=_init_worker, initargs=(threads,))
        for _ in range(workers)
    ]
    futures: list[Future[ShardReport]] = [
        pools[i % workers].submit(warm, dataset, openie, i, n_shards) for i in range(n_shards)
    ]
    failed: list[tuple[int, BaseException]] = []
    try:
        for i, f in enumerate(futures):
            try:
                log(f.result().line())
            except Exception as e:  # noqa: BLE001 - every failure is reported, by shard
                failed.append((i, e))
                for later in futures[i + 1 :]:
                    later.cancel()
    finally:
        for p in pools:
            p.shutdown(wait=True, cancel_futures=True)
    if failed:
        i, err = failed[0]
        latest = gs.latest_version(name)
        serving = f"index version {latest.id} still serves" if latest else "no index version yet"
        reason = str(err).strip().splitlines()[0] if str(err).strip() else "no message"
        raise R2AError(
            f"index shard {i} of {n_shards} failed ({type(err).__name__}: {reason}); nothing "
            f"merged, {serving}; a rerun resumes from the caches"
        )
    warmed = time.perf_counter() - t0
    r = build_index(dataset, openie, log=log, extensions=extensions, share=share)
    r.timings = {"shards": warmed, **r.timings, "sharded_total": time.perf_counter() - t0}
    return r
