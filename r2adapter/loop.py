"""The retraining loop, defined once: its steps in order and the routers it trains.

`r2a retrain` runs it (`run_loop`), pipelines/retrain.py builds its Kubeflow graph from it
(one train → register → promote → deploy branch per family of r2adapter/families.py), and
dvc.yaml's stages follow it (tests/test_loop.py fails when they disagree: DVC cannot import
Python). Each step is the `r2adapter.steps` function of the same name; `train` and
`promote` run once for each family of the table, in its order (`steps.train(name)`: the
family's `fit`; `steps.promote(name)`: the one promotion skeleton over it), so a family
added to the table is trained and promoted with the others.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from r2adapter.errors import R2AError
from r2adapter.route.kinds import TRAINED_ROUTERS, RouterKind

if TYPE_CHECKING:
    from r2adapter.registry.promote import PromoteResult


STEPS = ("validate", "index", "label", "corpora", "train", "promote", "evaluate")
PER_ROUTER = ("train", "promote")  # the steps run once for each family, in the table's order
# the development corpora (params.yaml pipeline.corpora) indexed and labelled for the union
# that the families with a label set of their own train on (kway.train_corpora,
# adr.train_corpora); left out when no such family is trained
CORPORA_STEP = "corpora"
# The two-way routers of the one table (route/kinds.py: name, MLflow model, backbone), in
# its order: r2a (the fine-tuned encoder, the paper's) then r2a_embed (a head over the
# retrieval embedding); the first rows of r2adapter/families.py.
ROUTERS: tuple[RouterKind, ...] = tuple(TRAINED_ROUTERS.values())


def families() -> tuple[str, ...]:
    """Every family of r2adapter/families.py, in the table's order: what the loop trains."""
    from r2adapter.families import FAMILIES

    return tuple(FAMILIES)


def select_routers(names: Sequence[str] | None = None) -> tuple[str, ...]:
    """The loop's families, or those of `names` (in the table's order); an unknown name is a
    one-line error."""
    every = families()
    if not names:
        return every
    unknown = [n for n in names if n not in every]
    if unknown:
        raise R2AError(f"unknown router '{unknown[0]}': choose among {', '.join(every)}")
    return tuple(n for n in every if n in names)


@dataclass
class LoopResult:
    promoted: list[str] = field(default_factory=list)  # families whose champion moved
    promotions: dict[str, PromoteResult] = field(default_factory=dict)


def run_loop(
    dataset: str,
    openie: str,
    routers: Sequence[str] | None = None,
    say: Callable[[str], None] = print,
    after_promote: Callable[[LoopResult], None] | None = None,
) -> LoopResult:
    """Every step of STEPS on this machine, in order, one line each; `train` and `promote`
    for each family of `routers` (None: every family of the table). `after_promote` runs
    after the last promotion, before evaluate (the CLI tells a running service to reload
    there, as the pipeline deploys there). The corpora step and the corpora report run
    only when a family with a label set of its own is trained (they train on the union);
    a family whose labels the label step did not write is skipped, with its reason."""
    from r2adapter import steps

    names = select_routers(routers)
    from r2adapter.families import family

    union = any(family(n).label_set for n in names)
    out = LoopResult()
    skipped: dict[str, str] = {}  # family → why its labels were not written

    def validate() -> None:
        report = steps.validate(dataset)
        if not report.success:
            raise R2AError(
                f"{dataset}: validation failed; run `r2a data validate --dataset {dataset}`"
            )
        say(f"validate: {len(report.checks)} expectations passed")

    def index() -> None:
        idx = steps.index(dataset, openie)
        say(f"index: version {idx.version} ({'new' if idx.created else 'unchanged'})")

    def label() -> None:
        lab = steps.label(dataset)
        say(f"label: {len(lab.records)} queries ({lab.rule}), md5 {lab.md5}")
        for key, fam in steps.label_families().items():
            stats = lab.stats.get(key)
            if isinstance(stats, dict) and stats.get("skipped"):
                skipped[fam.name] = str(stats["skipped"])

    def corpora() -> None:
        if not union:
            return
        from r2adapter.config import pipeline_params

        names = [c for c in pipeline_params().corpora if c != dataset]
        for c in names:
            idx = steps.index(c, openie)
            lab = steps.label(c)
            say(
                f"corpora: {c}: index version {idx.version} "
                f"({'new' if idx.created else 'unchanged'}), {len(lab.records)} queries labelled"
            )
        if not names:
            say("corpora: none listed (params.yaml pipeline.corpora)")

    def train(name: str) -> None:
        rep = steps.train_report(steps.train(name, dataset))
        note = steps.train_note(rep)
        say(f"train: {name} v{rep['version']} registered as candidate ({note or 'no note'})")

    def promote(name: str) -> None:
        pr = steps.promote(name, dataset)
        out.promotions[name] = pr
        if pr.promoted:
            out.promoted.append(name)
        moved = f"champion moved to v{pr.candidate}" if pr.promoted else "kept"
        say(f"promote: {name}: {moved}: " + "; ".join(map(str, pr.reasons)))

    def evaluate() -> None:
        if after_promote is not None:
            after_promote(out)
        retrieval = steps.evaluate_retrieval(dataset)
        routing = steps.evaluate_routing(dataset, "test")
        modes = cast("dict[str, dict[str, float]]", retrieval["modes"])
        routed = cast("dict[str, dict[str, float]]", routing["routers"])
        figures = [f"{m} R@5 {v['recall@5']:.3f}" for m, v in modes.items()]
        figures += [f"{n} R@5 {routed[n]['recall@5']:.3f}" for n in names if n in routed]
        line = ", ".join(figures)
        say(f"evaluate: test split: {line}")
        if union:  # every labelled corpus, the k-way router left one corpus out on each
            rep = steps.evaluate_corpora()
            say(f"evaluate: corpora {', '.join(rep['corpora'])}: {rep['saved']['json']}")

    once: dict[str, Callable[[], None]] = {
        "validate": validate,
        "index": index,
        "label": label,
        "corpora": corpora,
        "evaluate": evaluate,
    }
    each: dict[str, Callable[[str], None]] = {"train": train, "promote": promote}
    assert set(once) | set(each) == set(STEPS) and set(each) == set(PER_ROUTER)
    for step in STEPS:
        if step not in each:
            once[step]()
            continue
        for name in names:
            if name in skipped:
                say(f"{step}: {name}: skipped: {skipped[name]}")
            else:
                each[step](name)
    return out
