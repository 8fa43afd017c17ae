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
