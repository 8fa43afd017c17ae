"""The retraining pipeline (Kubeflow Pipelines v2): the loop of r2adapter/loop.py.

    validate ─▶ index-shards ─▶ ParallelFor: index-shard ─▶ index (the merge)
             ─▶ label-shards ─▶ ParallelFor: label-shard ─▶ label-merge
             ─▶ label-family ─▶ label-family-2 ... ─▶ corpora
                (one per family with a label_set)       (after the last label-family)

    one branch per row of r2adapter/families.py, in the table's order, the same
    components for every family, the family named by their `router` parameter:

      labels ─▶ train ──model──▶ register ──version──▶ promote ─▶ If promoted: deploy
                (GPU: r2a)                                │
                                              evaluate (after every promote)

    labels: label-merge's (the two-way labels) for a family without a label set of its
    own; for one with a label_set, its label-family task's and the corpora's directory.

Every family goes train → register → promote → deploy (KFP names the tasks train,
train-2, ..., in the table's order; shown as "train r2a", "train kway", ...). `train`
(components/train.py) trains and registers the family's model as `candidate` in one MLflow
run (`steps.train`: the one training path, as `r2a train`) and hands `register` a
reference to the version, which `register` checks and tags with the Kubeflow run
(components/register.py); `promote` runs the one promotion skeleton over the family and
returns whether `champion` moved, which drives the branch's `deploy`. Where a train task
runs is the family's `train_device`, looked up in TRAINERS: "gpu" (r2a, the fine-tuned
MiniLM) on a GPU node in the CUDA image, "cpu" (r2a_embed's head, the k-way and ADR heads)
on the CPU. The two-way routers (r2a, r2a_embed) train on the merged labels. A family
that labels its own set (`label_set`: the cost-aware k-way router's strategy labels, ADR's
operator labels; a new one is picked up from the table) is labelled first by a
label-family task (components/family.py), and trains on the union of the dataset's labels
and the development corpora's (params.yaml kway.train_corpora, adr.train_corpora), as the
loop's `corpora` step makes them: the `corpora` task indexes and labels each corpus of the
run's `corpora` parameter, one after the other (after the last label-family, so that its
timings see a quiet store), and hands their label files, as one directory artifact, to
that family's train and promote tasks, whose gates read the same union's test split (a
pod starts with no labels/: each task receives what it reads, steps.receive_labels).

`retrain_pipeline` is what Kubeflow runs (compiled to pipelines/retrain.yaml:
`python -m pipelines.retrain`). `local_pipeline` is the same graph of the same components
without the cluster configuration (secrets, config map, data volume, GPU, node selector,
toleration, retries) for `kfp.local` runs, which take their settings from the environment.
Both are made by `_pipeline` (the parameters, once) over `_graph` (the steps and their
wiring, once); `_graph(cluster=True)` adds the Kubernetes configuration.

Submit with `python -m pipelines.submit` (pipelines/submit.py), which calls
`validate_params` first. See pipelines/README.md.
"""

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kfp import compiler, dsl, kubernetes

import components as c
from components._base import CUDA_IMAGE
from r2adapter.config import DEFAULT_DATASET, pipeline_params
from r2adapter.errors import R2AError
from r2adapter.families import FAMILIES, family
from r2adapter.index.openie import OPENIE_BACKENDS
from r2adapter.index.shards import MAX_SHARDS as MAX_INDEX_SHARDS
from r2adapter.loop import ROUTERS
from r2adapter.steps import SHIPPED_DATASETS as DATASETS
from r2adapter.train.accelerator import ENV as ACCELERATOR_ENV

PIPELINE_YAML = Path(__file__).resolve().with_name("retrain.yaml")
PIPELINE_NAME = "r2adapter-retrain"

# ---- parameters ---------------------------------------------------------------------------

MAX_LABEL_SHARDS = 256

# The run's defaults. The router's numbers default to 0, meaning "as params.yaml says" for
# each router (`router:` and `router_<backbone>:`, read by the train tasks in the image, as
# `r2a train` does); a number given overrides it for every router of the loop.
DEFAULTS: dict[str, Any] = {
    "dataset": DEFAULT_DATASET,  # = params.yaml pipeline.dataset
    "openie": "spacy",  # = params.yaml pipeline.openie
    "epochs": 0,
    "eval_every_n_steps": 0,
    "tau_step": 0.0,
    "n_label_shards": 4,
    "n_index_shards": 2,  # indexing's fan-out (r2adapter/index/shards.py)
    # the development corpora indexed and labelled for the families' union (the loop's
    # `corpora` step): params.yaml pipeline.corpora, read when this module is imported
    "corpora": list(pipeline_params().corpora),
}


