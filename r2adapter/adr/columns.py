"""ADR's intent classifier's columns in its registered MLflow model (the one pyfunc,
r2adapter/registry/pyfunc.py): the operator that runs, the classifier's class, its
confidence and whether eq. 1's fallback decided."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from r2adapter.adr.router import AdrRouter


class AdrColumns:
    output: ClassVar[dict[str, str]] = {
        "operator": "string",
        "predicted": "string",
        "confidence": "double",
        "fallback": "boolean",
    }

    def load(self, folder: Path) -> AdrRouter:
        return AdrRouter.load(folder)

    def frame(self, router: AdrRouter, queries: list[str]) -> dict[str, Any]:
        from r2adapter.index.encoder import get_encoder

        ds = router.decide(get_encoder(router.encoder).encode(queries))
        return {
            "operator": [d.operator for d in ds],
            "predicted": [d.predicted for d in ds],
            "confidence": [float(d.confidence) for d in ds],
            "fallback": [bool(d.fallback) for d in ds],
        }


ADR_COLUMNS = AdrColumns()
