"""index: load the corpus, embed passages, run OpenIE, build the graph (`r2a index`)."""

from typing import NamedTuple

from kfp.dsl import Metrics, Output

from components._base import r2a_component


@r2a_component
def index(dataset: str, openie: str, data_fingerprint: str, metrics: Output[Metrics]) -> NamedTuple(
    "Outputs", [("version", int), ("created", bool)]
):
    """`data_fingerprint` is not used by the step: it is there so that the task's cache key
    follows the data (see `validate`). The step itself is incremental (embeddings and
    OpenIE cached per passage in Postgres), so a retry resumes where it stopped."""
    from collections import namedtuple

    from r2adapter import steps

    r = steps.index(dataset, openie)
    what = "new index version" if r.created else "index up to date, nothing rebuilt:"
    print(f"{r.dataset}: {what} {r.version} ({r.encoder}, openie {r.openie})")
    print(f"data fingerprint {data_fingerprint}")
    for key, value in r.metrics().items():
        metrics.log_metric(key, value)
    metrics.metadata["encoder"] = r.encoder
    metrics.metadata["openie"] = r.openie
    return namedtuple("Outputs", ["version", "created"])(r.version, r.created)
