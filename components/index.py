"""index, fanned out (issue 18, part 4): `index_shards` loads the corpus and plans the
shards, `index_shard` fills the caches for shard i of n (`r2adapter.index.shards.
warm_shard`: passage embeddings, OpenIE, the shard's entity and fact embeddings: the
expensive, per-passage half), and `index` merges: the ordinary build (`r2a index`), which
finds everything cached and writes the one new index version in one transaction. A failed
shard stops the run before the merge, so the previous version keeps serving."""

from typing import NamedTuple

from kfp.dsl import Metrics, Output

from components._base import r2a_component


@r2a_component
def index_shards(dataset: str, n_shards: int, data_fingerprint: str) -> list[dict]:
    """The corpus into Postgres (the shards read it), then the items `dsl.ParallelFor`
    fans out over: {shard, n_shards, data_fingerprint}. The fingerprint travels in the items
    so that each shard's cache key follows the data (kfp.local overwrites task outputs fed
    into a loop with the loop item; see `label_shards`)."""
    from r2adapter.index.shards import check_shards, load_corpus

    check_shards(n_shards, "n_index_shards")
    name = load_corpus(dataset)
    print(f"{name}: {n_shards} index shards (data fingerprint {data_fingerprint})")
    return [
        {"shard": i, "n_shards": n_shards, "data_fingerprint": data_fingerprint}
        for i in range(n_shards)
    ]


@r2a_component
def index_shard(dataset: str, openie: str, shard: int, n_shards: int, data_fingerprint: str) -> int:
    """Embeddings and OpenIE for the passages of shard `shard` of `n_shards`, into the
    content-addressed caches (each batch its own transaction: a retry resumes). Writes no
    index version. Returns the number of passages of the shard."""
    from r2adapter.index.shards import warm_shard

    r = warm_shard(dataset, openie, shard, n_shards)
    print(r.line())
    print(f"data fingerprint {data_fingerprint}")
    return r.passages


@r2a_component
def index(
    dataset: str,
    openie: str,
    data_fingerprint: str,
    shard_passages: list,
    metrics: Output[Metrics],
) -> NamedTuple("Outputs", [("version", int), ("created", bool)]):
    """The merge: `r2a index` after the shards (`shard_passages`: each shard's passages,
    collected from the fan-out; their sum is checked against the corpus). `data_fingerprint`
    is not used by the step: it is there so that the task's cache key follows the data (see
    `validate`). The build is incremental (embeddings and OpenIE cached per passage in
    Postgres), so it finds the shards' work cached, and a retry resumes where it stopped."""
    from collections import namedtuple

    from r2adapter import steps

    r = steps.index(dataset, openie)
    warmed = sum(int(n) for n in shard_passages)
    if warmed != r.counts.get("passages", warmed):
        print(f"note: the shards covered {warmed} passages of {r.counts['passages']}")
    what = "new index version" if r.created else "index up to date, nothing rebuilt:"
    print(f"{r.dataset}: {what} {r.version} ({r.encoder}, openie {r.openie})")
    print(f"merged {len(shard_passages)} shards; data fingerprint {data_fingerprint}")
    for key, value in r.metrics().items():
        metrics.log_metric(key, value)
    metrics.metadata["encoder"] = r.encoder
    metrics.metadata["openie"] = r.openie
    return namedtuple("Outputs", ["version", "created"])(r.version, r.created)