def corpora_arg(text: str) -> list[str]:
    """The `--corpora` flag of the CLIs (pipelines/submit.py, pipelines/local.py): names
    separated by commas; "" (an empty string) is no corpus at all."""
    return [c.strip() for c in text.split(",") if c.strip()]


# ---- where things are in the cluster (k8s/) -----------------------------------------------

SECRET = "r2a-secrets"
CONFIG_MAP = "r2a-config"
SERVING_NAMESPACE = "r2adapter"
SERVING_DEPLOYMENT = "r2a-serving"
# The image holds the code but not data/ (.dockerignore): the DVC-pulled datasets come from
# this PersistentVolumeClaim, mounted where R2A_HOME=/app expects data/.
R2A_HOME = "/app"
DATA_PVC = "r2a-data"
DATA_MOUNT = "/app/data"
GPU_RESOURCE = "nvidia.com/gpu"
# A train task on a GPU (a family whose `train_device` is "gpu": TRAINERS) runs the CUDA
# image (`make image-cuda`); every other task the CPU one.
GPU_NODE_SELECTOR = ("nvidia.com/gpu.present", "true")  # label set by the NVIDIA GPU operator
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
RETRY = {
    "num_retries": 3,
    "backoff_duration": "30s",
    "backoff_factor": 2.0,
    "backoff_max_duration": "600s",
}

# How many shards of a fan-out (index, label) run at once: each one holds a Postgres
# connection and 1-2 CPUs, so 256 shards must not start 256 pods. kfp 2.17 takes only an
# integer here (a pipeline parameter is refused: "ParallelFor parallelism must be >= 0"), so
# it is a compile-time setting: `python -m pipelines.retrain --parallelism N`.
PARALLELISM = 8


@dataclass(frozen=True)
class Pod:
    """A task's CPU and memory (requests and limits: a request makes the pod Burstable
    rather than BestEffort, evicted last but one; a limit keeps a runaway step from
    starving its node) and its deadline (`activeDeadlineSeconds`)."""

    cpu: str
    cpu_limit: str
    memory: str
    memory_limit: str
    timeout_s: int


