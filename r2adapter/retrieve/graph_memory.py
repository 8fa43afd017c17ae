"""The memory a graph index takes at load, estimated from its counts before anything is
read (issue 18, "a graph too large for memory at load"): a graph over the limit is refused
with one line instead of a process the kernel kills halfway through the load.

`load_graph_index` holds, near its peak, the components below: the rows as Python objects
(the cursor's tuples and the edge lists built from them), the passage and fact embeddings
(float32, and while they are read their text form from Postgres and one array per row:
the largest part), the edge list as arrays, and the transition with its construction's
temporaries (COO → CSR in float64, then the float32 copy kept). Local PPR adds a float64
copy of the transposed transition and a workspace per thread at its first query; the
exact solver allocates a few vectors of the graph's size per query, and nothing per graph.
So both solvers hold the whole graph: `graph.ppr_solver` moves the per-query time, not the
memory at load. Checked on the three indexed graphs (`benchmarks/bench_graph_memory.py`:
peak RSS of a fresh process around `load_graph_index`): the estimate is 1.17–1.24× the
measured peak (2Wiki: 644 MB estimated, 518 MB measured), on the safe side.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from r2adapter.config import GraphParams
from r2adapter.errors import ResourceError
from r2adapter.store.graph_store import IndexVersion

DEFAULT_SHARE = 0.8  # graph.load_memory_limit_gb 0: this share of the memory available
# bytes per row held as Python objects during the load (tuples, ints, floats, strings and
# the four edge lists): not measured one by one; with READ_PER_DIM they put the whole
# estimate just above the measured peaks (module docstring)
PY_PER_FACT = 330
PY_PER_PASSAGE_EDGE = 250
PY_PER_SYNONYM = 200
PY_PER_NODE = 120  # entity names, passage ids and titles
READ_PER_DIM = 16  # bytes a dimension of a vector while it is read (text form, row array)


@dataclass(frozen=True)
class GraphSize:
    """What an index version's graph holds (`index_versions.counts`)."""

    entities: int
    passages: int
    facts: int
    passage_edges: int
    synonyms: int
    dim: int

    @classmethod
    def of(cls, version: IndexVersion) -> GraphSize:
        c = version.counts
        return cls(
            int(c.get("entities", 0)),
            int(c.get("passages", 0)),
            int(c.get("facts", 0)),
            int(c.get("passage_entity_edges", 0)),
            int(c.get("synonym_edges", 0)),
            int(version.dim),
        )

    @property
    def nodes(self) -> int:
        return self.entities + self.passages

    @property
    def edges(self) -> int:
        return self.facts + self.passage_edges + self.synonyms


def estimate_bytes(size: GraphSize, solver: str = "exact") -> dict[str, int]:
    """Peak bytes of loading this graph, by component; `solver` "local" adds the push copy
    and one thread's workspace that local PPR allocates at its first query."""
    n, e = size.nodes, size.edges
    nnz = 2 * e  # each undirected edge both ways (duplicate pairs summed: at most this)
    parts = {
        "python rows": size.facts * PY_PER_FACT
        + size.passage_edges * PY_PER_PASSAGE_EDGE
        + size.synonyms * PY_PER_SYNONYM
        + n * PY_PER_NODE,
        # float32 passage and fact vectors kept; while they are read, each row's text form
        # from Postgres (~11 bytes a dimension) and its own array before the stack
        "embeddings": (size.passages + size.facts) * size.dim * 4,
        "reading embeddings": (size.passages + size.facts) * size.dim * READ_PER_DIM,
        # src, dst, kind int64 and weight float64, and the facts' two ends
        "edge list": e * 32 + size.facts * 16,
        # COO → CSR in float64 (row, col int64; data; indices) and the float32 CSR kept,
        # with the node order (perm, inv), strengths and dangling flags
        "transition": nnz * (8 + 8 + 8 + 8 + 12 + 8) + n * 40,
    }
    if solver == "local":
        parts["local PPR"] = nnz * 12 + n * 8 + n * 24  # float64 Pᵀ, degrees, workspace
    return parts


def available_bytes() -> int | None:
    """The memory this process may still take: MemAvailable, and under a cgroup v2 limit
    (a Kubernetes pod's) what is left below it, whichever is smaller; None if unknown."""
    found: list[int] = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    cg = Path("/sys/fs/cgroup")
    try:
        limit = (cg / "memory.max").read_text().strip()
        if limit != "max":
            found.append(int(limit) - int((cg / "memory.current").read_text().strip()))
    except (OSError, ValueError):
        pass
    return max(0, min(found)) if found else None


def memory_limit(p: GraphParams) -> tuple[int | None, str]:
    """The limit in bytes (None: unknown, no check) and how it was set, for the message."""
    if p.load_memory_limit_gb > 0:
        return int(p.load_memory_limit_gb * 1e9), "graph.load_memory_limit_gb"
    avail = available_bytes()
    if avail is None:
        return None, ""
    share = int(DEFAULT_SHARE * avail)
    return share, (
        f"{DEFAULT_SHARE:.0%} of the {_gb(avail)} available; graph.load_memory_limit_gb sets it"
    )


def check_graph_memory(version: IndexVersion, p: GraphParams) -> None:
    """Refuse, in one line, a graph whose load would exceed the limit."""
    from r2adapter.retrieve.ppr import ppr_solver

    size = GraphSize.of(version)
    solver = ppr_solver(p, size.nodes)
    parts = estimate_bytes(size, solver)
    total = sum(parts.values())
    limit, how = memory_limit(p)
    if limit is None or total <= limit:
        return
    top = ", ".join(f"{k} {_gb(v)}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]))
    push = parts.get("local PPR", 0)
    if push and total - push <= limit:
        solvers = (
            f", or set graph.ppr_solver: exact, which fits without local PPR's {_gb(push)} "
            "(but touches every edge per query)"
        )
    else:
        solvers = " (graph.ppr_solver does not bring it under: both solvers hold the whole graph)"
    raise ResourceError(
        f"the graph of {version.dataset!r} (index version {version.id}: {size.nodes:,} nodes, "
        f"{size.edges:,} edges, {size.facts:,} facts) needs ≈ {_gb(total)} of memory to load "
        f"with {solver} PPR ({top}), over the limit of {_gb(limit)} ({how}): raise the limit "
        f"where the machine has the memory or serve it from a larger one{solvers}"
    )


def _gb(n: int) -> str:
    if n >= 1e9:
        return f"{n / 1e9:.1f} GB"
    return f"{n / 1e6:.0f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"
