"""The label room's two halves: ranking shard i of n (`rank_shard`) and labelling merged
rankings (`label_from_rankings`). The Kubeflow components, run as kfp runs them (shard i of
2 to a JSON artifact, then the merge), write byte for byte the file `r2a label` writes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from r2adapter.errors import R2AError
from r2adapter.label.annotate import Rankings, merge_rankings
from tests.conftest import N_QUERIES, run_cli

pytestmark = pytest.mark.unit


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _shard(i: int, n: int, version: int = 1, ids: tuple[str, ...] = ()) -> dict[str, object]:
    ranked = {q: ["p1", "p2"] for q in ids}
    return Rankings([], ranked, ranked, version, i, n).to_json()


@pytest.mark.parametrize(
    ("parts", "message"),
    [
        ([], "no label shards to merge"),
        ([_shard(0, 2)], r"label shards \[0\] are not shards 0..n-1"),
        ([_shard(0, 2), _shard(0, 2)], r"label shards \[0, 0\] are not shards"),
        ([_shard(0, 2), _shard(1, 3)], "are not shards 0..n-1 of one fan-out"),
        ([_shard(0, 2, 1), _shard(1, 2, 2)], r"different index versions \[1, 2\]"),
    ],
)
def test_merge_refuses_an_incomplete_or_mixed_fan_out(
    parts: list[dict[str, object]], message: str
) -> None:
    # checked before the store is read: no database needed
    with pytest.raises(R2AError, match=message) as e:
        merge_rankings("musmini", parts)
    assert "\n" not in str(e.value)


@pytest.mark.integration
def test_sharded_and_merged_labels_equal_r2a_label_byte_for_byte(
    mini_indexed: str, pg_env: dict[str, str], tmp_path: Path
) -> None:
    from kfp.dsl import Dataset, Metrics

    from components.label import label_merge, label_shard
    from r2adapter.config import settings
    from r2adapter.store.graph_store import require_version

    r = run_cli(["label", "--dataset", mini_indexed], pg_env)
    assert r.returncode == 0, r.stderr[-2000:]
    exported = settings().root / "labels" / "musmini.jsonl"
    want = _md5(exported)
    assert f"md5 {want}" in r.stdout  # what `r2a label` says is what it wrote
    exported.unlink()  # the merge must write it again

    version = require_version("musmini").id
    shards = []
    for i in range(2):
        out = Dataset(uri=str(tmp_path / f"rankings-{i}.json"))
        n = label_shard.python_func(
            dataset=mini_indexed, index_version=version, shard=i, n_shards=2, rankings=out
        )
        ranked = json.loads(Path(out.path).read_text())
        assert (ranked["shard"], ranked["n_shards"], len(ranked["dense"])) == (i, 2, n)
        shards.append(out)
    assert sum(len(json.loads(Path(s.path).read_text())["graph"]) for s in shards) == N_QUERIES

    labels = Dataset(uri=str(tmp_path / "labels.jsonl"))
    metrics = Metrics(uri=str(tmp_path / "metrics.json"))
    n_labels, md5 = label_merge.python_func(
        dataset=mini_indexed, shards=shards, labels=labels, metrics=metrics
    )
    assert n_labels == N_QUERIES
    assert md5 == want and _md5(exported) == want and _md5(Path(labels.path)) == want
    assert metrics.metadata["labels"] == N_QUERIES

    # a shard ranked against another index version is refused, in one line
    with pytest.raises(R2AError, match=f"index version {version} is not the {version + 1}"):
        label_shard.python_func(
            dataset=mini_indexed,
            index_version=version + 1,
            shard=0,
            n_shards=2,
            rankings=Dataset(uri=str(tmp_path / "stale.json")),
        )
