"""One loop (r2adapter/loop.py): dvc.yaml's stages are its steps in its order and train and
promote iterate over its routers; the CLI's `retrain` offers exactly its routers. (The
Kubeflow graph is checked against it in tests/test_pipeline.py, `r2a retrain`'s run in
tests/test_retrain_loop.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from r2adapter.errors import R2AError
from r2adapter.loop import CORPORA_STEP, PER_ROUTER, ROUTERS, STEPS, families, select_routers

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def stages() -> dict[str, dict]:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def test_dvc_stages_are_the_loop_in_order(stages: dict[str, dict]) -> None:
    """The loop's steps first, in its order; after them only the quality sweeps, which are
    no step of the loop (tests/test_sweeps.py)."""
    assert list(stages) == [*STEPS, "sweep"]


def _family_rows() -> dict[str, dict]:
    """dvc.yaml's `families` rows (vars): one per family, what its stages read and write."""
    (rows,) = [v["families"] for v in yaml.safe_load((ROOT / "dvc.yaml").read_text())["vars"]]
    return rows


def _train_deps(row: dict) -> set[str]:
    return {row[f"d{i}"] for i in range(1, 10)}


def test_dvc_trains_and_promotes_every_family_of_the_table(stages: dict[str, dict]) -> None:
    """train and promote are `foreach` stages over dvc.yaml's `families` rows, which are the
    table's families in its order; each trains on its own label file (`label_path`), its
    report where the loop's reports have always been, and evaluate waits for every
    family's promotion."""
    from r2adapter.families import FAMILIES

    rows = _family_rows()
    assert list(rows) == list(FAMILIES) == list(families())
    per_router = {n for n, st in stages.items() if st.get("foreach") == "${families}"}
    assert per_router == set(PER_ROUTER)
    assert "--router ${key}" in stages["train"]["do"]["cmd"]
    assert "--router ${key}" in stages["promote"]["do"]["cmd"]
    assert "labels/${pipeline.dataset}${item.labels}" in stages["train"]["do"]["deps"]
    for name, fam in FAMILIES.items():
        row = rows[name]
        assert fam.label_path("D").name == f"D{row['labels']}", name
        assert set(row) >= {"report", "train_headline", "promote_headline", "p1", "gate1"}
    # the two-way routers' reports are named by backbone, as before
    assert [rows[r.name]["report"] for r in ROUTERS] == [r.backbone for r in ROUTERS]
    assert {rows[n]["report"] for n in ("kway", "adr")} == {"kway", "adr"}
    # evaluate waits for every family's promotion
    deps = set(stages["evaluate"]["deps"])
    assert {f"reports/promote/{n}.json" for n in FAMILIES} <= deps


def test_dvc_trains_each_family_on_its_labels_and_params(stages: dict[str, dict]) -> None:
    """label writes every family's label file as a tracked output; train@kway reads the
    strategy labels and kway:, train@adr the ADR labels and adr:; the gates read their
    budgets."""
    rows = _family_rows()
    outs = {o for o in stages["label"]["outs"] if isinstance(o, str)}
    for name in families():
        assert f"labels/${{pipeline.dataset}}{rows[name]['labels']}" in outs, name
    assert {"kway.strategies", "kway.depth", "adr"} <= set(stages["label"]["params"])
    assert rows["kway"]["p1"] == "kway" and "r2adapter/kway" in _train_deps(rows["kway"])
    assert rows["adr"]["p1"] == "adr" and "r2adapter/adr" in _train_deps(rows["adr"])
    assert rows["kway"]["gate1"] == "kway.budget" and rows["adr"]["gate1"] == "adr.gamma"
    assert stages["promote"]["do"]["deps"] == ["reports/train/${item.report}.json"]


