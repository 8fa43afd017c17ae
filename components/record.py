"""record_run: the pipeline's exit handler (pipelines/retrain.py wraps every task in
`dsl.ExitHandler`), so it runs after the run ends, succeeded, failed or cancelled. It
records the outcome where users look: an MLflow run in the experiment `r2a-pipeline` with
status FAILED (KILLED, FINISHED) and the tag `r2a.pipeline_state`
(r2adapter/registry/pipeline_runs.py), a Markdown summary in the Kubeflow UI, and its one
line in the task's log and output."""

from kfp import dsl
from kfp.dsl import Markdown, Output

from components._base import r2a_component


@r2a_component
def record_run(
    status: dsl.PipelineTaskFinalStatus, pipeline_run: str, summary: Output[Markdown]
) -> str:
    from r2adapter.registry.pipeline_runs import PipelineOutcome, record

    outcome = PipelineOutcome(
        state=status.state,
        kfp_run=pipeline_run,
        job=status.pipeline_job_resource_name or "",
        task=status.pipeline_task_name or "",
        error=status.error_message or "",
    )
    line = outcome.line()
    print(line)  # first, so that the log says it even when MLflow cannot be reached
    mlflow_run = record(outcome)
    with open(summary.path, "w") as f:
        f.write(outcome.markdown(mlflow_run))
    print(f"recorded as MLflow run {mlflow_run} (experiment r2a-pipeline)")
    return line
