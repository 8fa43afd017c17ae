"""Label rules for the router's training corpus (R²Adapter §3.2), as pure functions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from r2adapter.data.metrics import average_rank, full_chain, recall_at_k


@dataclass(frozen=True)
class Label:
    rank_dense: float
    rank_graph: float
    y_dense: bool
    y_graph: bool

    @property
    def preference(self) -> str:
        # only graph suitable → graph; both suitable → dense, the cheaper paradigm
        return "graph" if self.y_graph and not self.y_dense else "dense"


def avg_rank_rule(
    dense: Sequence[str],
    graph: Sequence[str],
    gold: Sequence[str],
    depth: int = 200,
    top_k: int = 5,
) -> Label:
    """The paper's rule: the lower average gold rank is suitable; equal ranks, both."""
    rd, rg = average_rank(dense, gold, depth), average_rank(graph, gold, depth)
    return Label(rd, rg, rd <= rg, rg <= rd)


def topk_first_rule(
    dense: Sequence[str],
    graph: Sequence[str],
    gold: Sequence[str],
    depth: int = 200,
    top_k: int = 5,
) -> Label:
    """All gold in the top k decides; when both or neither have it, average rank breaks the
    tie. Aligns labels with what the service returns (top-k passages)."""
    rd, rg = average_rank(dense, gold, depth), average_rank(graph, gold, depth)
    fd, fg = full_chain(dense, gold, top_k), full_chain(graph, gold, top_k)
    if fd != fg:
        return Label(rd, rg, bool(fd), bool(fg))
    return Label(rd, rg, rd <= rg, rg <= rd)


def recall_first_rule(
    dense: Sequence[str],
    graph: Sequence[str],
    gold: Sequence[str],
    depth: int = 200,
    top_k: int = 5,
) -> Label:
    """Cost-aware: Recall@k decides; equal Recall@k makes both suitable, so the preference
    goes to dense, the cheaper paradigm. Graph is preferred only where it returns more gold
    passages in the top k than dense, which is what a graph call must buy."""
    rd, rg = average_rank(dense, gold, depth), average_rank(graph, gold, depth)
    kd, kg = recall_at_k(dense, gold, top_k), recall_at_k(graph, gold, top_k)
    if kd != kg:
        return Label(rd, rg, kd > kg, kg > kd)
    return Label(rd, rg, True, True)


RULES = {
    "avg_rank": avg_rank_rule,
    "topk_first": topk_first_rule,
    "recall_first": recall_first_rule,
}