def test_dvc_indexes_and_labels_the_corpora_the_families_train_on(
    stages: dict[str, dict],
) -> None:
    """The corpora step: a stage per params.yaml pipeline.corpora that indexes and labels it
    (its three label files tracked outputs); kway.train_corpora and adr.train_corpora are
    among those corpora, and train@kway / train@adr depend on their label files."""
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    corpora = data["pipeline"]["corpora"]
    assert corpora and data["pipeline"]["dataset"] not in corpora
    st = stages[CORPORA_STEP]
    assert st["foreach"] == "${pipeline.corpora}"
    assert "r2a index --dataset ${item}" in st["do"]["cmd"]
    assert "r2a label --dataset ${item}" in st["do"]["cmd"]
    outs = st["do"]["outs"]
    assert {
        f"labels/${{item}}{ext}"
        for ext in (".jsonl", ".strategies.jsonl", ".adr.jsonl", ".passages.npz")
    } == {o for o in outs if isinstance(o, str)}  # cached: the label files and passage view
    assert "--view labels/${item}.passages.npz" in st["do"]["cmd"]
    # the dataset's index stamp (no timings), not its report: a fresh clone's forced index
    # writes the same stamp, so dvc.lock still matches and the outputs come from the remote
    assert "reports/index/${pipeline.dataset}.stamp.json" in st["do"]["deps"]
    assert "reports/index/${pipeline.dataset}.json" not in st["do"]["deps"]
    # and the full reports, uncached (its metric is the headline: reports/metrics/corpora/)
    assert {"reports/index/${item}.json", "reports/labels/${item}.json"} == {
        path for o in outs if isinstance(o, dict) for path in o
    }
    rows = _family_rows()
    for family, ext in (("kway", ".strategies.jsonl"), ("adr", ".adr.jsonl")):
        extra = data[family]["train_corpora"]
        assert set(extra) <= set(corpora), family
        assert {f"labels/{c}{ext}" for c in extra} <= _train_deps(rows[family]), family
    # the k-way features read each corpus's passage view: train@kway and evaluate depend on it
    views = {f"labels/{c}.passages.npz" for c in data["kway"]["train_corpora"]}
    assert views <= _train_deps(rows["kway"]) and views <= set(stages["evaluate"]["deps"])


def test_an_extra_corpus_without_labels_is_left_out_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from r2adapter.label.corpora import training_corpora

    (tmp_path / "b.jsonl").write_text("{}\n")
    path = lambda c: tmp_path / f"{c}.jsonl"  # noqa: E731
    assert training_corpora("a", ["b", "c", "a"]) == ["a", "b", "c"]
    with caplog.at_level("WARNING"):
        assert training_corpora("a", ["b", "c", "a"], path) == ["a", "b"]
    assert "c: no labels" in caplog.text and "left out of the union" in caplog.text
    assert "r2a label --dataset c" in caplog.text


def test_every_family_promotes_through_the_table() -> None:
    """The loop's families are the table's (the two-way routers first), and each has the
    one promotion skeleton's operations and says where its labels are."""
    from r2adapter.families import FAMILIES

    assert list(FAMILIES) == list(families())
    assert [FAMILIES[r.name].model for r in ROUTERS] == [r.model for r in ROUTERS]
    for f in FAMILIES.values():
        for op in (
            "label", "label_path", "fit", "load", "test_split", "figures", "replaces", "gate",
            "route",
        ):  # fmt: skip
            assert callable(getattr(f, op)), (f.name, op)
        assert isinstance(f.label_set, str)


def test_dvc_stages_depend_on_the_params_they_read(stages: dict[str, dict]) -> None:
    """Changing the graph's damping or the encoder reruns index, label and evaluate; the
    encoder also reruns train (the routers read the retrieval embedding)."""
    params = {
        name: set(stage.get("params") or stage["do"].get("params") or ())
        for name, stage in stages.items()
        if name != "validate"
    }
    for step in ("index", "label", "evaluate"):
        assert {"graph", "encoder"} <= params[step], step
    assert "encoder" in params["train"]
    rows = _family_rows()
    assert {"router", "router_minilm"} <= {rows["r2a"]["p1"], rows["r2a"]["p2"]}
    assert "label" in params["label"]
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    for section in ("graph", "encoder"):
        assert section in data, f"params.yaml has no `{section}:` section, which dvc.yaml reads"


def test_select_routers() -> None:
    assert select_routers() == families()
    assert select_routers(["r2a_embed"]) == ("r2a_embed",)
    assert select_routers(["kway", "r2a_embed", "r2a"]) == ("r2a", "r2a_embed", "kway")
    with pytest.raises(R2AError, match="unknown router 'gpt'"):
        select_routers(["gpt"])


def test_cli_retrain_offers_the_table_families() -> None:
    from r2adapter.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["retrain", "--router", "r2a_embed", "--router", "kway"])
    assert args.router == ["r2a_embed", "kway"]
    assert parser.parse_args(["retrain"]).router is None  # every family of the table
    with pytest.raises(SystemExit):
        parser.parse_args(["retrain", "--router", "nosuch"])
    assert parser.parse_args(["train", "--dataset", "d", "--router", "adr"]).router == "adr"
    assert parser.parse_args(["promote", "--router", "kway"]).router == "kway"


