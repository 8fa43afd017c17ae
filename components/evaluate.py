"""evaluate: the reports of `r2a evaluate retrieval` (dense vs graph: Recall@2/5, FCR@5,
latency) and `r2a evaluate routing` (baselines, oracle and the registered champions on the
test split), as Kubeflow metrics plus the full JSON reports."""

from kfp.dsl import Artifact, Metrics, Output

from components._base import r2a_component


@r2a_component
def evaluate(dataset: str, metrics: Output[Metrics], report: Output[Artifact]) -> float:
    """Returns the champion's hybrid Recall@5 on the test split (-1 without a champion)."""
    import json
    import numbers

    from r2adapter import steps

    def log(prefix: str, values: dict) -> None:
        for key, value in values.items():
            if isinstance(value, numbers.Real) and not isinstance(value, bool):
                metrics.log_metric(f"{prefix}_{key.replace('@', '_at_')}", round(float(value), 6))

    retrieval = steps.evaluate_retrieval(dataset)
    for mode, m in retrieval["modes"].items():
        log(f"retrieval_{mode}", m)
    routing = steps.evaluate_routing(dataset, "test")
    for router, m in routing["routers"].items():
        log(f"routing_{router}", m)
    log("pgr", {k: v for k, v in routing["pgr"].items() if v is not None})
    for note in routing["notes"]:
        print(f"note: {note}")
    with open(report.path, "w") as f:
        json.dump({"retrieval": retrieval, "routing": routing}, f, indent=2, default=str)
    report.metadata.update(
        {"dataset": routing["dataset"], "champion_versions": routing["champion_versions"]}
    )
    champion = routing["routers"].get("r2a") or routing["routers"].get("r2a_embed")
    return float(champion["recall@5"]) if champion else -1.0
