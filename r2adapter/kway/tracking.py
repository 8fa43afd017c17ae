"""The k-way report saved under reports/routing/ and logged to MLflow (one run per report)."""

from __future__ import annotations

import json
from typing import Any

from r2adapter.config import settings
from r2adapter.data.metrics import metric_key

LOGGED = ("recall", "fcr", "mean_passages", "mean_tokens", "mean_ms", "graph_usage")


def save_and_log(report: dict[str, Any]) -> dict[str, str]:
    """reports/routing/kway_<dataset>_<protocol>.{json,png}; an MLflow run in the
    routers' experiment with each router's figures as metrics and both files as artifacts."""
    from r2adapter.kway.plots import plot_frontier

    root = settings().root / "reports" / "routing"
    stem = f"kway_{report['dataset']}_{report['protocol']}"
    js, png = root / f"{stem}.json", root / f"{stem}.png"
    root.mkdir(parents=True, exist_ok=True)
    tmp = js.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    tmp.replace(js)
    plot_frontier(report, png)
    out = {
        "json": str(js.relative_to(settings().root)),
        "plot": str(png.relative_to(settings().root)),
    }
    try:
        import mlflow

        from r2adapter.registry.tracking import mlflow_setup

        exp = mlflow_setup()
        with mlflow.start_run(experiment_id=exp, run_name=f"evaluate-{stem}") as run:
            mlflow.set_tags(
                {
                    "kind": "kway-evaluation",
                    "dataset": report["dataset"],
                    "protocol": report["protocol"],
                }
            )
            mlflow.log_params(
                {
                    "budget": report["budget"],
                    "max_passages": report["max_passages"],
                    "n_queries": report["n_queries"],
                }
            )
            mlflow.log_metrics(
                {
                    metric_key(f"{name}.{k}"): float(v)
                    for name, r in report["routers"].items()
                    for k, v in r.items()
                    if k in LOGGED
                }
            )
            mlflow.log_artifact(str(js))
            mlflow.log_artifact(str(png))
            out["mlflow_run"] = run.info.run_id
    except Exception as e:  # the report stands without its MLflow copy; say so
        out["mlflow_error"] = str(e).splitlines()[0][:200]
    return out
