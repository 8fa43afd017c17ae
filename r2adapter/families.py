"""The one table of router families (r2adapter/route/family.py), built here where every
family is visible: the two-way routers of route/kinds.py (r2a, r2a_embed; twoway/family.py),
the k-way router (kway/registry.py) and ADR's head (adr/registry.py). `r2a train/promote
--router`, the steps, the loop and `r2a models` read it."""

from __future__ import annotations

from r2adapter.adr.registry import AdrFamily
from r2adapter.errors import R2AError
from r2adapter.kway.registry import KwayFamily
from r2adapter.route.family import RouterFamily
from r2adapter.route.kinds import TRAINED_ROUTERS
from r2adapter.twoway.family import TwoWayFamily

FAMILIES: dict[str, RouterFamily] = {
    **{k.name: TwoWayFamily(k) for k in TRAINED_ROUTERS.values()},
    "kway": KwayFamily(),
    "adr": AdrFamily(),
}


def family(name: str) -> RouterFamily:
    """The family registered as `name`; an unknown one is a one-line error."""
    if name not in FAMILIES:
        raise R2AError(f"unknown router '{name}': choose one of {', '.join(FAMILIES)}")
    return FAMILIES[name]
