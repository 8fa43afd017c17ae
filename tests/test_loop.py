"""One loop (r2adapter/loop.py): dvc.yaml's stages are its steps in its order and train and
promote iterate over its routers; the CLI's `retrain` offers exactly its routers. (The
Kubeflow graph is checked against it in tests/test_pipeline.py, `r2a retrain`'s run in
tests/test_retrain_loop.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from r2adapter.errors import R2AError
from r2adapter.loop import (
    ADR_STEPS,
    CORPORA_STEP,
    FAMILY_STEPS,
    KWAY_STEPS,
    PER_ROUTER,
    ROUTERS,
    STEPS,
    select_routers,
)

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def stages() -> dict[str, dict]:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def test_dvc_stages_are_the_loop_in_order(stages: dict[str, dict]) -> None:
    assert list(stages) == list(STEPS)


def test_dvc_trains_and_promotes_the_loop_routers(stages: dict[str, dict]) -> None:
    # the stages dvc.yaml repeats for each router (a `foreach` over the routers, not over
    # the datasets as validate's) are the loop's per-router steps
    routers = {r.backbone for r in ROUTERS}
    per_router = {n for n, st in stages.items() if set(st.get("foreach") or ()) == routers}
    assert per_router == set(PER_ROUTER)
    assert stages["train"]["foreach"] == [r.backbone for r in ROUTERS]
    assert stages["promote"]["foreach"] == {r.backbone: r.name for r in ROUTERS}
    # evaluate waits for every router's promotion
    deps = set(stages["evaluate"]["deps"])
    assert {f"reports/promote/{r.name}.json" for r in ROUTERS} <= deps


def test_dvc_trains_and_promotes_kway_on_the_strategy_labels(stages: dict[str, dict]) -> None:
    """label writes the strategy labels as a tracked output; train_kway reads them and the
    kway: section; evaluate waits for kway's promotion too."""
    # the stages that train or promote the k-way router are the loop's k-way steps
    kway = {n for n, st in stages.items() if "--router kway" in st.get("cmd", "")}
    assert kway == set(KWAY_STEPS)
    strategies = "labels/${pipeline.dataset}.strategies.jsonl"
    assert strategies in stages["label"]["outs"]
    assert {"kway.strategies", "kway.depth"} <= set(stages["label"]["params"])
    assert "--router kway" in stages["train_kway"]["cmd"]
    assert strategies in stages["train_kway"]["deps"] and "kway" in stages["train_kway"]["params"]
    assert "--router kway" in stages["promote_kway"]["cmd"]
    assert "reports/train/kway.json" in stages["promote_kway"]["deps"]
    assert "reports/promote/kway.json" in stages["evaluate"]["deps"]


def test_dvc_trains_and_promotes_adr_on_the_adr_labels(stages: dict[str, dict]) -> None:
    """label writes the ADR labels as a tracked output; train_adr reads them and the adr:
    section; evaluate waits for ADR's promotion too."""
    adr = {n for n, st in stages.items() if "--router adr" in st.get("cmd", "")}
    assert adr == set(ADR_STEPS) == set(FAMILY_STEPS["adr"])
    labels = "labels/${pipeline.dataset}.adr.jsonl"
    assert labels in stages["label"]["outs"] and "adr" in stages["label"]["params"]
    assert " train " in stages["train_adr"]["cmd"]
    assert labels in stages["train_adr"]["deps"] and "adr" in stages["train_adr"]["params"]
    assert " promote " in stages["promote_adr"]["cmd"]
    assert "reports/train/adr.json" in stages["promote_adr"]["deps"]
    assert "reports/promote/adr.json" in stages["evaluate"]["deps"]


