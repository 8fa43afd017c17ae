"""register: the training run registered the model and set alias `candidate` (`train`,
`steps.train`: one MLflow run owns the training and the registration, for every family);
this step, one component for every family, checks that in the registry (the version exists,
is READY, comes from the training run, and `candidate` points to it), tags the version with
the Kubeflow run that produced it, and shows the gate figures recorded on it."""

from typing import NamedTuple

from kfp.dsl import Input, Metrics, Model, Output

from components._base import r2a_component


@r2a_component
def register(
    router: str, model: Input[Model], pipeline_run: str, metrics: Output[Metrics]
) -> NamedTuple("Outputs", [("uri", str), ("version", str)]):
    """`model`: the train task's reference to the version it registered for the family
    `router` (refused when it names another family's model)."""
    import json
    from collections import namedtuple

    from r2adapter.data.metrics import metric_key
    from r2adapter.families import family
    from r2adapter.registry.models import client, gate_tags, version_by_alias

    with open(model.path) as f:
        ref = json.load(f)
    name, version = family(router).model, str(ref["version"])
    if ref["name"] != name:
        raise RuntimeError(f"the model artifact names {ref['name']}, not {router}'s {name}")
    c = client()
    mv = c.get_model_version(name, version)  # raises if the version does not exist
    if mv.run_id != ref["run_id"]:
        raise RuntimeError(
            f"{name} v{version} comes from MLflow run {mv.run_id}, not {ref['run_id']}"
        )
    if mv.status != "READY":
        raise RuntimeError(f"{name} v{version} is {mv.status}, not READY")
    cand = version_by_alias(name, "candidate")
    if cand is None or str(cand.version) != version:
        raise RuntimeError(
            f"alias candidate of {name} points to "
            f"{'nothing' if cand is None else 'v' + str(cand.version)}, not v{version}:"
            " another training registered since; re-run the pipeline"
        )
    c.set_model_version_tag(name, version, "kfp_pipeline_run", pipeline_run)

    metrics.log_metric("version", int(version))
    for k, v in gate_tags(dict(mv.tags)).items():
        metrics.log_metric(f"gate_{metric_key(k)}", v)
    metrics.metadata.update({"model": name, "model_version": version, "run_id": mv.run_id})
    uri = f"models:/{name}/{version}"
    print(f"{uri}: READY, alias candidate, from run {mv.run_id[:8]}, pipeline run {pipeline_run}")
    return namedtuple("Outputs", ["uri", "version"])(uri, version)
