"""train: train the family named by `router` (r2adapter/families.py) on the labels it is
handed and register it in MLflow with alias `candidate` (`r2a train --router`), one
component for every family. What the task runs on is the pipeline's, by the family's
`train_device` (pipelines/retrain.py TRAINERS): r2a's task requests a GPU and runs in the
CUDA image, with R2A_ACCELERATOR=gpu, and refuses to start without one."""

from typing import NamedTuple

from kfp.dsl import Dataset, Input, Metrics, Model, Output

from components._base import r2a_component


@r2a_component
def train(
    router: str,
    dataset: str,
    epochs: int,
    eval_every_n_steps: int,
    tau_step: float,
    labels: Input[Dataset],
    model: Output[Model],
    metrics: Output[Metrics],
    corpora_labels: Input[Dataset] | None = None,
) -> NamedTuple("Outputs", [("name", str), ("version", str), ("run_id", str)]):
    """`labels`: the family's label file of the dataset (the merged two-way labels, or the
    family's own set from its label-family task); `corpora_labels`: the `corpora` task's
    directory of the development corpora's label files, for a family that trains on their
    union (kway.train_corpora, adr.train_corpora); none for the others. Both are put where
    the family reads them first (`steps.receive_labels`: a pod starts with no labels/).
    `epochs`, `eval_every_n_steps`, `tau_step`: 0 means "from params.yaml"; a number given
    goes to a family that takes them (its `params`: the two-way routers'), the others read
    params.yaml alone. `steps.train` trains and registers in one MLflow run (the one path of
    r2adapter/registry/training.py, as `r2a train`): the `model` artifact is a JSON
    reference to the registered version, not the weights (MLflow holds those), which
    `register` checks."""
    import json
    from collections import namedtuple
    from pathlib import Path

    from r2adapter import steps
    from r2adapter.data.adapters import dataset_name
    from r2adapter.errors import R2AError
    from r2adapter.families import family
    from r2adapter.train.accelerator import require_gpu

    # the GPU task (R2A_ACCELERATOR=gpu): a CPU image or a node without a GPU stops here in
    # one line (SystemExit: no traceback) rather than training on the CPU holding the GPU
    try:
        gpu = require_gpu()
    except R2AError as e:
        raise SystemExit(f"error: {e}") from None
    if gpu:
        print(f"training on {gpu}")

    fam = family(router)
    name = dataset_name(dataset)
    corpora = corpora_labels.path if corpora_labels is not None else ""
    shipped = steps.receive_labels(router, dataset, labels.path, corpora)
    if corpora_labels is not None:
        print(f"{router}: the corpora's label files: {', '.join(shipped) or 'none'}")

    given = {"epochs": epochs, "eval_every_n_steps": eval_every_n_steps, "tau_step": tau_step}
    takes = getattr(fam, "params", None) is not None
    r = steps.train(router, dataset, **{k: (v or None) for k, v in given.items() if takes})
    report = steps.train_report(r)
    version, run_id = str(report["version"]), str(report["run_id"])
    ref = {
        **report,  # router, version, run_id, the family's fields, seconds, test figures
        "name": fam.model,
        "version": version,
        "uri": f"models:/{fam.model}/{version}",
        "alias": "candidate",
        "dataset": name,
        "label_md5": labels.metadata.get("md5", ""),
        "corpora_labels": shipped,
    }
    Path(model.path).write_text(json.dumps(ref, indent=2, default=str) + "\n")
    model.metadata.update({k: ref[k] for k in ("router", "name", "version", "run_id", "uri")})

    for key, value in r.metrics().items():
        metrics.log_metric(key, value)
    print(
        f"{router}: registered {fam.model} version {version} as candidate (run {run_id[:8]});"
        f" {steps.train_note(report) or 'no note'}, {float(report['seconds']):.0f} s"
    )
    return namedtuple("Outputs", ["name", "version", "run_id"])(fam.model, version, run_id)
