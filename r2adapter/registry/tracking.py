"""MLflow: the local store (sqlite under mlruns/) or a server, one experiment per router.

The local store is a folder: `mlflow.db` and, beside it, `artifacts/`. MLflow writes every
artifact location into the database as an absolute `file://` URI (the experiment's, each
run's, each logged model's, each model version's), so a copied or moved checkout would
read its models from, and train into, the original's folder (issue 44, item 13). Each open
checks the experiment's recorded folder against the one beside the database and, when the
store has moved, rewrites the recorded prefix in one transaction: the locations follow the
folder. A moved store that cannot be written (a read-only mount) is a one-line error, never
a silent read of another checkout's files.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import warnings
from pathlib import Path

from r2adapter.config import settings
from r2adapter.errors import R2AError
from r2adapter.route.kinds import TRAINED_ROUTERS

EXPERIMENT = "r2a-router"
MODEL_NAMES = {name: kind.model for name, kind in TRAINED_ROUTERS.items()}  # router → model

# where MLflow's sqlite schema records an artifact URI (MLflow 3: logged models carry their own)
URI_COLUMNS = (
    ("experiments", "artifact_location"),
    ("runs", "artifact_uri"),
    ("logged_models", "artifact_location"),
    ("model_versions", "source"),
    ("model_versions", "storage_location"),
)


def artifact_root(db: Path) -> str:
    """The artifact folder of the sqlite store `db`, as MLflow records it: beside the file."""
    return (db.resolve().parent / "artifacts").as_uri()


def relocate(db: Path) -> str | None:
    """Point the artifact locations recorded in the sqlite store `db` at the folder beside
    it; returns the prefix replaced (None: nothing recorded, or already there)."""
    if not db.is_file():
        return None
    new = artifact_root(db)
    con = sqlite3.connect(db, timeout=30)
    try:
        old = _recorded_root(con)
        if old is None or old == new:
            return None
        try:
            con.execute("BEGIN IMMEDIATE")  # a second process opening the copy waits here
            old = _recorded_root(con)  # ... and finds it done
            if old is None or old == new:
                con.rollback()
                return None
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
            for table, column in URI_COLUMNS:
                if table not in tables:
                    continue
                con.execute(
                    f"UPDATE {table} SET {column} = ? || substr({column}, ?) "
                    f"WHERE {column} = ? OR substr({column}, 1, ?) = ?",
                    (new, len(old) + 1, old, len(old) + 1, old + "/"),
                )
            con.commit()
        except sqlite3.OperationalError as e:
            con.rollback()
            raise R2AError(
                f"the MLflow store {db} was moved from {old} and cannot be rewritten "
                f"({str(e).splitlines()[0]}): copy it where it can be written, or set "
                "MLFLOW_TRACKING_URI to the original"
            ) from None
        return old
    finally:
        con.close()


def _recorded_root(con: sqlite3.Connection) -> str | None:
    try:
        row = con.execute(
            "SELECT artifact_location FROM experiments WHERE name = ?", (EXPERIMENT,)
        ).fetchone()
    except sqlite3.OperationalError:  # no schema yet: MLflow makes it
        return None
    return str(row[0]) if row and str(row[0]).startswith("file://") else None


def mlflow_setup() -> str:
    """Point MLflow at the configured store; returns the experiment id."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")
    logging.getLogger("mlflow").setLevel(logging.ERROR)
    logging.getLogger("alembic").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module="mlflow")
    import mlflow

    uri = settings().mlflow_uri
    db: Path | None = None
    if uri.startswith("sqlite:///"):
        db = Path(uri.removeprefix("sqlite:///"))
        # the store's own folder, and only when missing: a reader of a store mounted
        # read-only (the serving container on a developer's mlruns) writes nothing
        if not db.parent.is_dir():
            db.parent.mkdir(parents=True, exist_ok=True)
        relocate(db)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    try:
        exp = mlflow.get_experiment_by_name(EXPERIMENT)
        if exp is not None:
            return str(exp.experiment_id)
        location = artifact_root(db) if db is not None else None
        return str(mlflow.create_experiment(EXPERIMENT, artifact_location=location))
    except Exception as e:
        raise R2AError(
            f"MLflow store unreachable at {uri}: {str(e).splitlines()[0][:200]}"
        ) from None
