"""Issue 41, item 6: a registered router can be rebuilt from the registry alone. A real
two-way router (the head over the retrieval embedding, trained by `train_and_register` on
60 MuSiQue questions) is registered in a real MLflow store and made champion; a fresh
Python process loads it with `mlflow.pyfunc.load_model`, from the model's own code, answers
a valid input, and refuses inputs of the wrong schema with MLflow's one-line error; what it
imported while loading and answering is covered by the model's requirements; the project's
own loader (`load_alias`, through the model cache) still reads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement

from r2adapter.config import router_params, settings
from r2adapter.label.annotate import LabelRecord, export_labels
from r2adapter.registry.models import ROUTER_DISTRIBUTIONS, pip_requirements
from tests.conftest import ROOT, environ

pytestmark = pytest.mark.integration  # a real MLflow store, a trained router

MODEL = "r2a-router-embed"
# imported by a library only because they are installed here, which it does without
# (`try: import …`): transformers' accelerate, torch.fx's pydot, MLflow's S3 client and
# system metrics, starlette's multipart, click's colorama, orjson
OPPORTUNISTIC = {
    "accelerate", "boto3", "botocore", "s3transfer", "jmespath", "colorama",
    "nvidia-ml-py", "orjson", "psutil", "pydot", "python-multipart",
}  # fmt: skip

FRESH = r"""
import json, sys
import mlflow.pyfunc, pandas as pd
from mlflow.exceptions import MlflowException

m = mlflow.pyfunc.load_model(sys.argv[1])
out = {"answer": m.predict(pd.DataFrame({"query": json.loads(sys.argv[2])})).to_dict("list")}
import r2adapter
out["r2adapter"] = r2adapter.__file__
bad = {
    "column q": pd.DataFrame({"q": ["Who wrote Hamlet?"]}),
    "an int": pd.DataFrame({"query": [7]}),
    "a list": ["Who wrote Hamlet?"],
    "a None": pd.DataFrame({"query": [None]}),
}
out["refused"] = {}
for name, x in bad.items():
    try:
        m.predict(x)
        out["refused"][name] = None
    except MlflowException as e:
        out["refused"][name] = str(e)
out["files"] = sorted({getattr(v, "__file__", None) or "" for v in list(sys.modules.values())})
print(json.dumps(out))
"""


def _labels(n: int = 60) -> list[LabelRecord]:
    """n MuSiQue questions, labelled by hop count (the 3-4 hop ones prefer graph): a real
    question text, a learnable signal, both classes in every split."""
    qs = json.loads((settings().data_dir / "musique" / "musique.json").read_text())[:n]
    out = []
    for i, q in enumerate(qs):
        graph = not q["id"].startswith("2hop")
        split = ("train", "train", "train", "val", "test")[i % 5]
        gold = [p["title"] for p in q["paragraphs"] if p["is_supporting"]]
        top = [p["title"] for p in q["paragraphs"]][:5]
        out.append(
            LabelRecord(
                query_id=q["id"],
                question=q["question"],
                qtype=q["id"].split("_")[0],
                split=split,
                rule="rebuild-test",
                rank_dense=3.0 if graph else 1.0,
                rank_graph=1.0 if graph else 3.0,
                y_dense=not graph,
                y_graph=graph,
                preference="graph" if graph else "dense",
                gold=gold,
                dense_top=top,
                graph_top=list(reversed(top)),
            )
        )
    return out


@pytest.fixture(scope="module")
def champion(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A real trained two-way router, registered in a fresh MLflow store and made champion:
    the environment and the version."""
    from r2adapter.registry.models import client
    from r2adapter.twoway.register import train_and_register

    home = tmp_path_factory.mktemp("home")
    env = {
        "R2A_HOME": str(home),
        "R2A_DATA_DIR": str(ROOT / "data"),
        "R2A_MODEL_CACHE": str(home / "cache"),
        "MLFLOW_TRACKING_URI": f"sqlite:///{home}/mlflow.db",
    }
    with environ(env):
        labels = home / "labels.jsonl"
        export_labels(labels, _labels())
        report = train_and_register(
            "musique", router_params("embedding", epochs=3), label_file=labels, progress=False
        )
        client().set_registered_model_alias(MODEL, "champion", report.version)
        yield {"env": {**os.environ, **env}, "version": report.version}


def _model_dir(version: str, dest: Path) -> Path:
    """The registered model whole, as a user downloading it elsewhere gets it."""
    import mlflow.artifacts

    return Path(
        mlflow.artifacts.download_artifacts(f"models:/{MODEL}/{version}", dst_path=str(dest))
    )


