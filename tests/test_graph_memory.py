"""A graph too large for memory at load (issue 18, "Bad input"): the estimate before the
load (r2adapter/retrieve/graph_memory.py), the one-line refusal, and that nothing is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from r2adapter.config import GraphParams
from r2adapter.errors import ResourceError
from r2adapter.retrieve import graph_memory as gm
from r2adapter.store.graph_store import IndexVersion
from tests.conftest import run_cli

pytestmark = pytest.mark.unit  # the tests on Postgres (pg_env) are integration

# 1M passages of the 2Wiki index's shape (docs/scaling.md): 7.6 entities, 10.4 facts,
# 11.3 passage-entity edges and 20.8 synonym edges per passage
BIG = IndexVersion(
    7, "big", "all-MiniLM-L6-v2", 384, "spacy", "",
    {"passages": 1_000_000, "entities": 7_600_000, "facts": 10_400_000,
     "passage_entity_edges": 11_300_000, "synonym_edges": 20_800_000},
)  # fmt: skip
HEAD = (
    "the graph of 'big' (index version 7: 8,600,000 nodes, 42,500,000 edges, 10,400,000 facts)"
    " needs ≈ 106.6 GB of memory to load with local PPR (reading embeddings 70.0 GB, embeddings"
    " 17.5 GB, python rows 11.4 GB, transition 4.8 GB, edge list 1.5 GB, local PPR 1.3 GB),"
    " over the limit of "
)


def test_estimate_is_linear_in_the_graph_and_local_ppr_adds_its_copy() -> None:
    size = gm.GraphSize.of(BIG)
    assert (size.nodes, size.edges) == (8_600_000, 42_500_000)
    exact = gm.estimate_bytes(size, "exact")
    double = gm.GraphSize(
        *(2 * getattr(size, f) for f in ("entities", "passages", "facts", "passage_edges")),
        2 * size.synonyms,
        384,
    )
    assert sum(gm.estimate_bytes(double).values()) == 2 * sum(exact.values())
    local = gm.estimate_bytes(size, "local")
    assert local.keys() - exact.keys() == {"local PPR"}
    # float64 transposed transition (12 bytes a stored entry, 2 per edge) and 32 bytes a node
    assert local["local PPR"] == 2 * size.edges * 12 + 32 * size.nodes
    # the embeddings dominate at this size: 11.4M × 384 float32 kept, and while they are
    # read from Postgres their text form and a row array each (16 bytes a dimension)
    assert exact["embeddings"] == 11_400_000 * 384 * 4
    assert exact["reading embeddings"] == 4 * exact["embeddings"]


def test_limit_is_the_setting_or_a_share_of_what_is_available(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert gm.memory_limit(GraphParams(load_memory_limit_gb=2.5)) == (
        2_500_000_000,
        "graph.load_memory_limit_gb",
    )
    monkeypatch.setattr(gm, "available_bytes", lambda: 100_000_000_000)
    assert gm.memory_limit(GraphParams()) == (
        80_000_000_000,
        "80% of the 100.0 GB available; graph.load_memory_limit_gb sets it",
    )
    with pytest.raises(ResourceError, match="over the limit of 80.0 GB \\(80% of the 100.0 GB"):
        gm.check_graph_memory(BIG, GraphParams())
    monkeypatch.setattr(gm, "available_bytes", lambda: None)  # unknown: no check
    assert gm.memory_limit(GraphParams()) == (None, "")
    gm.check_graph_memory(BIG, GraphParams())


def test_available_memory_is_read_from_the_machine() -> None:
    total = int(Path("/proc/meminfo").read_text().split()[1]) * 1024  # MemTotal
    avail = gm.available_bytes()
    assert avail is not None and 0 < avail <= total


def test_a_graph_over_the_limit_is_refused_in_one_line() -> None:
    gm.check_graph_memory(BIG, GraphParams(load_memory_limit_gb=107))  # fits: no error
    with pytest.raises(ResourceError) as e:
        gm.check_graph_memory(BIG, GraphParams(load_memory_limit_gb=16))
    assert str(e.value) == HEAD + (
        "16.0 GB (graph.load_memory_limit_gb): raise the limit where the machine has the memory"
        " or serve it from a larger one (graph.ppr_solver does not bring it under: both"
        " solvers hold the whole graph)"
    )
    # without local PPR's copy it would fit: the message names the solver setting
    with pytest.raises(ResourceError) as e:
        gm.check_graph_memory(BIG, GraphParams(load_memory_limit_gb=106))
    assert str(e.value).endswith(
        "106.0 GB (graph.load_memory_limit_gb): raise the limit where the machine has the memory"
        " or serve it from a larger one, or set graph.ppr_solver: exact, which fits without"
        " local PPR's 1.3 GB (but touches every edge per query)"
    )
    gm.check_graph_memory(BIG, GraphParams(load_memory_limit_gb=106, ppr_solver="exact"))


# ---- against Postgres -----------------------------------------------------------------------


def test_load_refuses_before_reading_anything(
    mini_indexed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from r2adapter.retrieve import graph_index
    from r2adapter.store import graph_store as gs

    version = gs.require_version(Path(mini_indexed).name)
    loaded = graph_index.load_graph_index(version, GraphParams(load_memory_limit_gb=1.0))
    size = gm.GraphSize.of(version)
    assert loaded.n_nodes == size.nodes and len(loaded.fact_emb) == size.facts

    def no_read(_: int) -> None:
        raise AssertionError("the graph's rows were read before the memory check")

    monkeypatch.setattr(gs, "read_graph_rows", no_read)
    with pytest.raises(ResourceError) as e:
        graph_index.load_graph_index(version, GraphParams(load_memory_limit_gb=1e-6))
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(
        f"the graph of 'musmini' (index version {version.id}: {size.nodes:,} nodes, "
        f"{size.edges:,} edges, {size.facts:,} facts) needs ≈ "
    )
    assert "over the limit of 1 kB (graph.load_memory_limit_gb)" in msg


def test_cli_says_so_in_one_line(mini_indexed: str, tmp_path: Path, pg_env: dict[str, str]) -> None:
    (tmp_path / "params.yaml").write_text("graph:\n  load_memory_limit_gb: 0.000001\n")
    env = {**pg_env, "R2A_HOME": str(tmp_path)}
    r = run_cli(
        ["retrieve", "--dataset", mini_indexed, "--mode", "graph", "Who founded the company?"],
        env,
        timeout=300,
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr
    line = r.stderr.strip().splitlines()[-1]  # after the encoder's progress bar
    assert line.startswith("error: the graph of 'musmini' (index version ")
    assert "over the limit of 1 kB (graph.load_memory_limit_gb): raise the limit" in line