# Sized from peak RSS measured with /usr/bin/time -v on this machine's 2 cores
# (pipelines/README.md, "Resources"): a process that imports the platform ~0.33 GB
# (`r2a data validate`), embedding 2,000 passages with MiniLM 1.17 GB (an index or label
# shard's main work), one MiniLM training step at batch 64 1.42 GB; memory requests are
# about 1.5x the peak, limits 2x the request. Deadlines are generous multiples of `make
# run`'s stage times: a hung task ends, a slow one on a big corpus does not.
HOUR = 3600
_SMALL = Pod("250m", "1", "512Mi", "1Gi", HOUR // 2)  # bookkeeping: registry, plans
_STEP = Pod("1", "2", "2Gi", "4Gi", 2 * HOUR)  # embeds or retrieves over the corpus
_BUILD = Pod("1", "2", "3Gi", "6Gi", 4 * HOUR)  # builds an index version or reports on it
PODS: dict[str, Pod] = {
    "validate": Pod("250m", "1", "512Mi", "1Gi", HOUR // 4),
    "index-shards": Pod("500m", "1", "1Gi", "2Gi", HOUR),  # loads the corpus into Postgres
    "index-shard": _STEP,
    "index": _BUILD,
    "label-shards": _SMALL,
    "label-shard": _STEP,
    "label-merge": Pod("500m", "1", "1Gi", "2Gi", HOUR),
    "label-family": _STEP,  # a family's own label set (components/family.py)
    "corpora": Pod("1", "2", "3Gi", "6Gi", 8 * HOUR),  # indexes and labels each corpus
    # train: by the family's `train_device` (TRAINERS)
    "register": _SMALL,
    "promote": _STEP,  # the gate scores both versions on the test split
    "deploy": _SMALL,
    "evaluate": _BUILD,
    "record-run": _SMALL,
}


@dataclass(frozen=True)
class Trainer:
    """Where a family's train task runs: its pod, and whether it asks for a GPU (the CUDA
    image, one GPU, the GPU nodes' selector and toleration, R2A_ACCELERATOR=gpu)."""

    pod: Pod
    gpu: bool = False


# The train task of each family by its `train_device` (r2adapter/route/family.py), the one
# place that says what a trainer gets: a new family names its device, not its own branch.
TRAINERS: dict[str, Trainer] = {
    # the GPU trainer (r2a's fine-tuned MiniLM); CPU for its data loaders
    "gpu": Trainer(Pod("2", "4", "3Gi", "6Gi", 6 * HOUR), gpu=True),
    # the CPU trainers (the embedding head, the k-way and ADR heads) need no loader cores
    "cpu": Trainer(Pod("1", "2", "2Gi", "4Gi", 6 * HOUR)),
}


def trainer(name: str) -> Trainer:
    """The train task's placement of the family `name` of r2adapter/families.py; a device
    TRAINERS does not know is a one-line error at compile time."""
    device = family(name).train_device
    if device not in TRAINERS:
        raise R2AError(
            f"{name}: unknown train_device {device!r}: choose one of {', '.join(TRAINERS)}"
        )
    return TRAINERS[device]


# Which settings each task gets: secret key → env and config-map key → env.
DB = {"R2A_DATABASE_URL": "R2A_DATABASE_URL"}
LLM_KEY = {"R2A_LLM_API_KEY": "R2A_LLM_API_KEY"}
MLFLOW = {"MLFLOW_TRACKING_URI": "MLFLOW_TRACKING_URI"}
LLM = {"R2A_LLM_BASE_URL": "R2A_LLM_BASE_URL", "R2A_LLM_MODEL": "R2A_LLM_MODEL"}


# ---- parameter validation (at submission) ---------------------------------------------------


def validate_params(
    dataset: str = DEFAULTS["dataset"],
    openie: str = DEFAULTS["openie"],
    epochs: int | None = None,
    eval_every_n_steps: int | None = None,
    tau_step: float | None = None,
    n_label_shards: int = DEFAULTS["n_label_shards"],
    n_index_shards: int = DEFAULTS["n_index_shards"],
    corpora: Any = None,
) -> dict[str, Any]:
    """The run's arguments, all explicit, or an R2AError with a one-line reason. Contacts
    nothing. The router's fields (None: from params.yaml, sent as 0) go through
    `r2adapter.config.router_params` for every router of the loop, the same check as
    `r2a train`. `corpora` None is DEFAULTS' (params.yaml pipeline.corpora) less the run's
    dataset, as the loop leaves it out; a list given must name shipped datasets other than
    the run's own, once each."""
    from r2adapter.config import router_params

    if dataset not in DATASETS:
        raise R2AError(f"unknown dataset '{dataset}': choose one of {', '.join(DATASETS)}")
    if openie not in OPENIE_BACKENDS:
        raise R2AError(
            f"unknown OpenIE backend '{openie}': choose one of {', '.join(OPENIE_BACKENDS)}"
        )
    for name, value in (
        ("epochs", epochs),
        ("eval_every_n_steps", eval_every_n_steps),
        ("n_label_shards", n_label_shards),
        ("n_index_shards", n_index_shards),
    ):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise R2AError(f"{name} must be an integer, not {value!r}")
    if tau_step is not None and not (
        isinstance(tau_step, int | float) and not isinstance(tau_step, bool)
    ):
        raise R2AError(f"tau_step must be a number, not {tau_step!r}")
    if not 1 <= n_label_shards <= MAX_LABEL_SHARDS:
        raise R2AError(
            f"n_label_shards must be between 1 and {MAX_LABEL_SHARDS}, not {n_label_shards}"
        )
    if not 1 <= n_index_shards <= MAX_INDEX_SHARDS:
        raise R2AError(
            f"n_index_shards must be between 1 and {MAX_INDEX_SHARDS}, not {n_index_shards}"
        )
    if corpora is None:
        corpora = [name for name in DEFAULTS["corpora"] if name != dataset]
    elif not isinstance(corpora, list | tuple) or not all(isinstance(x, str) for x in corpora):
        raise R2AError(f"corpora must be a list of dataset names, not {corpora!r}")
    others = [d for d in DATASETS if d != dataset]
    for name in corpora:
        if name == dataset:
            raise R2AError(f"corpora must not list the run's dataset '{dataset}'")
        if name not in DATASETS:
            raise R2AError(f"unknown corpus '{name}' in corpora: choose among {', '.join(others)}")
    repeated = sorted({name for name in corpora if list(corpora).count(name) > 1})
    if repeated:
        raise R2AError(f"corpora lists {', '.join(repeated)} more than once")
    for r in ROUTERS:
        router_params(
            r.backbone, epochs=epochs, eval_every_n_steps=eval_every_n_steps, tau_step=tau_step
        )
    return {
        "dataset": dataset,
        "openie": openie,
        "epochs": epochs or 0,
        "eval_every_n_steps": eval_every_n_steps or 0,
        "tau_step": float(tau_step or 0.0),
        "n_label_shards": n_label_shards,
        "n_index_shards": n_index_shards,
        "corpora": list(corpora),
    }


# ---- the graph ----------------------------------------------------------------------------


def _in_cluster(
    task: dsl.PipelineTask,
    *,
    secrets: dict[str, str] | None = None,
    config: dict[str, str] | None = None,
    data: bool = False,
    retry: bool = False,
    pod: Pod | None = None,
) -> dsl.PipelineTask:
    """Settings from the r2a-secrets Secret and r2a-config ConfigMap (never literals), the
    data volume, retries for steps that talk to services that may blip; the task's CPU,
    memory and deadline (`pod`, else its component's row of PODS)."""
    task.set_env_variable("R2A_HOME", R2A_HOME)
    pod = pod or PODS[task.component_spec.name]
    task.set_cpu_request(pod.cpu).set_cpu_limit(pod.cpu_limit)
    task.set_memory_request(pod.memory).set_memory_limit(pod.memory_limit)
    kubernetes.set_timeout(task, pod.timeout_s)
    if secrets:
        kubernetes.use_secret_as_env(task, secret_name=SECRET, secret_key_to_env=secrets)
    if config:
        kubernetes.use_config_map_as_env(
            task, config_map_name=CONFIG_MAP, config_map_key_to_env=config
        )
    if data:
        kubernetes.mount_pvc(task, pvc_name=DATA_PVC, mount_path=DATA_MOUNT)
    if retry:
        task.set_retry(**RETRY)
    return task


def _graph(
    dataset: Any,
    openie: Any,
    epochs: Any,
    eval_every_n_steps: Any,
    tau_step: Any,
    n_label_shards: Any,
    n_index_shards: Any,
    corpora: Any,
    cluster: bool,
    parallelism: int = PARALLELISM,
) -> None:
    """Both pipelines' tasks. `cluster` adds the Kubernetes configuration and the exit
    handler: `record-run` runs after the others whatever became of them and records the
    run's outcome in MLflow and the Kubeflow UI (components/record.py). kfp.local runs no
    exit handler, so the local pipeline has none."""
    args = (dataset, openie, epochs, eval_every_n_steps, tau_step, n_label_shards)
    if not cluster:
        _steps(*args, n_index_shards, corpora, cluster=False, parallelism=parallelism)
        return
    record = c.record_run(pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER).set_caching_options(False)
    _in_cluster(record, config=MLFLOW, retry=True)
    with dsl.ExitHandler(record, name="retrain"):
        _steps(*args, n_index_shards, corpora, cluster=True, parallelism=parallelism)


def _steps(
    dataset: Any,
    openie: Any,
    epochs: Any,
    eval_every_n_steps: Any,
    tau_step: Any,
    n_label_shards: Any,
    n_index_shards: Any,
    corpora: Any,
    cluster: bool,
    parallelism: int,
) -> None:
    """The retraining steps and their wiring, once for both pipelines."""

    def k8s(task: dsl.PipelineTask, **kw: Any) -> dsl.PipelineTask:
        return _in_cluster(task, **kw) if cluster else task

    def deploy_if_promoted(
        router: str, promote: dsl.PipelineTask, model: Any, version: Any
    ) -> None:
        # promote's return value (`promoted`) is its single parameter output, named "Output":
        # kfp.local resolves a condition only on outputs named so (its condition evaluator).
        with dsl.If(promote.outputs["Output"] == True, name=f"champion-moved-{router}"):  # noqa: E712
            deploy = c.deploy(
                model_name=model,
                version=version,
                namespace=SERVING_NAMESPACE,
                deployment=SERVING_DEPLOYMENT,
            ).set_caching_options(False)
            deploy.set_display_name(f"deploy {router}")
            k8s(deploy, config=MLFLOW, retry=True)

    # Caching: on for the steps whose result is a function of their inputs (the data's
    # fingerprint, the index version, the labels artifact, the parameters); off for steps
    # that read or change live state (the data on disk, the registry's aliases, the
    # Deployment): a cached promote could report a promotion that did not happen now.
    validate = c.validate(dataset=dataset).set_caching_options(False)
    k8s(validate, data=True)

    # indexing fans out like labelling: the plan loads the corpus (live state: not cached),
    # each shard fills the caches for its passages, the merge writes the one new version
    plan = c.index_shards(
        dataset=dataset, n_shards=n_index_shards, data_fingerprint=validate.outputs["fingerprint"]
    ).set_caching_options(False)
    k8s(plan, secrets=DB, data=True, retry=True)
    with dsl.ParallelFor(plan.output, name="index-shards-loop", parallelism=parallelism) as part:
        warm = c.index_shard(
            dataset=dataset,
            openie=openie,
            shard=part.shard,
            n_shards=part.n_shards,
            data_fingerprint=part.data_fingerprint,
        ).set_caching_options(True)
        k8s(warm, secrets={**DB, **LLM_KEY}, config=LLM, data=True, retry=True)
    index = c.index(
        dataset=dataset,
        openie=openie,
        data_fingerprint=validate.outputs["fingerprint"],
        shard_passages=dsl.Collected(warm.output),
    )
    index.set_caching_options(True)
    k8s(index, secrets={**DB, **LLM_KEY}, config=LLM, data=True, retry=True)

    shards = c.label_shards(n_shards=n_label_shards, index_version=index.outputs["version"])
    shards.set_caching_options(True)
    k8s(shards)
    with dsl.ParallelFor(shards.output, name="label-shards-loop", parallelism=parallelism) as item:
        rank = c.label_shard(
            dataset=dataset,
            index_version=item.index_version,
            shard=item.shard,
            n_shards=item.n_shards,
        ).set_caching_options(True)
        k8s(rank, secrets=DB)
    merge = c.label_merge(dataset=dataset, shards=dsl.Collected(rank.outputs["rankings"]))
    merge.set_caching_options(True)
    k8s(merge, secrets=DB)

    # The families' own labels first (`label_set`: the k-way router's strategy labels, ADR's
    # operator labels), one labelling task after the other so that each one's timings see
    # a quiet store (the strategy labels: every strategy ranked and timed; ADR's: its three
    # operators over the hypergraph the index step built, params.yaml adr.enabled), then
    # the development corpora's (the loop's `corpora` step)
    labelled: dict[str, dsl.PipelineTask] = {}
    before: dsl.PipelineTask = merge
    for name, fam in FAMILIES.items():
        if not fam.label_set:
            continue
        lab = c.label_family(router=name, dataset=dataset, index_version=index.outputs["version"])
        lab.after(before).set_caching_options(True)
        lab.set_display_name(f"label {name}")
        k8s(lab, secrets=DB)
        labelled[name] = before = lab
    # each corpus of `corpora` indexed and labelled, one after the other in this one task
    # (no fan-out across corpora); their label files travel as one directory artifact to
    # the trainer and gate of every family with a label set, which train on the union
    # (kway.train_corpora, adr.train_corpora). Cached: its key is the names, openie and the
    # run's data fingerprint (validate's), so a change of the list or of the run's data runs
    # it again, and a weekly run over unchanged data is served from the cache like `index`;
    # a change of a corpus's own files (DVC-pinned development sets, not fingerprinted) or
    # of the code in the image is not seen: `--no-cache` (or a new image tag) runs it again
    corpora_task = c.corpora(
        dataset=dataset,
        corpora=corpora,
        openie=openie,
        data_fingerprint=validate.outputs["fingerprint"],
    )
    corpora_task.after(before).set_caching_options(True)
    k8s(corpora_task, secrets={**DB, **LLM_KEY}, config=LLM, data=True, retry=True)

    # One branch per family of r2adapter/families.py, in the table's order: train →
    # register → promote → deploy when its champion moved, the same four components for
    # every family, named by `router`; where train runs is the family's `train_device`
    # (TRAINERS). A family with a label set of its own trains (and is gated) on its
    # label-family task's labels and the corpora's; the others on the merged two-way labels.
    # Its train task is not cached and is retried (seconds of CPU); a two-way router's is
    # cached (up to hours, on a GPU for r2a, not spent twice on the same labels and numbers:
    # a cache hit whose version is no longer `candidate` fails in register, in one line)
    # and not retried.
    promotes = []
    for name in FAMILIES:
        own = labelled.get(name)
        labels: dict[str, Any] = {"labels": merge.outputs["labels"]}
        if own is not None:
            labels = {
                "labels": own.outputs["labels"],
                "corpora_labels": corpora_task.outputs["labels"],
            }
        train = c.train(
            router=name,
            dataset=dataset,
            epochs=epochs,
            eval_every_n_steps=eval_every_n_steps,
            tau_step=tau_step,
            **labels,
        ).set_caching_options(own is None)
        train.set_display_name(f"train {name}")
        placed = trainer(name)
        if cluster and placed.gpu:
            train.set_container_image(CUDA_IMAGE)
            train.set_env_variable(ACCELERATOR_ENV, "gpu")  # no GPU visible: one line, exit
            train.set_accelerator_type(GPU_RESOURCE).set_accelerator_limit(1)
            kubernetes.add_node_selector(train, *GPU_NODE_SELECTOR)
            kubernetes.add_toleration(train, **GPU_TOLERATION)
        k8s(train, secrets=DB, config=MLFLOW, retry=own is not None, pod=placed.pod)

        register = c.register(
            router=name, model=train.outputs["model"], pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER
        ).set_caching_options(False)
        register.set_display_name(f"register {name}")
        k8s(register, config=MLFLOW, retry=True)

        promote = c.promote(
            router=name, dataset=dataset, version=register.outputs["version"], **labels
        ).set_caching_options(False)
        promote.set_display_name(f"promote {name}")
        k8s(promote, secrets=DB, config=MLFLOW, retry=True)
        promotes.append(promote)
        deploy_if_promoted(name, promote, train.outputs["name"], register.outputs["version"])
    evaluate = c.evaluate(dataset=dataset).after(*promotes).set_caching_options(False)
    k8s(evaluate, secrets={**DB, **LLM_KEY}, config={**MLFLOW, **LLM}, retry=True)


def _pipeline(name: str, description: str, cluster: bool, parallelism: int = PARALLELISM) -> Any:
    """A KFP pipeline over `_graph`: the run's parameters and their defaults are declared
    here once, for both the cluster pipeline and the local one."""

    def pipeline(
        dataset: str = DEFAULTS["dataset"],
        openie: str = DEFAULTS["openie"],
        epochs: int = DEFAULTS["epochs"],
        eval_every_n_steps: int = DEFAULTS["eval_every_n_steps"],
        tau_step: float = DEFAULTS["tau_step"],
        n_label_shards: int = DEFAULTS["n_label_shards"],
        n_index_shards: int = DEFAULTS["n_index_shards"],
        corpora: list = DEFAULTS["corpora"],
    ) -> None:
        _graph(
            dataset,
            openie,
            epochs,
            eval_every_n_steps,
            tau_step,
            n_label_shards,
            n_index_shards,
            corpora,
            cluster,
            parallelism,
        )

    return dsl.pipeline(name=name, description=description)(pipeline)


# What Kubeflow runs (compiled to pipelines/retrain.yaml).
retrain_pipeline = _pipeline(
    PIPELINE_NAME,
    "R2Adapter router retraining: validate, index (sharded), label (sharded), then for each router "
    "family (its own labels first where it has a label set) train (r2a on a GPU), register, "
    "promotion gate, deploy when its champion moved; evaluate; an exit handler records the "
    "outcome in MLflow.",
    cluster=True,
)
# The same graph without the cluster configuration: kfp.local ignores the platform spec
# (secrets, config map, volume, node selector, toleration) and cannot take it.
local_pipeline = _pipeline(
    f"{PIPELINE_NAME}-local",
    "The retraining graph without cluster configuration, for kfp.local.",
    cluster=False,
)


def compile_pipeline(path: Path | str = PIPELINE_YAML, parallelism: int = PARALLELISM) -> Path:
    """The cluster pipeline compiled to `path`; `parallelism`: how many shards of each
    fan-out run at once (0: no limit), a compile-time setting in kfp 2.17."""
    if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 0:
        raise R2AError(f"parallelism must be an integer >= 0, not {parallelism!r}")
    pipeline = retrain_pipeline
    if parallelism != PARALLELISM:
        pipeline = _pipeline(
            PIPELINE_NAME, retrain_pipeline.description or "", cluster=True, parallelism=parallelism
        )
    compiler.Compiler().compile(pipeline, str(path))
    return Path(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m pipelines.retrain", description="compile the retraining pipeline"
    )
    ap.add_argument("--output", default=str(PIPELINE_YAML), help="where to write the YAML")
    ap.add_argument(
        "--parallelism",
        type=int,
        default=PARALLELISM,
        help=f"shards of a fan-out that run at once, 0: no limit (default {PARALLELISM})",
    )
    args = ap.parse_args(argv)
    try:
        print(f"wrote {compile_pipeline(args.output, args.parallelism)}")
    except R2AError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
