"""The pipeline's steps as plain functions: the one room the CLI, DVC and Kubeflow enter."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from r2adapter.adr import strategies as adr_modes
from r2adapter.data.adapters import SHIPPED_DATASETS as SHIPPED_DATASETS
from r2adapter.data.adapters import dataset_name, load_dataset
from r2adapter.data.validate import Report
from r2adapter.data.validate import validate as _validate
from r2adapter.errors import R2AError
from r2adapter.store.load import LoadResult
from r2adapter.store.load import load as _load

if TYPE_CHECKING:
    from r2adapter.index.build import IndexExtension, IndexReport
    from r2adapter.label.step import LabelResult
    from r2adapter.registry.promote import PromoteResult
    from r2adapter.retrieve.base import Hit
    from r2adapter.route.family import RouterFamily
    from r2adapter.route.trained import TrainedRouter

adr_modes.register()  # ADR's retrieval modes (not a family step): every step finds them


def validate(dataset: str, data_docs: Path | None = None) -> Report:
    """Great Expectations suites over corpus and queries, run as one checkpoint
    (docs/architecture.md, step 1); with `data_docs`, its Data Docs site is written there."""
    return _validate(load_dataset(dataset), data_docs)


def load(dataset: str, replace: bool = False) -> LoadResult:
    """Passages and queries into Postgres in one transaction (`replace`: also when the name
    is stored from another folder)."""
    return _load(load_dataset(dataset), replace=replace)


def index(
    dataset: str,
    openie: str = "spacy",
    adr: bool | None = None,
    shards: int = 1,
    share: bool | None = None,
    rebuild: bool = False,
) -> IndexReport:
    """Embed passages, run OpenIE, build the knowledge graph (docs/architecture.md, step 2);
    with `adr` (None: params.yaml adr.enabled) ADR's dual hypergraph too. `shards` > 1: the
    per-passage work in that many local processes first, then the same one-transaction
    merge (r2adapter/index/shards.py)."""
    from r2adapter.index.build import build_index
    from r2adapter.index.shards import build_sharded, check_shards

    extensions = index_extensions(adr)
    if check_shards(shards) > 1:
        if rebuild:
            raise R2AError("--rebuild builds in one process: leave --shards out")
        return build_sharded(dataset, openie, shards, extensions=extensions, share=share)
    return build_index(dataset, openie, extensions=extensions, share=share, rebuild=rebuild)


def index_stamp(dataset: str) -> dict[str, str]:
    """The identity of the index `dataset` is served from, the same on every machine that
    builds it from the same inputs (no version number, no timings): the build signature
    (encoder, OpenIE, graph parameters, passages), what the corpora stage depends on so that
    its outputs can come from the DVC remote (issue 42)."""
    from r2adapter.store.graph_store import require_version

    v = require_version(dataset)
    return {"dataset": dataset, "signature": v.signature, "encoder": v.encoder, "openie": v.openie}


def index_extensions(adr: bool | None = None) -> list[IndexExtension]:
    """What the index build writes with a version beside the graph: ADR's dual hypergraph
    (r2adapter/adr/build.py) when `adr` (None: params.yaml adr.enabled)."""
    from r2adapter.config import adr_params

    p = adr_params()
    if not (p.enabled if adr is None else adr):
        return []
    from r2adapter.adr.build import HypergraphIndexing

    return [HypergraphIndexing(p)]


def retrieve(dataset: str, question: str, mode: str = "dense", k: int = 5) -> list[Hit]:
    """Top-k passages by one strategy (r2adapter/retrieve/strategies.py: dense, graph,
    catrag)."""
    from r2adapter.retrieve.base import check_query
    from r2adapter.retrieve.strategies import check_strategy, make_retriever

    check_strategy(mode)
    question = check_query(question)
    if not 1 <= k <= 100:
        raise R2AError(f"--top-k must be between 1 and 100, not {k}")
    return make_retriever(mode, dataset_name(dataset)).retrieve(question, k)


def evaluate_retrieval(
    dataset: str,
    modes: Sequence[str] | None = None,
    ablate: Sequence[str] = (),
    ppr: str | None = None,
) -> dict[str, object]:
    """Every strategy (or `modes`) on the dataset's complete-gold queries; `ablate` turns
    catrag components off (r2adapter/retrieve/catrag.py ABLATIONS); `ppr` (local | exact)
    forces the graph strategies' PPR solver (else graph.ppr_solver)."""
    from r2adapter.evaluate.retrieval import evaluate_retrieval as _evaluate

    return _evaluate(dataset_name(dataset), modes=modes, ablate=ablate, ppr=ppr)


