"""ADR against a real Postgres: the hypergraph built by `r2a index --adr` inside one
transaction, a second run adding nothing, the operators on it, the labels, the report's
rows, and the bad inputs (no hypergraph, a failed write)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TABLES = (
    "adr_builds",
    "adr_hyperedges",
    "adr_hyperedge_members",
    "adr_insight_vertices",
    "adr_insight_edges",
    "adr_insight_edge_members",
    "adr_entity_embeddings",
)


def _counts() -> dict[str, int]:
    from r2adapter.store.db import connection

    with connection() as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}


def test_adr_end_to_end(mini_indexed: str, pg_env: dict[str, str]) -> None:
    name = Path(mini_indexed).name
    # no hypergraph yet: one line naming the command that builds it, exit 1
    for args in (
        ["adr", "retrieve", "--dataset", name, "--operator", "simple", "who?"],
        ["retrieve", "--dataset", name, "--mode", "adr_simple", "who?"],
    ):
        r = run_cli(args, pg_env)
        assert r.returncode == 1
        assert r.stderr.strip().count("\n") == 0
        assert f"r2a index --dataset {name} --adr" in r.stderr

    r = run_cli(["index", "--dataset", mini_indexed, "--openie", "precomputed", "--adr"], pg_env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "index up to date" in r.stdout  # the graph was current: only the hypergraph added
    built = _counts()
    assert all(built[t] > 0 for t in TABLES), built
    r = run_cli(["index", "--dataset", mini_indexed, "--openie", "precomputed", "--adr"], pg_env)
    assert r.returncode == 0 and _counts() == built  # a second run adds nothing

    from r2adapter.adr.store import read_hypergraph, require_hypergraph

    v = require_hypergraph(name)
    h = read_hypergraph(v.id)
    assert min(len(m) for m in h.hyperedge_members) >= 3  # |e| ≥ 3
    members = sorted(x for ms in h.edge_members for x in ms)
    assert members == list(range(len(h.insight_text)))  # each vertex in one deep edge (π 1:1)

    _operators(name)
    _labels(name, pg_env)
    _registry(name, pg_env)
    _failed_write_leaves_the_build(v.id, built)


def _operators(name: str) -> None:
    from r2adapter.adr.operators import AdrOperators
    from r2adapter.config import adr_params
    from r2adapter.index.encoder import get_encoder
    from r2adapter.store.db import connection
    from r2adapter.store.graph_store import as_array

    p = adr_params()
    ops = AdrOperators(name, p)
    q = "Who produced the album that included the song Thinking Out Loud?"
    qvec = get_encoder().encode_query(q)
    simple, moderate, complex_ = (ops.run(n, qvec) for n in ("simple", "moderate", "complex"))
    # eq. 2, known answer: the anchors are the k_e entities nearest by exact cosine
    with connection() as conn:
        rows = conn.execute(
            "SELECT entity_id, embedding FROM adr_entity_embeddings WHERE index_version = %s",
            (ops.ix.version,),
        ).fetchall()
    emb = np.stack([as_array(e) for _, e in rows])
    ids = np.array([i for i, _ in rows])
    exact = ids[np.argsort(-(emb @ qvec))]
    names = ops.ix.entity_names
    # anchor_filter specific (the default): the k_e nearest specific entities
    assert p.anchor_filter == "specific"
    spec = [i for i in exact if ops.ix.entity_specific[i]][: p.k_e]
    assert set(simple.anchors) == {names[i] for i in spec}
    # none: the old anchors, the k_e nearest phrase nodes of any kind
    every = AdrOperators(name, replace(p, anchor_filter="none"))
    assert set(every.run("simple", qvec).anchors) == {names[i] for i in exact[: p.k_e]}
    # the hub limit is the Leiden step's: at 0, no entity in an insight anchors
    none_in_insights = AdrOperators(name, replace(p, max_entity_insights=0))
    ix0 = none_in_insights.ix
    anchors0 = none_in_insights.run("simple", qvec, q).anchors
    assert anchors0 and all(not ix0.entity_hyperedges[ix0.entity_id[a]] for a in anchors0)
    assert ix0.entity_specific.sum() < ops.ix.entity_specific.sum()
    assert simple.insights == [] and 1 <= len(complex_.insights) <= p.k_d
    assert not p.max_up_edges or len(moderate.insights) <= p.max_up_edges
    assert moderate.facts == simple.facts  # moderate keeps the simple context
    from r2adapter.adr.build import token_counter

    count = token_counter(p)
    for c in (simple, moderate, complex_):
        assert 0 < len(c.passages) <= p.max_passages
        scores = [s for _, s in c.passages]
        assert scores == sorted(scores, reverse=True)
        # the paper's context: facts and narratives, no passage text (context_passages 0)
        assert p.context_passages == 0 and c.tokens == sum(count(c.facts + c.insights))
        assert c.ms > 0
    # lexical anchoring: the entity the question names comes first, eq. 2 fills the rest
    lexical = ops.run("simple", qvec, q)
    assert lexical.anchors[0] == "thinking out loud" and len(lexical.anchors) == p.k_e


def _labels(name: str, env: dict[str, str]) -> None:
    from r2adapter.adr.evaluate import adr_routers, merge_adr_rows
    from r2adapter.adr.labels import adr_label_path, read_adr_labels
    from r2adapter.data.metrics import full_chain, recall_at_k

    r = run_cli(["adr", "label", "--dataset", name, "--json"], env, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    labels = read_adr_labels(name, adr_label_path(name))
    assert summary["n_queries"] == len(labels) > 0
    for lab in labels[:10]:
        for o in lab.outcomes.values():
            assert o.recall == recall_at_k(o.passages, lab.gold, 5)
            assert o.full == full_chain(o.passages, lab.gold, 5)
    ids = [lab.query_id for lab in labels]
    rows, notes = adr_routers(name, "cv5", ids)
    assert {"adr", "always_adr_simple", "always_adr_moderate", "always_adr_complex"} <= set(rows)
    assert sum(rows["adr"]["share"].values()) == pytest.approx(1.0)
    assert rows["always_adr_simple"]["recall"] == pytest.approx(
        summary["operators"]["simple"]["recall"]
    )
    assert any("fallback share" in n for n in notes)
    routers: dict[str, dict] = {}
    report_notes: list[str] = []
    merge_adr_rows("no_such_dataset", "cv5", ids, routers, report_notes)
    assert routers == {} and "r2a adr label --dataset no_such_dataset" in report_notes[0]


def _registry(name: str, env: dict[str, str]) -> None:
    """`r2a train --router adr` registers the classifier trained on the ADR labels, the gate
    promotes the first one, a second training is gated against it; `r2a retrieve --mode adr`
    then routes through the champion, `--mode adr_complex` runs the operator."""
    r = run_cli(["retrieve", "--dataset", name, "--mode", "adr", "who?"], env)
    assert r.returncode == 1 and "r2a train --dataset D --router adr" in r.stderr
    out = Path(env["R2A_HOME"]) / "adr_report.json"

    def step(*args: str) -> dict:
        r = run_cli([*args, "--report", str(out)], env, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        return json.loads(out.read_text())

    trained = step("train", "--dataset", name, "--router", "adr")
    assert trained["router"] == "adr" and 0 <= trained["test_recall"] <= 1
    first = step("promote", "--router", "adr")
    assert first["promoted"] and "first model" in first["reasons"][0]
    # outside the service a run reads the champion of its start, loaded once (the service
    # follows promotions through its champion table: tests/test_service_hardening.py)
    from r2adapter.adr.retriever import registered_champion

    run = registered_champion()
    v1 = run().version
    step("train", "--dataset", name, "--router", "adr")
    assert registered_champion()().version == v1  # a candidate: the champion stays
    second = step("promote", "--router", "adr")
    assert second["promoted"] and second["champion_metrics"] == second["candidate_metrics"]
    assert run().version == v1 and registered_champion()().version == str(int(v1) + 1)
    for mode in ("adr", "adr_complex"):
        r = run_cli(["retrieve", "--dataset", name, "--mode", mode, "--json", "Who?"], env)
        assert r.returncode == 0, r.stderr[-2000:]
        hits = json.loads(r.stdout.strip().splitlines()[-1])["hits"]
        assert 0 < len(hits) <= 5 and all(h["title"] for h in hits)


def _failed_write_leaves_the_build(version: int, before: dict[str, int]) -> None:
    """A write that fails half-way (here: a narrative without an embedding) rolls back:
    the stored build stays as it was."""
    from r2adapter.adr.hypergraph import DualHypergraph, Hyperedge
    from r2adapter.adr.store import write_hypergraph_alone

    bad = DualHypergraph(
        [Hyperedge("p", "s", (0, 1, 2), "x")], [1], np.ones((1, 384)), [[0]], np.ones(1),
        ["n", "m"], [1, 1], np.ones((1, 384)),
    )  # fmt: skip
    with pytest.raises(ValueError):
        write_hypergraph_alone(version, "broken", bad, np.ones((3, 384)), {})
    assert _counts() == before
