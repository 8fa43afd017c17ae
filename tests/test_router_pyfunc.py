"""Issue 43, item 2: one MLflow pyfunc serves every router family. For each family of the
table (r2adapter/families.py) a small real router of that family is registered through the
one registration path into a real MLflow store; `mlflow.pyfunc.load_model` gives back the
one class (`RouterModel`) naming that family, whose predict answers the family's columns,
with the signature's types, deciding as the family's own `route` decides, and refusing a
missing query with MLflow's one-line error."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import numpy as np
import pandas as pd
import pytest
from mlflow.exceptions import MlflowException

from r2adapter.errors import R2AError
from r2adapter.families import FAMILIES
from r2adapter.registry.models import load_alias, register_candidate
from r2adapter.registry.pyfunc import RouterModel
from r2adapter.registry.tracking import mlflow_setup
from r2adapter.route.family import Route
from tests.conftest import environ

pytestmark = pytest.mark.integration  # a real MLflow store on disk

QUERIES = ["Who is the spouse of the Green performer?", "When was Ada Lovelace born?"]
# the pandas dtypes of the signature's types (a string column: pandas 3's `str`)
DTYPES = {
    "double": {"float64"},
    "string": {"str", "object"},
    "boolean": {"bool"},
    "long": {"int64"},
}


def two_way(backbone: str) -> Any:
    import torch

    from r2adapter.route.trained import RouterConfig, TrainedRouter, build_net

    torch.manual_seed(0)
    cfg = RouterConfig(backbone, tau=0.0, epsilon=0.5)
    return TrainedRouter(cfg, build_net(cfg))


def kway() -> Any:
    from r2adapter.kway.features import SHAPE
    from r2adapter.kway.model import KwayConfig, KwayRouter

    cfg = KwayConfig(
        ("dense@5", "graph@5"), (10.0, 50.0), (5.0, 5.0), (0.5, 0.8), (0.6, 0.4),
        "graph@5", ("question_shape",), 0.8, 10.0, 0.5, corpus="toyset",
    )  # fmt: skip
    rng = np.random.default_rng(0)
    w, b = rng.normal(size=(SHAPE, 2)), np.zeros(2)
    return KwayRouter(cfg, {"w": w, "b": b, "mean": np.zeros(SHAPE), "std": np.ones(SHAPE)})


def adr() -> Any:
    from r2adapter.adr.router import AdrRouter, SoftmaxHead
    from r2adapter.index.encoder import get_encoder

    enc = get_encoder()
    rng = np.random.default_rng(0)
    head = SoftmaxHead(rng.normal(size=(3, enc.dim)) * 5, np.zeros(3))
    return AdrRouter(head, 0.6, enc.name, "toyset")


# each family's router (the two-way kinds on their own backbones)
ROUTERS: dict[str, Callable[[], Any]] = {
    "r2a": lambda: two_way("minilm"),
    "r2a_embed": lambda: two_way("embedding"),
    "kway": kway,
    "adr": adr,
}


# the column that says each family's decision, and that decision in its `route`
DECIDED: dict[str, tuple[str, Callable[[Route], Any]]] = {
    "r2a": ("decision", lambda r: r.side),
    "r2a_embed": ("decision", lambda r: r.side),
    "kway": ("strategy", lambda r: r.strategy),
    "adr": ("operator", lambda r: r.strategy),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Every family of the table registered once in a fresh store: family → version."""
    home = tmp_path_factory.mktemp("pyfunc")
    env = {
        "MLFLOW_TRACKING_URI": f"sqlite:///{home}/mlflow.db",
        "R2A_MODEL_CACHE": str(home / "cache"),
    }
    with environ(env):
        exp = mlflow_setup()
        versions = {}
        for name, family in FAMILIES.items():
            with mlflow.start_run(experiment_id=exp):
                versions[name] = register_candidate(
                    family.model, name, family.columns, ROUTERS[name]().save, "toyset", {}
                )
        yield {**versions, "_uri": env["MLFLOW_TRACKING_URI"]}


def test_every_family_has_a_router_here() -> None:
    assert set(ROUTERS) == set(DECIDED) == set(FAMILIES)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_the_one_pyfunc_serves_the_family(name: str, store: dict[str, str]) -> None:
    family = FAMILIES[name]
    uri = f"models:/{family.model}/{store[name]}"
    loaded = mlflow.pyfunc.load_model(uri)
    model = loaded.unwrap_python_model()
    assert type(model) is RouterModel and model.family == name
    assert loaded.metadata.metadata == {"family": name}  # the MLmodel names it too
    outputs = loaded.metadata.signature.outputs.to_dict()
    assert [(o["name"], o["type"]) for o in outputs] == list(family.columns.output.items())

    out = loaded.predict(pd.DataFrame({"query": QUERIES}))
    assert list(out.columns) == list(family.columns.output) and len(out) == len(QUERIES)
    for col, t in family.columns.output.items():
        assert str(out[col].dtype) in DTYPES[t], (col, out[col].dtype)
    routes = family.route(model.router, QUERIES)
    column, decided = DECIDED[name]
    assert out[column].tolist() == [decided(r) for r in routes]
    if "fallback" in out:
        assert out["fallback"].tolist() == [r.fallback for r in routes]
    if "p_graph" in out:
        assert np.allclose(out["p_graph"], [r.p_graph for r in routes])

    with pytest.raises(MlflowException) as e:
        loaded.predict(pd.DataFrame({"query": [None]}))
    assert str(e.value) == "column 'query' must hold non-empty strings: row 0 is None"


def test_a_model_of_an_older_release_is_refused_in_one_line(
    store: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version saved by an older r2adapter (a PythonModel class of a module this code no
    longer has, as kway/pyfunc.py was) is one line naming the retraining, not a traceback
    from the unpickler."""
    old = tmp_path / "src"
    old.mkdir()
    (old / "r2a_gone_pyfunc.py").write_text(
        "import mlflow.pyfunc\n\n"
        "class KwayModel(mlflow.pyfunc.PythonModel):\n"
        "    def predict(self, context, model_input, params=None):\n"
        "        return model_input\n"
    )
    monkeypatch.syspath_prepend(str(old))
    import r2a_gone_pyfunc  # the older release's module, while it exists

    name = "r2a-router-older"
    with environ({"MLFLOW_TRACKING_URI": store["_uri"]}):
        with mlflow.start_run(experiment_id=mlflow_setup()):
            mlflow.pyfunc.log_model(
                name="model", python_model=r2a_gone_pyfunc.KwayModel(), registered_model_name=name
            )
        monkeypatch.delitem(sys.modules, "r2a_gone_pyfunc")
        (old / "r2a_gone_pyfunc.py").unlink()  # the upgrade: the module is gone
        with pytest.raises(R2AError) as e:
            load_alias(name, "champion", "`r2a train --router kway`", version="1")
    assert "\n" not in str(e.value)
    assert str(e.value).startswith(f"{name} v1 cannot be loaded by this code (No module named")
    assert str(e.value).endswith("is retrained: run `r2a train --router kway`")
