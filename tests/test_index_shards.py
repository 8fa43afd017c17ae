"""The sharded index build (r2adapter/index/shards.py): shards by a stable hash, the
merged index equal to the single-process one from cold caches, a rebuild that adds only
what is new, and a failing shard that stops the build before the merge."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from r2adapter.errors import R2AError
from r2adapter.index.shards import ShardReport, check_shards, shard_of, warm_shard
from tests.conftest import ROOT, make_mini_musique, run_cli

pytestmark = pytest.mark.unit

OPENIE = "precomputed"  # the shipped GPT-3.5 extractions: the build's work is the encoder's


# ---- pure: the shard of a passage ----------------------------------------------------------


def test_shard_of_is_a_stable_digest_not_pythons_salted_hash() -> None:
    # known answers: the same in every process and on every machine
    assert [shard_of(p, 2) for p in ("chunk-a", "chunk-b", "chunk-c", "chunk-d")] == [0, 1, 0, 0]
    assert [shard_of(p, 7) for p in ("chunk-a", "chunk-b", "chunk-c", "chunk-d")] == [3, 2, 6, 1]


def test_shards_partition_the_corpus_evenly() -> None:
    ids = [f"chunk-{i:05d}" for i in range(4000)]
    for n in (1, 2, 3, 8):
        sizes = [sum(shard_of(p, n) == s for p in ids) for s in range(n)]
        assert sum(sizes) == len(ids)
        assert all(abs(x - len(ids) / n) < 0.1 * len(ids) / n for x in sizes), (n, sizes)


@pytest.mark.parametrize(
    ("value", "message"),
    [(0, "between 1 and 256, not 0"), (257, "not 257"), (2.0, "an integer"), (True, "integer")],
)
def test_bad_shard_counts_refused(value: Any, message: str) -> None:
    with pytest.raises(R2AError, match=message) as e:
        check_shards(value)
    assert "\n" not in str(e.value)


def test_cli_refuses_zero_shards_in_one_line(tmp_path: Path) -> None:
    # refused before the corpus is read or the database contacted
    env = {"PATH": "/usr/bin:/bin", "R2A_HOME": str(tmp_path), "R2A_DATA_DIR": str(ROOT / "data")}
    r = run_cli(["index", "--dataset", "sample", "--shards", "0"], env, timeout=120)
    assert r.returncode != 0
    assert r.stderr.strip() == "error: shards must be between 1 and 256, not 0"


# ---- against Postgres -----------------------------------------------------------------------


def fail_second_shard(dataset: str, openie: str, shard: int, n_shards: int) -> ShardReport:
    """A shard step whose shard 1 dies midway (module level: spawned processes import it)."""
    if shard == 1:
        raise RuntimeError("disk full on the worker")
    return warm_shard(dataset, openie, shard, n_shards)


def _rows(version: int) -> dict[str, Any]:
    from r2adapter.store.db import connection

    def q(sql: str) -> list[tuple[Any, ...]]:
        with connection() as conn:
            return conn.execute(sql, (version,)).fetchall()

    return {
        "entities": q("SELECT id, name FROM entities WHERE index_version = %s ORDER BY id"),
        "facts": q(
            "SELECT id, subject_id, relation, object_id, weight FROM facts"
            " WHERE index_version = %s ORDER BY id"
        ),
        "fact_passages": q(
            "SELECT fact_id, passage_id FROM fact_passages WHERE index_version = %s ORDER BY 1, 2"
        ),
        "passage_entities": q(
            "SELECT passage_id, entity_id FROM passage_entities WHERE index_version = %s"
            " ORDER BY 1, 2"
        ),
        "synonyms": q(
            "SELECT a, b, score FROM synonym_edges WHERE index_version = %s ORDER BY 1, 2"
        ),
    }


def _rows_after(version: int) -> dict[str, int]:
    """Rows of the graph tables that belong to no version up to `version` (a half-written
    one would leave them)."""
    from r2adapter.store.db import connection

    tables = ("entities", "facts", "fact_passages", "passage_entities", "synonym_edges")
    with connection() as conn:
        return {
            t: conn.execute(
                f"SELECT count(*) FROM {t} WHERE index_version > %s", (version,)
            ).fetchone()[0]
            for t in tables
        }


def _forget_caches(dataset: str, openie: str, rows: dict[str, Any]) -> None:
    """Cold caches for this corpus: its extractions and its entity and fact embeddings."""
    from r2adapter.data.adapters import load_dataset
    from r2adapter.data.schema import fact_text
    from r2adapter.index.build import make_openie
    from r2adapter.index.encoder import MINILM
    from r2adapter.store.db import connection

    ds = load_dataset(dataset)
    names = [n for _, n in rows["entities"]]
    facts = [fact_text(names[s], r, names[o]) for _, s, r, o, _ in rows["facts"]]
    with connection() as conn, conn.transaction():
        conn.execute(
            "DELETE FROM openie_cache WHERE backend = %s AND passage_hash = ANY(%s)",
            (make_openie(openie, ds).cache_key(), [p.id for p in ds.passages]),
        )
        for kind, texts in (("entity", names), ("fact", facts)):
            conn.execute(
                "DELETE FROM text_embeddings WHERE encoder = %s AND kind = %s AND text = ANY(%s)",
                (MINILM, kind, texts),
            )


SHARD_LINE = re.compile(
    r"shard (\d+)/2: (\d+) passages, new: (\d+) passage embeddings, (\d+) extractions, "
    r"(\d+) entity and (\d+) fact embeddings"
)


def _shard_lines(log: list[str]) -> list[tuple[int, ...]]:
    return [tuple(int(x) for x in m.groups()) for line in log if (m := SHARD_LINE.match(line))]


@pytest.mark.integration
def test_merged_index_equals_the_single_process_one(pg_env: dict[str, str], tmp_path: Path) -> None:
    from r2adapter.index.build import build_index
    from r2adapter.index.shards import build_sharded

    one = make_mini_musique(tmp_path / "shardone", n=12)
    two = make_mini_musique(tmp_path / "shardtwo", n=12)  # the same passages, another name
    single = build_index(one, OPENIE, log=lambda _: None)
    want = _rows(single.version)
    assert want["entities"] and want["facts"] and want["synonyms"]

    _forget_caches(two, OPENIE, want)  # the shards start cold, as the single build may not
    log: list[str] = []
    sharded = build_sharded(two, OPENIE, 2, log=log.append)
    shards = _shard_lines(log)
    assert sorted(s[0] for s in shards) == [0, 1]
    n = single.counts["passages"]
    assert sum(s[1] for s in shards) == n and all(s[1] > 0 for s in shards)
    assert sum(s[2] for s in shards) == n  # each passage embedded once, by its shard
    assert sum(s[3] for s in shards) == n  # and extracted once
    assert sum(s[4] for s in shards) >= single.counts["entities"]  # shared ones twice at most
    # the merge found every embedding and extraction cached: it only built and wrote
    assert not [line for line in log if re.search(r" new (passages|entity|fact)", line)], log

    assert sharded.created and sharded.counts == single.counts
    got = _rows(sharded.version)
    for table in ("entities", "facts", "fact_passages", "passage_entities"):
        assert got[table] == want[table], table
    assert [(a, b) for a, b, _ in got["synonyms"]] == [(a, b) for a, b, _ in want["synonyms"]]
    for (_, _, s1), (_, _, s2) in zip(got["synonyms"], want["synonyms"], strict=True):
        assert s1 == pytest.approx(s2, abs=1e-5)

    # nothing new: the shards add nothing and no version is written
    log.clear()
    again = build_sharded(two, OPENIE, 2, log=log.append)
    assert not again.created and again.version == sharded.version
    assert [s[2:] for s in _shard_lines(log)] == [(0, 0, 0, 0)] * 2


@pytest.mark.integration
def test_failed_shard_stops_before_the_merge_and_a_rerun_adds_only_the_new(
    pg_env: dict[str, str], tmp_path: Path
) -> None:
    from r2adapter.data.adapters import load_dataset
    from r2adapter.index.shards import build_sharded
    from r2adapter.retrieve.graph_index import GraphCache
    from r2adapter.store.graph_store import latest_version

    folder = tmp_path / "shardgrow"
    make_mini_musique(folder, n=8)
    first = build_sharded(str(folder), OPENIE, 2, log=lambda _: None)
    assert first.created
    before = {p.id for p in load_dataset(str(folder)).passages}
    shutil.rmtree(folder)
    make_mini_musique(folder, n=12)  # the corpus grows
    new = {p.id for p in load_dataset(str(folder)).passages} - before
    new_in_1 = sum(shard_of(p, 2) == 1 for p in new)
    assert new_in_1 and len(new) > new_in_1

    with pytest.raises(R2AError) as e:
        build_sharded(str(folder), OPENIE, 2, log=lambda _: None, warm=fail_second_shard)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("index shard 1 of 2 failed (RuntimeError: disk full on the worker)")
    assert f"index version {first.version} still serves" in msg
    latest = latest_version("shardgrow")
    assert latest is not None and latest.id == first.version  # nothing merged or half-written
    assert latest.counts == first.counts
    assert not [t for t, n in _rows_after(first.version).items() if n], "rows of no version"
    served = GraphCache(check_every_s=0).get("shardgrow")  # what the service would load
    assert served.version.id == first.version and served.edges is not None
    c = first.counts
    assert len(served.edges.src) == c["facts"] + c["passage_entity_edges"] + c["synonym_edges"]

    log: list[str] = []
    grown = build_sharded(str(folder), OPENIE, 2, log=log.append)
    assert grown.created and grown.version > first.version
    assert grown.counts["passages"] == first.counts["passages"] + len(new)
    # only the new passages are embedded and extracted, and shard 0's were already cached
    # by the failed run: only shard 1's are left
    shards = sorted(_shard_lines(log))
    assert [(s[0], s[2], s[3]) for s in shards] == [(0, 0, 0), (1, new_in_1, new_in_1)]
    assert sum(s[1] for s in shards) == grown.counts["passages"]