def _stub_steps(monkeypatch: pytest.MonkeyPatch, adr_stats: dict, trained: list[str]) -> list:
    from types import SimpleNamespace

    from r2adapter import steps
    from r2adapter.registry.promote import PromoteResult

    promoted: list[str] = []

    def promote(kind: str, dataset: str | None = None) -> PromoteResult:
        promoted.append(kind)
        return PromoteResult(kind, True, "1", None, ["first"], {}, None)

    def train(name: str, dataset: str) -> dict:
        trained.append(name)
        return {"version": "1", "run_id": "r", "gamma": 0.75}

    stubs = {
        "validate": lambda d: SimpleNamespace(success=True, checks=[]),
        "index": lambda d, o: SimpleNamespace(version=1, created=False),
        "label": lambda d: SimpleNamespace(records=[], rule="r", md5="m", stats={"adr": adr_stats}),
        "train": train,
        "promote": promote,
        "evaluate_retrieval": lambda d: {"modes": {}},
        "evaluate_routing": lambda d, s: {"routers": {}},
        "evaluate_corpora": lambda: {"corpora": {"toy": {}}, "saved": {"json": "all.json"}},
    }
    for name, fn in stubs.items():
        monkeypatch.setattr(steps, name, fn)
    return promoted


def test_the_loop_runs_every_family_and_skips_adr_without_its_labels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stand-in steps: every step of STEPS runs in order, train and promote once per family
    of the table through `steps.train`/`steps.promote` with its name; ADR's say why they are
    skipped when the label step wrote no ADR labels; the two-way routers alone leave the
    corpora step out."""
    from r2adapter.loop import run_loop

    adr_stats: dict[str, object] = {"skipped": "no hypergraph"}
    trained: list[str] = []
    promoted = _stub_steps(monkeypatch, adr_stats, trained)
    said: list[str] = []
    out = run_loop("toy", "spacy", say=said.append)
    names = [line.split(":")[0] for line in said]
    assert list(dict.fromkeys(names)) == list(STEPS)  # each step says one line or more
    assert "train: adr: skipped: no hypergraph" in said
    assert "promote: adr: skipped: no hypergraph" in said
    assert promoted == [r.name for r in ROUTERS] + ["kway"] == list(out.promotions)
    assert trained == promoted
    adr_stats.clear()  # the ADR labels written: ADR trains and promotes too
    promoted.clear()
    run_loop("toy", "spacy", say=said.append)
    assert promoted == list(families())
    promoted.clear()
    said.clear()
    run_loop("toy", "spacy", [r.name for r in ROUTERS], say=said.append)
    assert promoted == [r.name for r in ROUTERS]
    assert not [line for line in said if line.startswith(CORPORA_STEP)]


def test_the_label_stages_outputs_are_in_the_dvc_remote_for_this_code() -> None:
    """A fresh clone's `make run` restores the labels (the dataset's, and the development
    corpora's with their passage views) from dvcstore/ instead of indexing and labelling
    again (issue 42): that holds only while dvc.lock's label and corpora entries match this
    code and these parameters and their outputs are in the remote. After a change to what
    those stages read, relabel and push (`dvc repro label corpora && dvc push label
    corpora`), or, for a change that leaves their outputs as they are, `dvc commit`."""
    import json
    import subprocess

    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    lock = yaml.safe_load((ROOT / "dvc.lock").read_text())["stages"]
    dvc = ROOT / ".venv" / "bin" / "dvc"
    targets = ["label", *(f"{CORPORA_STEP}@{c}" for c in data["pipeline"]["corpora"])]
    r = subprocess.run(
        [str(dvc), "status", "--json", *targets], cwd=ROOT, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-2000:]
    status = json.loads(r.stdout or "{}")
    for target in targets:
        changes = [c for c in status.get(target, []) if isinstance(c, dict)]
        stale = {k: v for c in changes for k, v in c.items() if k != "changed outs"}
        stale |= {c: "" for c in status.get(target, []) if isinstance(c, str)}
        assert not stale, (
            f"{target}: dvc.lock does not match {stale}: a fresh clone would compute its labels "
            "again. Relabel and push (`dvc repro label corpora && dvc push label corpora`) or, "
            "for a change that leaves the outputs as they are, `dvc commit label corpora`"
        )
        for out in lock[target]["outs"]:
            if out["path"].startswith("labels/"):
                md5 = out["md5"]
                stored = ROOT / "dvcstore" / "files" / "md5" / md5[:2] / md5[2:]
                assert stored.is_file(), f"{target}: {out['path']} is not in dvcstore/: dvc push"