def test_the_registered_model_carries_signature_example_requirements_and_code(
    champion: dict[str, Any], tmp_path: Path
) -> None:
    folder = _model_dir(champion["version"], tmp_path)
    mlmodel = yaml.safe_load((folder / "MLmodel").read_text())
    inputs = json.loads(mlmodel["signature"]["inputs"])
    outputs = json.loads(mlmodel["signature"]["outputs"])
    assert inputs == [{"type": "string", "name": "query", "required": True}]
    assert [o["name"] for o in outputs] == [
        "p_dense", "p_graph", "decision", "rewrite", "tau", "epsilon",
    ]  # fmt: skip
    example = json.loads(
        (folder / mlmodel["saved_input_example_info"]["artifact_path"]).read_text()
    )
    assert example["columns"] == ["query"] and example["data"][0][0].endswith("?")
    reqs = (folder / "requirements.txt").read_text().split()
    lock = {_norm(x) for x in (ROOT / "requirements.lock").read_text().split()}
    assert reqs == pip_requirements() and len(reqs) == len(ROUTER_DISTRIBUTIONS)
    for r in reqs:  # every pin is the lock's (torch's without its local label)
        assert _norm(r.replace("[binary]", "")) in lock, r
    assert not [r for r in reqs if r.startswith("r2adapter")]  # on no index: code instead
    code = folder / mlmodel["flavors"]["python_function"]["code"] / "r2adapter"
    assert (code / "registry" / "pyfunc.py").read_text() == (
        ROOT / "r2adapter" / "registry" / "pyfunc.py"
    ).read_text()
    assert not list(code.rglob("__pycache__"))


def test_a_fresh_process_rebuilds_the_champion_and_refuses_wrong_input(
    champion: dict[str, Any], tmp_path: Path
) -> None:
    folder = _model_dir(champion["version"], tmp_path / "model")
    queries = ["Who is the spouse of the Green performer?", "When was Ada Lovelace born?"]
    r = subprocess.run(
        [sys.executable, "-c", FRESH, f"models:/{MODEL}@champion", json.dumps(queries)],
        env=champion["env"],
        cwd=tmp_path,  # not the checkout: r2adapter must come from the model's code
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    answer = out["answer"]
    assert len(answer["p_graph"]) == 2
    assert all(0.0 <= p <= 1.0 for p in answer["p_dense"] + answer["p_graph"])
    assert set(answer["decision"]) <= {"dense", "graph"}
    assert "/code/r2adapter/" in out["r2adapter"]  # the model's own copy of the project

    refused = out["refused"]
    assert "Model is missing inputs ['query']" in refused["column q"]
    assert "Incompatible input types for column query" in refused["an int"]
    assert "Model is missing inputs ['query']" in refused["a list"]
    assert refused["a None"] == "column 'query' must hold non-empty strings: row 0 is None"

    # everything the fresh process imported is a requirement or comes with one
    imported = _distributions(out["files"])
    covered = _closure([Requirement(x) for x in pip_requirements()])
    missing = imported - covered - OPPORTUNISTIC - {"r2adapter"}
    assert missing == set(), " ".join(sorted(missing))
    assert folder.is_dir()


def test_the_project_loader_reads_it_through_the_cache(champion: dict[str, Any]) -> None:
    from r2adapter.registry.cache import model_folder
    from r2adapter.registry.models import load_router

    router, version = load_router("r2a_embed", "champion")
    assert version == champion["version"]
    assert (model_folder(MODEL) / f"v{version}" / "MLmodel").is_file()
    d = router.decide(["Who is the spouse of the Green performer?"])
    assert 0.0 <= float(d.p_graph[0]) <= 1.0


def _distributions(files: list[str]) -> set[str]:
    """The installed distributions that own these module files (normalised names)."""
    owner: dict[str, str] = {}
    for dist in metadata.distributions():
        for f in dist.files or ():
            if f.suffix in (".py", ".so", ".pyd"):
                owner[str(Path(str(dist.locate_file(f))).resolve())] = _norm(dist.metadata["Name"])
    return {owner[p] for p in (str(Path(f).resolve()) for f in files if f) if p in owner}


def _closure(reqs: list[Requirement]) -> set[str]:
    """These requirements and, recursively, what their installed versions require (their
    extras' requirements only where an extra was asked for)."""
    seen: set[str] = set()
    done: set[tuple[str, frozenset[str]]] = set()
    todo = [(r, frozenset(r.extras)) for r in reqs]
    while todo:
        req, extras = todo.pop()
        name = _norm(req.name)
        if (name, extras) in done:
            continue
        done.add((name, extras))
        seen.add(name)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            continue
        for line in dist.requires or ():
            sub = Requirement(line)
            if sub.marker is not None and not any(
                sub.marker.evaluate({"extra": e}) for e in (extras or {""})
            ):
                continue
            todo.append((sub, frozenset(sub.extras)))
    return seen


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")