def label(dataset: str, rule: str | None = None) -> LabelResult:
    """Annotate the routers' training corpora (docs/architecture.md, step 3): the two-way
    labels, then each family's own label set (`label_families`), its summary under the
    set's name in `stats` (stats["strategies"]: labels/<dataset>.strategies.jsonl, ...)."""
    from r2adapter.label.step import run_label

    name = dataset_name(dataset)
    result = run_label(name, rule)  # the two-way labels, every family's base
    for key, fam in label_families().items():
        result.stats[key] = fam.label(name)
    return result


def label_families() -> dict[str, RouterFamily]:
    """The families of r2adapter/families.py that label their own set (the k-way router's
    strategy labels, ADR's operator labels; the two-way routers share `run_label`'s), by the
    set's name, in the table's order."""
    from r2adapter.families import FAMILIES

    return {f.label_set: f for f in FAMILIES.values() if f.label_set}


def train(router: str, dataset: str, **overrides: object) -> Any:
    """Train the family `router` of r2adapter/families.py on its labels and register it as
    `candidate` (`family.fit`: one MLflow run); its training report. `overrides` (None
    values ignored: `backbone`, `epochs`, ...) go to a family that takes them
    (`family.params`: the two-way routers'); any other family reads params.yaml alone."""
    from r2adapter.families import family

    fam = family(router)
    given = {k: v for k, v in overrides.items() if v is not None}
    if not given:
        return fam.fit(dataset_name(dataset))
    make = getattr(fam, "params", None)
    if make is None:
        flags = " and ".join(f"--{k.replace('_', '-')}" for k in given)
        raise R2AError(f"{flags}: not {router}'s settings; {router} reads params.yaml {router}:")
    return fam.fit(dataset_name(dataset), make(**given))


def train_report(trained: Any) -> dict[str, Any]:
    """A family's training report as the JSON written beside it (reports/train/...)."""
    to_report = getattr(trained, "to_report", None)
    return dict(to_report() if to_report is not None else trained)


# the operating point a training report names, however its family calls it
_NOTES = {"tau": "τ* {:.2f}", "fallback": "fallback {}", "gamma": "γ {}"}


def train_note(report: dict[str, Any]) -> str:
    """One line of what a training report's family chose (its τ*, fallback, γ)."""
    return ", ".join(f.format(report[k]) for k, f in _NOTES.items() if k in report)


def require_candidate(model: str, version: str) -> None:
    """Refuse to gate any other candidate of registered `model` than `version`, the one
    this pipeline run trained (another training may have registered since)."""
    from r2adapter.registry.models import version_by_alias

    cand = version_by_alias(model, "candidate")
    if cand is None or str(cand.version) != version:
        raise R2AError(
            f"alias candidate of {model} no longer points to v{version}:"
            " another training registered since; re-run the pipeline"
        )


def receive_labels(family: str, dataset: str, labels: str, corpora: str) -> list[str]:
    """Put a pipeline task's label artifacts where the family `family` reads them (its
    `label_path`): the file `labels` as the dataset's, each file of the directory `corpora`
    (the `corpora` task's output) under its own name beside it. Each is written atomically;
    one already in place (a local run's own file) is left. A missing `corpora` directory is
    none: an empty directory uploads no object, so in a cluster it arrives as no path at
    all. Returns the corpora's file names. The trainers and the gates call it: a pod starts
    with no labels/."""
    import os
    import shutil
    from pathlib import Path

    from r2adapter.families import family as lookup

    dest = lookup(family).label_path(dataset_name(dataset))

    def put(src: Path, to: Path) -> None:
        if to.exists() and os.path.samefile(src, to):
            return
        to.parent.mkdir(parents=True, exist_ok=True)
        tmp = to.with_name(f".{to.name}.{os.getpid()}.tmp")
        shutil.copyfile(src, tmp)
        tmp.replace(to)

    if not Path(labels).is_file():
        raise R2AError(f"{labels}: the {family} label artifact is missing")
    put(Path(labels), dest)
    folder = Path(corpora) if corpora else None  # "": none (Path("") is the cwd)
    shipped = (
        sorted(p for p in folder.iterdir() if p.is_file()) if folder and folder.is_dir() else []
    )
    for p in shipped:
        put(p, dest.parent / p.name)
    return [p.name for p in shipped]


