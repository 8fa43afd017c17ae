"""Where the PPR mass sits (retrieve/graph.py `ppr_structure`): the all-node reading and the
entity-normalised one (CatRAG's hubs are bridge entities), checked by hand on a small graph."""

from __future__ import annotations

import numpy as np
import pytest

from r2adapter.retrieve.graph import ppr_structure
from r2adapter.retrieve.graph_index import FACT_EDGE, PASSAGE_EDGE, Edges, Operator


def _star(n_entities: int) -> tuple[Operator, Operator]:
    """Entity 0 is a hub tied to entities 1..n-1 by facts, and every entity sits in its own
    passage (nodes n..2n-1); passage nodes have strength 1, entity 0 strength n."""
    n = n_entities
    src = [0] * (n - 1) + list(range(n))
    dst = list(range(1, n)) + list(range(n, 2 * n))
    kind = [FACT_EDGE] * (n - 1) + [PASSAGE_EDGE] * n
    edges = Edges(np.array(src), np.array(dst), np.ones(len(src)), np.array(kind))
    return Operator.build(2 * n, edges, 1.0, 1.0, n_entities=n), Operator.build(
        2 * n, edges, 1.0, 1.0
    )


@pytest.mark.unit
def test_entity_reading_renormalises_over_phrase_nodes() -> None:
    op, unknown = _star(200)  # 1% of 200 phrase nodes: the hub alone
    assert op.entity_hubs.sum() == 2 and op.entity_hubs[0]
    rng = np.random.default_rng(0)
    ppr = rng.random(400)
    ppr /= ppr.sum()
    out = ppr_structure(ppr, op)
    ent = ppr[:200]
    top2 = np.argsort(-op.strength[:200], kind="stable")[:2]
    assert out["hub_mass_entities"] == pytest.approx(ent[top2].sum() / ent.sum())
    assert out["ppr_weighted_strength_entities"] == pytest.approx(
        float(ent @ op.strength[:200]) / ent.sum()
    )
    assert out["entity_mass"] == pytest.approx(ent.sum())
    # the all-node reading is unchanged and its hubs may be passages or entities alike
    assert out["hub_mass"] == pytest.approx(ppr[op.hubs].sum())
    assert out["ppr_weighted_strength"] == pytest.approx(float(ppr @ op.strength))
    # an operator that does not know its phrase nodes gives the all-node reading only
    assert set(ppr_structure(ppr, unknown)) == {"hub_mass", "ppr_weighted_strength"}


@pytest.mark.unit
def test_mass_on_passages_only_leaves_the_entity_reading_out() -> None:
    """All of the mass on passage nodes: the phrase nodes' share is 0 and the renormalised
    figures are undefined (left out, not 0/0)."""
    op, _ = _star(10)
    ppr = np.zeros(20)
    ppr[10:] = 0.1
    out = ppr_structure(ppr, op)
    assert out["entity_mass"] == 0.0
    assert "hub_mass_entities" not in out and "ppr_weighted_strength_entities" not in out
    # all of it on the hub entity: the entity reading is 1 and the hub's strength
    ppr = np.zeros(20)
    ppr[0] = 1.0
    out = ppr_structure(ppr, op)
    assert out["hub_mass_entities"] == 1.0
    assert out["ppr_weighted_strength_entities"] == pytest.approx(op.strength[0]) == 10.0
