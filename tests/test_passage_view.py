"""The passage view beside a corpus's labels (r2adapter/retrieve/passage_view.py): what the
routers' features read of its index, so that labels restored from the DVC remote train and
evaluate without the index (issue 42); and labels read from their file when the database
holds none."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from r2adapter.retrieve import passage_view as pv
from tests.conftest import run_cli

pytestmark = pytest.mark.unit


@dataclass
class _Graph:
    version: SimpleNamespace
    passage_ids: list[str]
    passage_titles: list[str]
    passage_emb: np.ndarray


class _Graphs:
    def __init__(self, graphs: dict[str, _Graph]) -> None:
        self.graphs, self.calls = graphs, 0

    def get(self, dataset: str) -> _Graph:
        self.calls += 1
        return self.graphs[dataset]


def _graph(n: int = 5, encoder: str = "enc-a", seed: int = 0) -> _Graph:
    emb = np.random.default_rng(seed).normal(size=(n, 8)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    return _Graph(
        SimpleNamespace(id=7, encoder=encoder),
        [f"p{i}" for i in range(n)],
        [f"Title {i} (film)" for i in range(n)],
        emb,
    )


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from r2adapter.config import settings

    monkeypatch.setenv("R2A_HOME", str(tmp_path))
    settings.cache_clear()
    monkeypatch.setattr(pv, "_check_encoder", lambda path, view: None)
    yield tmp_path
    settings.cache_clear()


def test_the_view_round_trips_the_index_exactly(home: Path) -> None:
    g = _graph()
    path = pv.write_view("corpus", graphs=_Graphs({"corpus": g}))
    assert path == home / "labels" / "corpus.passages.npz"
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    v = pv.read_view(path)
    assert (v.dataset, v.version.id, v.version.encoder) == ("corpus", 7, "enc-a")
    assert v.passage_ids == g.passage_ids and v.passage_titles == g.passage_titles
    assert v.passage_emb.dtype == np.float32 and np.array_equal(v.passage_emb, g.passage_emb)


def test_the_source_prefers_the_view_and_falls_back_to_the_index(home: Path) -> None:
    saved, live = _graph(seed=1), _graph(seed=2)
    pv.write_view("corpus", graphs=_Graphs({"corpus": saved}))
    index = _Graphs({"corpus": live, "served": live})
    views = pv.PassageViews(index)
    assert np.array_equal(views.get("corpus").passage_emb, saved.passage_emb)
    assert index.calls == 0  # the view, not the index
    assert views.get("served") is live and index.calls == 1  # no view: the index
    # a rewritten view is read again
    newer = _graph(seed=3)
    pv.write_view("corpus", graphs=_Graphs({"corpus": newer}))
    st = pv.view_path("corpus").stat()
    os.utime(pv.view_path("corpus"), ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert np.array_equal(views.get("corpus").passage_emb, newer.passage_emb)


def test_a_view_of_another_encoder_is_refused_in_one_line(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import r2adapter.index.encoder as encoder

    monkeypatch.undo()  # the real check, with an encoder of another name
    monkeypatch.setenv("R2A_HOME", str(home))
    monkeypatch.setattr(encoder, "get_encoder", lambda: SimpleNamespace(name="enc-b"))
    pv.write_view("corpus", graphs=_Graphs({"corpus": _graph(encoder="enc-a")}))
    with pytest.raises(pv.PassageViewError) as e:
        pv.PassageViews(_Graphs({})).get("corpus")
    msg = str(e.value)
    assert "\n" not in msg and "enc-a" in msg and "enc-b" in msg
    assert "dvc repro corpora@corpus" in msg


@pytest.mark.parametrize("damage", ["not a zip", "missing key", "misaligned"])
def test_a_damaged_view_is_one_line_naming_the_relabel(home: Path, damage: str) -> None:
    path = pv.view_path("corpus")
    path.parent.mkdir(parents=True)
    g = _graph()
    fields = {
        "format": np.int64(pv.VIEW_FORMAT),
        "dataset": np.str_("corpus"),
        "version": np.int64(1),
        "encoder": np.str_("enc-a"),
        "passage_ids": np.array(g.passage_ids),
        "passage_titles": np.array(g.passage_titles),
        "passage_emb": g.passage_emb,
    }
    if damage == "not a zip":
        path.write_text("{}")
    else:
        if damage == "missing key":
            del fields["passage_titles"]
        else:
            fields["passage_ids"] = fields["passage_ids"][:-1]
        with open(path, "wb") as f:
            np.savez(f, **fields)
    with pytest.raises(pv.PassageViewError) as e:
        pv.PassageViews(_Graphs({})).get("corpus")
    assert "\n" not in str(e.value) and str(path) in str(e.value)
    assert "dvc repro corpora" in str(e.value)


@pytest.mark.integration
def test_index_writes_the_stamp_and_the_view_the_features_read_alike(
    pg_env: dict[str, str], sample_dataset: str, tmp_path: Path
) -> None:
    """`r2a index --stamp --view` on an indexed dataset: the stamp is the version's identity
    without its number or timings; the k-way features computed from the view equal those
    computed from the index."""
    from r2adapter.config import kway_params
    from r2adapter.index.encoder import get_encoder
    from r2adapter.kway.features import KwayFeatures
    from r2adapter.retrieve.graph_index import GRAPHS
    from r2adapter.store.graph_store import require_version

    view, stamp = tmp_path / "view.npz", tmp_path / "stamp.json"
    args = ["index", "--dataset", "sample", "--openie", "precomputed"]
    r = run_cli([*args, "--stamp", str(stamp), "--view", str(view)], pg_env)
    assert r.returncode == 0, r.stderr[-2000:]
    v = require_version("sample")
    assert json.loads(stamp.read_text()) == {
        "dataset": "sample",
        "signature": v.signature,
        "encoder": v.encoder,
        "openie": v.openie,
    }
    saved = pv.read_view(view)
    g = GRAPHS.get("sample")
    assert saved.version.id == v.id and np.array_equal(saved.passage_emb, g.passage_emb)

    class _Saved:
        def get(self, dataset: str) -> pv.PassageView:
            return saved

    qs = ["Who directed the film?", "Where was the author of the novel born?"]
    qv = get_encoder().encode(qs)
    names = kway_params().features
    a = KwayFeatures("sample", GRAPHS, names)(qs, qv)
    b = KwayFeatures("sample", _Saved(), names)(qs, qv)
    assert a.shape[1] > qv.shape[1] and np.array_equal(a, b)


@pytest.mark.integration
def test_labels_come_from_their_file_when_the_database_holds_none(
    pg_env: dict[str, str],
) -> None:
    from r2adapter.errors import R2AError
    from r2adapter.label.annotate import LabelRecord, db_labels, export_labels, label_file

    rec = LabelRecord(
        "q2", "Who?", "2hop", "test", "recall_first", 1.0, 2.0, True, False, "dense",
        ["a"], ["a", "b"], ["b"],
    )  # fmt: skip
    records = [rec, replace(rec, query_id="q1"), replace(rec, query_id="q3", split="train")]
    records.append(replace(rec, query_id="q0", rule="other"))
    export_labels(label_file("restored_corpus"), records)
    got = db_labels("restored_corpus", "recall_first", "test")
    assert [r.query_id for r in got] == ["q1", "q2"]  # its rule and split, by query id
    assert len(db_labels("restored_corpus", "recall_first", None)) == 3
    with pytest.raises(R2AError, match="run `r2a label --dataset never_labelled`"):
        db_labels("never_labelled", "recall_first", None)


@pytest.mark.integration
def test_rebuild_writes_a_new_version_of_the_same_build(
    pg_env: dict[str, str], sample_dataset: str
) -> None:
    """`r2a index --rebuild`: a new version though the signature matches (without it the
    build is a no-op); with --shards it is refused in one line."""
    from r2adapter.store.graph_store import require_version

    before = require_version("sample")
    args = ["index", "--dataset", "sample", "--openie", "precomputed"]
    same = run_cli(args, pg_env)
    assert same.returncode == 0 and "nothing rebuilt" in same.stdout
    assert require_version("sample").id == before.id
    r = run_cli([*args, "--rebuild"], pg_env)
    assert r.returncode == 0, r.stderr[-2000:]
    after = require_version("sample")
    assert after.id > before.id and after.signature == before.signature
    assert after.counts == before.counts
    bad = run_cli([*args, "--rebuild", "--shards", "2"], pg_env)
    assert bad.returncode != 0 and "--rebuild builds in one process" in bad.stderr


@pytest.mark.integration
def test_stamp_and_view_of_a_dataset_given_by_folder(
    pg_env: dict[str, str], mini_indexed: str, tmp_path: Path
) -> None:
    """A dataset given as a folder: the stamp and the view name it as stored (its name)."""
    from r2adapter.store.graph_store import require_version

    view, stamp = tmp_path / "view.npz", tmp_path / "stamp.json"
    args = ["index", "--dataset", mini_indexed, "--openie", "precomputed"]
    r = run_cli([*args, "--stamp", str(stamp), "--view", str(view)], pg_env)
    assert r.returncode == 0, r.stderr[-2000:]
    name = Path(mini_indexed).name
    assert json.loads(stamp.read_text())["signature"] == require_version(name).signature
    assert json.loads(stamp.read_text())["dataset"] == name
    assert pv.read_view(view).dataset == name
