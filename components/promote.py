"""promote: the promotion gate (`r2a promote`). Candidate and champion on the frozen test
split; `champion` moves to the candidate only when the gate holds (the first model becomes
champion). The returned flag drives the pipeline's `dsl.If` around `deploy`."""

from kfp.dsl import Metrics, Output

from components._base import r2a_component


@r2a_component
def promote(kind: str, dataset: str, version: str, metrics: Output[Metrics]) -> bool:
    """True when `champion` moved to `version` in this task. `version` is the candidate
    this run trained and `register` checked; the gate refuses to judge any other."""
    from r2adapter import steps
    from r2adapter.registry.models import model_name

    steps.require_candidate(model_name(kind), version)
    r = steps.promote(kind, dataset)
    verb = "promoted" if r.promoted else "kept the champion"
    before = f"v{r.champion_before}" if r.champion_before else "none"
    print(f"{r.kind}: {verb}: candidate v{r.candidate} vs champion {before}")
    print("; ".join(r.reasons))

    for key, value in r.metrics().items():
        metrics.log_metric(key, value)
    metrics.metadata["reasons"] = "; ".join(r.reasons)
    return bool(r.promoted)
