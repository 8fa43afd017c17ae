"""register: `steps.train` already registered the model and set alias `candidate`; this
step checks that in the registry (the version exists, is READY, comes from the training
run, and `candidate` points to it), tags the version with the Kubeflow run that produced
it, and shows the gate metrics recorded on it."""

from typing import NamedTuple

from kfp.dsl import Input, Metrics, Model, Output

from components._base import r2a_component


@r2a_component
def register(model: Input[Model], pipeline_run: str, metrics: Output[Metrics]) -> NamedTuple(
    "Outputs", [("uri", str), ("version", str)]
):
    import json
    from collections import namedtuple

    from r2adapter.data.metrics import metric_key
    from r2adapter.registry.models import GATE_METRICS, alias_version, client

    with open(model.path) as f:
        ref = json.load(f)
    name, version, kind = ref["name"], str(ref["version"]), ref["kind"]
    c = client()
    mv = c.get_model_version(name, version)  # raises if the version does not exist
    if mv.run_id != ref["run_id"]:
        raise RuntimeError(
            f"{name} v{version} comes from MLflow run {mv.run_id}, not {ref['run_id']}"
        )
    if mv.status != "READY":
        raise RuntimeError(f"{name} v{version} is {mv.status}, not READY")
    cand = alias_version(kind, "candidate")
    if cand is None or str(cand.version) != version:
        raise RuntimeError(
            f"alias candidate of {name} points to "
            f"{'nothing' if cand is None else 'v' + str(cand.version)}, not v{version}:"
            " another training registered since; re-run the pipeline"
        )
    c.set_model_version_tag(name, version, "kfp_pipeline_run", pipeline_run)

    metrics.log_metric("version", int(version))
    for m in GATE_METRICS:
        if metric_key(m) in mv.tags:
            metrics.log_metric(f"gate_{metric_key(m)}", float(mv.tags[metric_key(m)]))
    metrics.metadata.update({"model": name, "model_version": version, "run_id": mv.run_id})
    uri = f"models:/{name}/{version}"
    print(f"{uri}: READY, alias candidate, from run {mv.run_id[:8]}, pipeline run {pipeline_run}")
    return namedtuple("Outputs", ["uri", "version"])(uri, version)
