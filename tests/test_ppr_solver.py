"""The PPR solver choice on a real index (the shipped sample, a real Postgres): graph and
CatRAG retrieval give the same top passages under the local and the exact solver, top-N
passage seeding seeds only N passages, and `r2a evaluate retrieval --ppr` forces a solver
(issue 18)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from r2adapter.config import GraphParams

QUESTIONS = (
    "When was Thomas Christian Sudhof born?",
    "Who founded BrainCheck?",
    "What county is Erik Hort's birthplace a part of?",
)


@pytest.fixture(scope="module")
def sample_index(pg_env: dict[str, str]) -> str:
    from r2adapter.index.build import build_index
    from r2adapter.steps import index_extensions

    build_index("sample", "precomputed", log=lambda _: None, extensions=index_extensions())
    return "sample"


def _params(**kw: object) -> GraphParams:
    from r2adapter.config import graph_params

    return replace(graph_params(), **kw)  # type: ignore[arg-type]


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["graph", "catrag"])
def test_local_and_exact_agree_on_the_sample_index(sample_index: str, mode: str) -> None:
    from r2adapter.retrieve.strategies import make_retriever

    exact = make_retriever(mode, sample_index, params=_params(ppr_solver="exact"))
    local = make_retriever(mode, sample_index, params=_params(ppr_solver="local", ppr_r_max=1e-10))
    coarse = make_retriever(mode, sample_index, params=_params(ppr_solver="local", ppr_r_max=1e-2))
    edited = []
    exact.observe = lambda ppr, op, info: edited.append(info.get("edited_columns", 0))  # type: ignore[attr-defined]
    differ = 0
    for q in QUESTIONS:
        vec = exact.encoder.encode_query(q)
        a = exact.scores(vec, None, q)[0]  # type: ignore[attr-defined]
        b = local.scores(vec, None, q)[0]  # type: ignore[attr-defined]
        c = coarse.scores(vec, None, q)[0]  # type: ignore[attr-defined]
        assert np.abs(a - b).sum() < 1e-6
        assert list(np.argsort(-a, kind="stable")[:5]) == list(np.argsort(-b, kind="stable")[:5])
        differ += float(np.abs(a - c).sum()) > 1e-4  # a coarse threshold shows: local ran
    assert differ > 0
    if mode == "catrag":
        assert max(edited) > 0  # the edited operator, not the static one, was solved


@pytest.mark.integration
def test_top_n_seeds_only_the_best_passages(sample_index: str) -> None:
    from r2adapter.retrieve.graph import GraphRetriever, seed_graph

    r = GraphRetriever(sample_index)
    g = r.cache.get(sample_index)
    vec = r.encoder.encode_query(QUESTIONS[1])
    every = seed_graph(g, vec, _params())
    top3 = seed_graph(g, vec, _params(passage_seed_top_n=3))
    assert np.count_nonzero(every.reset[g.n_entities :]) >= len(g.passage_ids) - 1
    seeded = np.flatnonzero(top3.reset[g.n_entities :])
    assert 1 <= len(seeded) <= 3  # the third is the min of the three: zero after min-max
    dense = g.passage_emb @ vec
    assert set(seeded) <= set(np.argsort(-dense)[:3].tolist())
    assert np.array_equal(every.reset[: g.n_entities], top3.reset[: g.n_entities])


@pytest.mark.integration
def test_cli_evaluate_retrieval_forces_the_solver(
    sample_index: str, pg_env: dict[str, str], tmp_path: Path
) -> None:
    from tests.conftest import run_cli

    base = ["evaluate", "retrieval", "--dataset", "sample", "--mode", "graph", "--json"]
    reports = {}
    for solver in ("exact", "local"):
        r = run_cli([*base, "--ppr", solver], pg_env)
        assert r.returncode == 0, r.stderr
        reports[solver] = json.loads(r.stdout.strip().splitlines()[-1])
        assert reports[solver]["ppr"]["solver"] == solver
        assert {"recall@5", "fcr@5"} <= set(reports[solver]["modes"]["graph"])
    e, loc = reports["exact"]["modes"]["graph"], reports["local"]["modes"]["graph"]
    assert abs(e["recall@5"] - loc["recall@5"]) <= 0.005 and abs(e["fcr@5"] - loc["fcr@5"]) <= 0.005
    r = run_cli([*base, "--ppr", "approximate"], pg_env)
    assert r.returncode == 2 and "invalid choice: 'approximate'" in r.stderr
    home = tmp_path / "home"
    home.mkdir()
    (home / "params.yaml").write_text("graph:\n  ppr_r_max: 0.5\n")
    r = run_cli([*base, "--ppr", "local"], {**pg_env, "R2A_HOME": str(home)})
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0
    assert "graph.ppr_r_max must be in [1e-12, 0.1], not 0.5" in r.stderr
