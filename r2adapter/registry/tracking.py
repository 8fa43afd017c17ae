"""MLflow: the local store (sqlite under mlruns/) or a server, one experiment per router."""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

from r2adapter.config import settings
from r2adapter.errors import R2AError
from r2adapter.route.kinds import TRAINED_ROUTERS

EXPERIMENT = "r2a-router"
MODEL_NAMES = {name: kind.model for name, kind in TRAINED_ROUTERS.items()}  # router → model


def mlflow_setup() -> str:
    """Point MLflow at the configured store; returns the experiment id."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")
    logging.getLogger("mlflow").setLevel(logging.ERROR)
    logging.getLogger("alembic").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module="mlflow")
    import mlflow

    uri = settings().mlflow_uri
    if uri.startswith("sqlite:///"):
        # the store's own folder, and only when missing: a reader of a store mounted
        # read-only (the serving container on a developer's mlruns) writes nothing
        folder = Path(uri.removeprefix("sqlite:///")).parent
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    try:
        exp = mlflow.get_experiment_by_name(EXPERIMENT)
        if exp is not None:
            return str(exp.experiment_id)
        location = None
        if uri.startswith("sqlite:///"):
            location = (settings().root / "mlruns" / "artifacts").resolve().as_uri()
        return str(mlflow.create_experiment(EXPERIMENT, artifact_location=location))
    except Exception as e:
        raise R2AError(
            f"MLflow store unreachable at {uri}: {str(e).splitlines()[0][:200]}"
        ) from None
