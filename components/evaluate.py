"""evaluate: the reports of `r2a evaluate retrieval` (dense, graph and catrag: Recall@2/5,
FCR@2/5, hub mass, latency) and `r2a evaluate routing` (baselines, oracle and the
registered champions on the test split), as Kubeflow metrics plus the full JSON reports,
and their page for the Kubeflow UI (`r2a evaluate report`'s: tables and the routing plot)."""

from kfp.dsl import Artifact, Markdown, Metrics, Output

from components._base import r2a_component


@r2a_component
def evaluate(
    dataset: str, metrics: Output[Metrics], report: Output[Artifact], summary: Output[Markdown]
) -> float:
    """Returns the champion's hybrid Recall@5 on the test split (-1 without a champion).
    `summary`: the reports' tables and the routing plot, the plot inside the page (base64)."""
    import json
    import tempfile
    from pathlib import Path

    from r2adapter import steps
    from r2adapter.evaluate.plots import plot_routing
    from r2adapter.evaluate.report_page import data_uri, markdown
    from r2adapter.evaluate.reports import RetrievalReport, RoutingReport
    from r2adapter.route.kinds import TRAINED_ROUTERS

    retrieval = steps.evaluate_retrieval(dataset)
    routing = steps.evaluate_routing(dataset, "test")
    for result in (RetrievalReport(retrieval), RoutingReport(routing)):
        for key, value in result.metrics().items():
            metrics.log_metric(key, value)
    for note in routing["notes"]:
        print(f"note: {note}")
    with open(report.path, "w") as f:
        json.dump({"retrieval": retrieval, "routing": routing}, f, indent=2, default=str)
    report.metadata.update(
        {"dataset": routing["dataset"], "champion_versions": routing["champion_versions"]}
    )
    with tempfile.TemporaryDirectory() as tmp:
        plot = data_uri(plot_routing(routing, Path(tmp) / "routing.png"))
    with open(summary.path, "w") as f:
        f.write(markdown(retrieval, routing, plots={"routing": plot}))
    # the first trained router (the loop's order) the report could score
    champion = next(
        (routing["routers"][k] for k in TRAINED_ROUTERS if k in routing["routers"]), None
    )
    return float(champion["recall@5"]) if champion else -1.0
