"""promote: the promotion gate (`r2a promote --router`), one component for every family: the
one promotion skeleton (r2adapter/registry/promote.py) over the family named by `router`,
candidate and champion on the frozen test split; `champion` moves to the candidate only when
the gate holds (the first model becomes champion). The returned flag drives the pipeline's
`dsl.If` around `deploy`."""

from kfp.dsl import Dataset, Input, Metrics, Output

from components._base import r2a_component


@r2a_component
def promote(
    router: str,
    dataset: str,
    version: str,
    labels: Input[Dataset],
    metrics: Output[Metrics],
    corpora_labels: Input[Dataset] | None = None,
) -> bool:
    """True when `champion` moved to `version` in this task. `version` is the candidate
    this run trained and `register` checked; the gate refuses to judge any other. The gate
    reads what the trainer read: the same label artifacts (`labels`, and `corpora_labels`
    where the family trains on the corpora's union), put in labels/ first."""
    from r2adapter import steps
    from r2adapter.families import family

    steps.require_candidate(family(router).model, version)
    corpora = corpora_labels.path if corpora_labels is not None else ""
    steps.receive_labels(router, dataset, labels.path, corpora)
    r = steps.promote(router, dataset)  # the one promotion skeleton
    verb = "promoted" if r.promoted else "kept the champion"
    before = f"v{r.champion_before}" if r.champion_before else "none"
    print(f"{router}: {verb}: candidate v{r.candidate} vs champion {before}")
    print("; ".join(map(str, r.reasons)))

    for key, value in r.metrics().items():
        metrics.log_metric(key, value)
    metrics.metadata["reasons"] = "; ".join(map(str, r.reasons))
    return bool(r.promoted)
