"""The two-way routers' columns in their registered MLflow model (the one pyfunc,
r2adapter/registry/pyfunc.py): p_dense, p_graph and the decision per query, whether eq. 7
rewrites it, and τ and ε, which live inside the model."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:
    from r2adapter.route.trained import TrainedRouter


class TwoWayColumns:
    output: ClassVar[dict[str, str]] = {
        "p_dense": "double",
        "p_graph": "double",
        "decision": "string",
        "rewrite": "boolean",
        "tau": "double",
        "epsilon": "double",
    }

    def load(self, folder: Path) -> TrainedRouter:
        from r2adapter.retrieve.graph_index import GRAPHS
        from r2adapter.route.trained import TrainedRouter

        router = TrainedRouter.load(folder)
        if router.cfg.corpus:  # its features read the corpus it was trained on
            router.bind(router.cfg.corpus, GRAPHS)
        return router

    def frame(self, router: Any, queries: list[str]) -> dict[str, Any]:
        d = router.decide(queries)  # R²Adapter eqs. 4 and 7
        return {
            "p_dense": np.asarray(d.p_dense, dtype=np.float64),
            "p_graph": np.asarray(d.p_graph, dtype=np.float64),
            "decision": np.where(d.graph, "graph", "dense"),
            "rewrite": np.asarray(d.rewrite, dtype=bool),
            "tau": float(d.tau),
            "epsilon": float(d.epsilon),
        }


TWO_WAY_COLUMNS = TwoWayColumns()
