"""train: train a router with the periodic threshold search and register it in MLflow with
alias `candidate` (`r2a train`). The r2a router's task requests the GPU and runs in the CUDA
image (pipelines/retrain.py), with R2A_ACCELERATOR=gpu: it refuses to start without one."""

from typing import NamedTuple

from kfp.dsl import Dataset, Input, Metrics, Model, Output

from components._base import r2a_component


@r2a_component
def train(
    dataset: str,
    router: str,
    epochs: int,
    eval_every_n_steps: int,
    tau_step: float,
    labels: Input[Dataset],
    model: Output[Model],
    metrics: Output[Metrics],
) -> NamedTuple("Outputs", [("kind", str), ("name", str), ("version", str), ("run_id", str)]):
    """`router`: a two-way family of r2adapter/families.py (its backbone from params.yaml).
    `epochs`, `eval_every_n_steps`, `tau_step`: 0 means "from params.yaml".
    `steps.train` reads the labels from labels/<dataset>.jsonl: the `labels` artifact is
    put there first (in a cluster each task has its own file system). The `model` artifact
    is a JSON reference to the registered version, not the weights (MLflow holds those)."""
    import json
    import os
    import shutil
    from collections import namedtuple
    from pathlib import Path

    from r2adapter import steps
    from r2adapter.data.adapters import dataset_name
    from r2adapter.errors import R2AError
    from r2adapter.families import family
    from r2adapter.registry.models import model_name
    from r2adapter.train.accelerator import require_gpu

    # the GPU task (R2A_ACCELERATOR=gpu): a CPU image or a node without a GPU stops here in
    # one line (SystemExit: no traceback) rather than training on the CPU holding the GPU
    try:
        gpu = require_gpu()
    except R2AError as e:
        raise SystemExit(f"error: {e}") from None
    if gpu:
        print(f"training on {gpu}")

    name = dataset_name(dataset)
    dest = family(router).label_path(name)
    if not dest.exists() or not os.path.samefile(labels.path, dest):
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(".jsonl.tmp")
        shutil.copyfile(labels.path, tmp)
        tmp.replace(dest)

    # 0 = not given: params.yaml (`router:`, `router_<backbone>:`) decides, as for `r2a train`
    backbone = family(router).params().backbone
    r = steps.train(
        router,
        dataset,
        epochs=epochs or None,
        eval_every_n_steps=eval_every_n_steps or None,
        tau_step=tau_step or None,
    )
    registered = model_name(r.kind)
    ref = {
        "name": registered,
        "version": r.version,
        "run_id": r.run_id,
        "kind": r.kind,
        "uri": f"models:/{registered}/{r.version}",
        "alias": "candidate",
        "dataset": name,
        "backbone": backbone,
        "tau": r.tau,
        "best_step": r.best_step,
        "steps": r.steps,
        "accelerator": r.accelerator,
        "label_md5": labels.metadata.get("md5", ""),
    }
    Path(model.path).write_text(json.dumps(ref, indent=2) + "\n")
    model.metadata.update(ref)

    for key, value in r.metrics().items():
        metrics.log_metric(key, value)
    print(
        f"{r.kind}: registered {registered} version {r.version} as candidate (run {r.run_id[:8]});"
        f" τ* {r.tau:.2f} at step {r.best_step}/{r.steps} on {r.accelerator}, {r.seconds:.0f} s"
    )
    return namedtuple("Outputs", ["kind", "name", "version", "run_id"])(
        r.kind, registered, r.version, r.run_id
    )
