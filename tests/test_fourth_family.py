"""Adding a family is one folder and one table row: a toy family of a few lines, put in the
table (r2adapter/families.py FAMILIES), is labelled, trained and promoted by the loop, has
its DVC train and promote stages from one `families` row of dvc.yaml, gets its label →
train → register → promote → deploy branch (the components every family's branch runs)
from the pipeline compiler and is served by the service's
champion table, with no door naming it."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import yaml

from r2adapter.route.family import Route

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


class ToyFamily:
    """Routes every query to dense@5; labels one line; "trains" by counting."""

    name, model, label_set, train_device = "toy", "r2a-router-toy", "toy", "cpu"
    train_command, passed = "r2a train --router toy", "a toy is never worse"

    def __init__(self, home: Path) -> None:
        self.home, self.fitted = home, []

    def label_path(self, dataset: str) -> Path:
        return self.home / f"{dataset}.toy.jsonl"

    def label(self, dataset: str) -> dict[str, Any]:
        self.label_path(dataset).write_text('{"q": 1}\n')
        return {"n_queries": 1, "md5": "m"}

    def fit(self, dataset: str, params: Any = None) -> dict[str, Any]:
        self.fitted.append(dataset)
        return {"router": "toy", "version": str(len(self.fitted)), "run_id": "run1"}

    def load(self, alias: str = "champion", version: str | None = None) -> tuple[Any, str]:
        return object(), version or "1"

    def test_split(self, dataset: str, candidate: Any, tags: Mapping[str, str]) -> Any:
        return None

    def figures(self, model: Any, split: Any) -> dict[str, float]:
        return {"recall": 1.0}

    def replaces(self, candidate: Any, champion: Any) -> str | None:
        return None

    def gate(self, candidate: Mapping[str, float], champion: Mapping[str, float]) -> tuple:
        return True, []

    def route(self, model: Any, queries: Sequence[str], qvecs: Any = None, version: str = "",
              encode: Any = None) -> list[Route]:  # fmt: skip
        return [Route("dense@5", "dense", 5, False, router=self.name, version=version)] * len(
            queries
        )

    def serve(self, model: Any, dataset: str) -> Any:
        return model


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ToyFamily]:
    """The one table row."""
    from r2adapter.families import FAMILIES

    fam = ToyFamily(tmp_path)
    monkeypatch.setitem(FAMILIES, "toy", fam)
    yield fam


def test_the_loop_labels_trains_and_promotes_it(toy: ToyFamily, monkeypatch) -> None:
    from r2adapter import steps
    from r2adapter.label import step as label_step
    from r2adapter.loop import families, run_loop
    from r2adapter.registry.promote import PromoteResult

    assert families()[-1] == "toy" and steps.label_families()["toy"] is toy
    # the label step labels every family's own set: the toy's beside the others'
    monkeypatch.setattr(
        label_step, "run_label", lambda d, r=None: SimpleNamespace(stats={}, dataset=d)
    )
    monkeypatch.setattr(steps, "label_families", lambda: {"toy": toy})
    assert steps.label("toyset").stats["toy"] == {"n_queries": 1, "md5": "m"}
    assert toy.label_path("toyset").is_file()
    monkeypatch.undo()
    from r2adapter.families import FAMILIES

    monkeypatch.setitem(FAMILIES, "toy", toy)
    promoted: list[str] = []

    def promote(kind: str, dataset: str | None = None) -> PromoteResult:
        promoted.append(kind)
        return PromoteResult(kind, True, "1", None, ["first"], {}, None)

    stubs = {
        "validate": lambda d: SimpleNamespace(success=True, checks=[]),
        "index": lambda d, o: SimpleNamespace(version=1, created=False),
        "label": lambda d: SimpleNamespace(records=[], rule="r", md5="m", stats={}),
        "promote": promote,
        "evaluate_retrieval": lambda d: {"modes": {}},
        "evaluate_routing": lambda d, s: {"routers": {}},
        "evaluate_corpora": lambda: {"corpora": {}, "saved": {"json": "all.json"}},
    }
    for name, fn in stubs.items():
        monkeypatch.setattr(steps, name, fn)
    said: list[str] = []
    run_loop("toyset", "spacy", ["toy"], say=said.append)  # steps.train: the real door
    assert toy.fitted == ["toyset"] and promoted == ["toy"]
    assert "train: toy v1 registered as candidate (no note)" in said
    # a family with a label set of its own trains on the corpora's union: the step runs
    assert any(line.startswith("corpora:") for line in said)


def test_dvc_runs_it_from_one_families_row(toy: ToyFamily, tmp_path: Path) -> None:
    """dvc.yaml's rows must be the table's (tests/test_loop.py), and one row more is all
    DVC needs: train@toy and promote@toy, with their report paths."""
    from r2adapter.families import FAMILIES

    text = (ROOT / "dvc.yaml").read_text()
    rows = [v["families"] for v in yaml.safe_load(text)["vars"]][0]
    assert list(rows) != list(FAMILIES)  # the row is missing: the table's check fails
    row = "\n".join(
        ["      toy:", "        report: toy", "        train_headline: train_toy",
         "        train_metric: reports/metrics/train_toy.json",
         "        promote_headline: promote_toy",
         "        promote_metric: reports/metrics/promote_toy.json",
         "        labels: .toy.jsonl",
         *(f"        d{i}: r2adapter/toy" for i in range(1, 10)),
         "        p1: toy", "        p2: toy", "        gate1: toy", "        gate2: toy", ""]
    )  # fmt: skip
    end = "        gate2: adr.gamma\n"  # the table's last row ends here (before the sweeps)
    assert text.count(end) == 1
    text = text.replace(end, end + row, 1)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "dvc.yaml").write_text(text)
    shutil.copy(ROOT / "params.yaml", repo / "params.yaml")
    assert list(yaml.safe_load(text)["vars"][0]["families"]) == list(FAMILIES)
    dvc = shutil.which("dvc") or str(Path(__import__("sys").executable).with_name("dvc"))
    subprocess.run([dvc, "init", "--no-scm", "-q"], cwd=repo, check=True)
    r = subprocess.run([dvc, "stage", "list"], cwd=repo, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    listed = {line.split()[0]: line for line in r.stdout.splitlines() if line.strip()}
    assert "reports/train/toy.json" in listed["train@toy"]
    assert "reports/promote/toy.json" in listed["promote@toy"]


def test_the_pipeline_compiler_gives_it_a_branch(toy: ToyFamily, tmp_path: Path) -> None:
    from kfp import compiler

    from pipelines import retrain

    pipeline = retrain._pipeline("toy-retrain", "with a toy family", cluster=True)
    out = tmp_path / "retrain.yaml"
    compiler.Compiler().compile(pipeline, str(out))
    text = out.read_text()
    for task in ("label toy", "train toy", "register toy", "promote toy", "deploy toy"):
        assert f"name: {task}\n" in text, task
    assert "champion-moved-toy" in text
    # the same components as every other family's, named by `router`, on the CPU its
    # `train_device` says (no GPU request), with its own labels and the corpora's
    spec, platform = list(yaml.safe_load_all(text))
    dags = [c.get("dag", {}) for c in spec["components"].values()]
    tasks = {n: t for dag in dags for n, t in dag.get("tasks", {}).items()}
    mine = {
        t["taskInfo"]["name"]: t for t in tasks.values() if t["taskInfo"]["name"].endswith(" toy")
    }
    for step in ("label", "train", "register", "promote"):
        t = mine[f"{step} toy"]
        assert t["inputs"]["parameters"]["router"]["runtimeValue"]["constant"] == "toy", step
        expected = "label-family" if step == "label" else step
        assert t["componentRef"]["name"].removeprefix("comp-").rstrip("-0123456789") == expected
    train = mine["train toy"]
    assert set(train["inputs"]["artifacts"]) == {"labels", "corpora_labels"}
    ex = spec["components"][train["componentRef"]["name"]]["executorLabel"]
    container = spec["deploymentSpec"]["executors"][ex]["container"]
    assert "accelerator" not in container["resources"]
    assert container["resources"]["resourceCpuRequest"] == retrain.TRAINERS["cpu"].pod.cpu
    assert (
        "nodeSelector" not in platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"][ex]
    )


def test_the_service_serves_its_champion(toy: ToyFamily, monkeypatch) -> None:
    """The service's champion table loads and routes any family of the table by name
    (R2A_ROUTER=toy): ServingState._reload, without the rest of the service."""
    from r2adapter.registry import backoff, models
    from serving.state import ServingState

    monkeypatch.setattr(
        models, "version_by_alias", lambda m, a: SimpleNamespace(version="3", tags={})
    )
    st = object.__new__(ServingState)
    st.kind, st.dataset_env, st.champions, st.errors = "toy", "toyset", {}, {}
    st.unreachable, st.backoff, st._lock = set(), backoff.LoadBackoff(), threading.Lock()
    st.encoder = SimpleNamespace(encode=lambda qs: np.zeros((len(qs), 4)))
    st._reload("toy")
    champ = st.champions["toy"]
    assert champ.version == "3" and st.errors["toy"] == ""
    (route,) = champ.route(["which film?"])
    assert (route.router, route.strategy, route.version) == ("toy", "dense@5", "3")