def test_dvc_indexes_and_labels_the_corpora_the_families_train_on(
    stages: dict[str, dict],
) -> None:
    """The corpora step: a stage per params.yaml pipeline.corpora that indexes and labels it
    (its three label files tracked outputs); kway.train_corpora and adr.train_corpora are
    among those corpora, and train_kway / train_adr depend on their label files."""
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
    for family, ext in (("kway", ".strategies.jsonl"), ("adr", ".adr.jsonl")):
        extra = data[family]["train_corpora"]
        assert set(extra) <= set(corpora), family
        deps = set(stages[f"train_{family}"]["deps"])
        assert {f"labels/{c}{ext}" for c in extra} <= deps, family
    # the k-way features read each corpus's passage view: train_kway and evaluate depend on it
    for stage in ("train_kway", "evaluate"):
        views = {f"labels/{c}.passages.npz" for c in data["kway"]["train_corpora"]}
        assert views <= set(stages[stage]["deps"]), stage


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
    """The loop's routers and its once-trained families are the table's, and each has the
    one promotion skeleton's operations."""
    from r2adapter.families import FAMILIES

    assert list(FAMILIES) == [r.name for r in ROUTERS] + list(FAMILY_STEPS)
    assert [FAMILIES[r.name].model for r in ROUTERS] == [r.model for r in ROUTERS]
    for f in FAMILIES.values():
        for op in ("label", "fit", "load", "test_split", "figures", "replaces", "gate", "route"):
            assert callable(getattr(f, op)), (f.name, op)


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
    assert {"router", "router_${item}", "encoder"} <= params["train"]
    assert "label" in params["label"]
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    for section in ("graph", "encoder"):
        assert section in data, f"params.yaml has no `{section}:` section, which dvc.yaml reads"


def test_select_routers() -> None:
    assert select_routers() == ROUTERS
    assert select_routers(["r2a_embed"]) == (ROUTERS[1],)
    assert select_routers(["r2a_embed", "r2a"]) == ROUTERS  # the loop's order
    with pytest.raises(R2AError, match="unknown router 'gpt'"):
        select_routers(["gpt"])


def test_cli_retrain_offers_the_loop_routers() -> None:
    from r2adapter.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["retrain", "--router", "r2a_embed"])
    assert args.router == ["r2a_embed"]
    assert parser.parse_args(["retrain"]).router is None  # every router of the loop
    with pytest.raises(SystemExit):
        parser.parse_args(["retrain", "--router", "nosuch"])


def test_the_loop_runs_every_family_and_skips_adr_without_its_labels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stand-in steps: every step of STEPS runs in order, each promotion through
    `steps.promote` with its family's name; ADR's steps say why they are skipped when the
    label step wrote no ADR labels; `families=False` leaves the k-way and ADR steps out."""
    from types import SimpleNamespace

    from r2adapter import steps
    from r2adapter.loop import run_loop
    from r2adapter.registry.promote import PromoteResult

    promoted: list[str] = []

    def promote(kind: str, dataset: str | None = None) -> PromoteResult:
        promoted.append(kind)
        return PromoteResult(kind, True, "1", None, ["first"], {}, None)

    adr_stats: dict[str, object] = {"skipped": "no hypergraph"}
    stubs = {
        "validate": lambda d: SimpleNamespace(success=True, checks=[]),
        "index": lambda d, o: SimpleNamespace(version=1, created=False),
        "label": lambda d: SimpleNamespace(records=[], rule="r", md5="m", stats={"adr": adr_stats}),
        "train": lambda d, b: SimpleNamespace(kind=b, version="1", tau=0.0),
        "train_kway": lambda d: {"version": "1", "fallback": "dense@5"},
        "train_adr": lambda d: {"version": "1", "gamma": 0.75},
        "promote": promote,
        "evaluate_retrieval": lambda d: {"modes": {}},
        "evaluate_routing": lambda d, s: {"routers": {}},
        "evaluate_corpora": lambda: {"corpora": {"toy": {}}, "saved": {"json": "all.json"}},
    }
    for name, fn in stubs.items():
        monkeypatch.setattr(steps, name, fn)
    said: list[str] = []
    out = run_loop("toy", "spacy", say=said.append)
    names = [line.split(":")[0] for line in said]
    assert list(dict.fromkeys(names)) == list(STEPS)  # each step says one line or more
    assert "train_adr: skipped: no hypergraph" in said
    assert "promote_adr: skipped: no hypergraph" in said
    assert promoted == [r.name for r in ROUTERS] + ["kway"] == list(out.promotions)
    adr_stats.clear()  # the ADR labels written: ADR trains and promotes too
    promoted.clear()
    run_loop("toy", "spacy", say=said.append)
    assert promoted == [r.name for r in ROUTERS] + ["kway", "adr"]
    promoted.clear()
    run_loop("toy", "spacy", say=said.append, families=False)
    assert promoted == [r.name for r in ROUTERS]


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
