"""A Kubeflow run's outcome in MLflow, where users look for runs: one MLflow run per
pipeline run in the experiment `r2a-pipeline`, its status FAILED (KILLED when cancelled,
FINISHED when it succeeded) and tags naming the state, the failed task and its error.
Written by the pipeline's exit handler (components/record.py), which runs whatever
happened to the other tasks."""

from __future__ import annotations

from dataclasses import dataclass

from r2adapter.errors import R2AError

EXPERIMENT = "r2a-pipeline"
# KFP's final states (PipelineTaskFinalStatus.state) → MLflow's run statuses
MLFLOW_STATUS = {"SUCCEEDED": "FINISHED", "FAILED": "FAILED", "CANCELLED": "KILLED"}
TAG_STATE = "r2a.pipeline_state"
ERROR_CHARS = 4000  # an MLflow tag holds 8,000 characters; the error's head is what helps


@dataclass(frozen=True)
class PipelineOutcome:
    """What the exit handler knows of the run (kfp's PipelineTaskFinalStatus)."""

    state: str  # SUCCEEDED, FAILED, CANCELLED
    kfp_run: str  # the pipeline job's id
    job: str = ""  # its resource name
    task: str = ""  # the task the status is of
    error: str = ""

    def line(self) -> str:
        if self.state == "SUCCEEDED":
            return f"pipeline run {self.kfp_run}: SUCCEEDED"
        where = f" in {self.task}" if self.task else ""
        first = (self.error.strip().splitlines() or ["no error message"])[0][:300]
        return f"pipeline run {self.kfp_run}: {self.state}{where}: {first}"

    def markdown(self, mlflow_run: str) -> str:
        rows = [
            ("state", self.state),
            ("KFP run", self.kfp_run),
            ("job", self.job),
            ("task", self.task),
            ("MLflow run", f"{mlflow_run} (experiment {EXPERIMENT})"),
        ]
        table = "\n".join(f"| {k} | {v or '-'} |" for k, v in rows)
        error = f"\n\n```\n{self.error[:ERROR_CHARS]}\n```\n" if self.error else "\n"
        return f"# {self.line()}\n\n| | |\n|---|---|\n{table}{error}"


def record(outcome: PipelineOutcome) -> str:
    """One MLflow run for the pipeline run, terminated with the matching status; returns its
    id. An unknown state is an R2AError (nothing written)."""
    if outcome.state not in MLFLOW_STATUS:
        raise R2AError(
            f"unknown pipeline state {outcome.state!r}: expected one of {', '.join(MLFLOW_STATUS)}"
        )
    from r2adapter.registry.tracking import mlflow_setup

    mlflow_setup()
    from mlflow import MlflowClient

    c = MlflowClient()
    exp = c.get_experiment_by_name(EXPERIMENT)
    exp_id = exp.experiment_id if exp is not None else c.create_experiment(EXPERIMENT)
    tags = {
        TAG_STATE: outcome.state,
        "r2a.kfp_run": outcome.kfp_run,
        "r2a.kfp_job": outcome.job,
        "r2a.failed_task": outcome.task if outcome.state != "SUCCEEDED" else "",
        "r2a.error": outcome.error[:ERROR_CHARS],
        "mlflow.note.content": outcome.line(),
    }
    run = c.create_run(exp_id, run_name=f"kfp-{outcome.kfp_run}", tags=tags)
    c.set_terminated(run.info.run_id, MLFLOW_STATUS[outcome.state])
    return str(run.info.run_id)