def evaluate_corpora(names: Sequence[str] | None = None) -> dict[str, Any]:
    """Every strategy and the k-way router (left one corpus out) on every labelled corpus:
    reports/corpora/all.{json,png} (issue 24)."""
    from r2adapter.reports.corpora import evaluate_corpora as run

    return run(names)


def promote(kind: str = "r2a", dataset: str | None = None) -> PromoteResult:
    """The one promotion skeleton over the family `kind` of r2adapter/families.py."""
    from r2adapter.families import family
    from r2adapter.registry.promote import promote as _promote

    return _promote(family(kind), dataset_name(dataset) if dataset else None)


def evaluate_plane(
    dataset: str,
    protocol: str = "cv5",
    budget: float | None = None,
    save: bool = True,
    two_way: Sequence[str] | None = None,
    profile: str | None = None,
) -> dict[str, object]:
    """Every router and strategy on the quality–cost plane (`r2a evaluate routing
    --protocol`); saved (JSON and plot under reports/routing/) and logged to MLflow. The
    report (r2adapter/evaluate/routing_report.py `plane_report`) is handed its routers
    here: the k-way family's plane, the two-way champions, ADR's rows."""
    from r2adapter.adr.evaluate import merge_adr_rows
    from r2adapter.kway.evaluate import kway_plane
    from r2adapter.reports.plane import plane_report

    name = dataset_name(dataset)
    from r2adapter.route.kinds import TRAINED_ROUTERS

    kinds = tuple(TRAINED_ROUTERS) if two_way is None else tuple(k for k in two_way if k)
    unknown = [k for k in kinds if k not in TRAINED_ROUTERS]
    if unknown:
        raise R2AError(f"unknown router {unknown[0]!r}: choose among {', '.join(TRAINED_ROUTERS)}")
    if protocol == "loco":  # leave one corpus out (issue 24): kway only
        from r2adapter.reports.loco import loco_report

        report = loco_report(name, budget, profile=profile)
        _loco_adr(name, report, profile)
    else:
        if profile is not None:
            raise R2AError("--cost-profile applies to --protocol loco")
        plane = kway_plane(name, protocol, budget)
        report = plane_report(plane, champion_router, kinds, extra=(merge_adr_rows,))
    if save:
        from r2adapter.kway.tracking import save_and_log

        report["saved"] = save_and_log(report)
    return report


def _loco_adr(name: str, report: dict[str, Any], profile: str | None = None) -> None:
    """ADR's head left out the same way (trained on the other corpora's ADR labels), its
    rows beside the k-way router's on the held-out corpus's ADR-labelled queries."""
    from r2adapter.adr.evaluate import merge_adr_rows
    from r2adapter.adr.labels import adr_label_path, read_adr_labels

    routers, notes = report["routers"], report["notes"]
    if not adr_label_path(name).is_file():
        notes.append(f"adr: no ADR labels for {name}: run `r2a adr label --dataset {name}`")
        return
    ids = [lab.query_id for lab in read_adr_labels(name)]
    merge_adr_rows(name, "loco", ids, routers, notes, profile)


def evaluate_routing(
    dataset: str, split: str = "test", rule: str | None = None, calibrate: float | None = None
) -> dict[str, object]:
    from r2adapter.evaluate.routing_report import routing_report

    return routing_report(dataset_name(dataset), champion_router, split, rule, calibrate)


def champion_router(kind: str) -> tuple[TrainedRouter, str]:
    """The registered champion of a two-way router kind, and its version."""
    from r2adapter.registry.models import load_router

    return load_router(kind, "champion")
