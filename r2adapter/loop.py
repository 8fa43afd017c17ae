"""The retraining loop, defined once: its steps in order and the routers it trains.

`r2a retrain` runs it (`run_loop`), pipelines/retrain.py builds its Kubeflow graph from it
(one train → register → promote → deploy branch per router), and dvc.yaml's stages follow
it (tests/test_loop.py fails when they disagree: DVC cannot import Python). Each step is
the `r2adapter.steps` function of the same name; every promotion is the one skeleton over
the family's entry in r2adapter/families.py (`steps.promote`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from r2adapter.errors import R2AError
from r2adapter.route.kinds import TRAINED_ROUTERS, RouterKind

if TYPE_CHECKING:
    from r2adapter.registry.promote import PromoteResult


STEPS = (
    "validate",
    "index",
    "label",
    "corpora",
    "train",
    "promote",
    "train_kway",
    "promote_kway",
    "train_adr",
    "promote_adr",
    "evaluate",
)
PER_ROUTER = ("train", "promote")  # the steps run once for each router, in ROUTERS' order
# the families trained once each, on the labels `label` writes beside the two-way labels:
# the cost-aware router over every strategy (r2adapter/kway, the strategy labels) and ADR's
# head (r2adapter/adr, the ADR labels, when `label` wrote them: adr.enabled and the index
# holds the hypergraph); `run_loop(families=False)` skips these
KWAY_STEPS = ("train_kway", "promote_kway")
# the development corpora (params.yaml pipeline.corpora) indexed and labelled for the
# families' union (kway.train_corpora, adr.train_corpora); left out with the families
CORPORA_STEP = "corpora"
ADR_STEPS = ("train_adr", "promote_adr")
FAMILY_STEPS: dict[str, tuple[str, str]] = {"kway": KWAY_STEPS, "adr": ADR_STEPS}
# Every trained router of the one table (route/kinds.py: name, MLflow model, backbone), in
# its order: r2a (the fine-tuned encoder, the paper's) then r2a_embed (a head over the
# retrieval embedding).
ROUTERS: tuple[RouterKind, ...] = tuple(TRAINED_ROUTERS.values())


def select_routers(kinds: Sequence[str] | None = None) -> tuple[RouterKind, ...]:
    """The loop's routers, or those of `kinds` (in the loop's order); an unknown kind is a
    one-line error."""
    if not kinds:
        return ROUTERS
    known = {r.name for r in ROUTERS}
    unknown = [k for k in kinds if k not in known]
    if unknown:
        raise R2AError(f"unknown router '{unknown[0]}': choose among {', '.join(sorted(known))}")
    return tuple(r for r in ROUTERS if r.name in kinds)


@dataclass
class LoopResult:
    promoted: list[str] = field(default_factory=list)  # kinds whose champion moved
    promotions: dict[str, PromoteResult] = field(default_factory=dict)


def run_loop(
    dataset: str,
    openie: str,
    routers: Sequence[RouterKind] = ROUTERS,
    say: Callable[[str], None] = print,
    after_promote: Callable[[LoopResult], None] | None = None,
    families: bool = True,
) -> LoopResult:
    """Every step of STEPS on this machine, in order, one line each; `after_promote` runs
    after the last promotion, before evaluate (the CLI tells a running service to reload
    there, as the pipeline deploys there). Without `families`, the k-way and ADR steps
    (FAMILY_STEPS) and the corpora they also train on (CORPORA_STEP) are left out."""
    from r2adapter import steps

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
        adr = lab.stats.get("adr")
        if isinstance(adr, dict) and adr.get("skipped"):
            skipped["adr"] = str(adr["skipped"])

    def corpora() -> None:
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

    def promote_family(name: str, step: str) -> None:
        """`step` of STEPS: the one promotion skeleton over the family `name`."""
        pr = steps.promote(name, dataset)
        out.promotions[name] = pr
        if pr.promoted:
            out.promoted.append(name)
        moved = f"champion moved to v{pr.candidate}" if pr.promoted else "kept"
        say(f"{step}: {moved}: " + "; ".join(map(str, pr.reasons)))

    def train(r: RouterKind) -> None:
        tr = steps.train(dataset, r.backbone)
        say(f"train: {tr.kind} v{tr.version} registered as candidate (τ* {tr.tau:.2f})")

    def promote(r: RouterKind) -> None:
        promote_family(r.name, f"promote: {r.name}")

    def train_kway() -> None:
        k = steps.train_kway(dataset)
        say(f"train_kway: v{k['version']} registered as candidate (fallback {k['fallback']})")

    def promote_kway() -> None:
        promote_family("kway", "promote_kway")

    def train_adr() -> None:
        a = steps.train_adr(dataset)
        say(f"train_adr: v{a['version']} registered as candidate (γ {a['gamma']})")

    def promote_adr() -> None:
        promote_family("adr", "promote_adr")

    def evaluate() -> None:
        if after_promote is not None:
            after_promote(out)
        retrieval = steps.evaluate_retrieval(dataset)
        routing = steps.evaluate_routing(dataset, "test")
        modes = cast("dict[str, dict[str, float]]", retrieval["modes"])
        routed = cast("dict[str, dict[str, float]]", routing["routers"])
        figures = [f"{m} R@5 {v['recall@5']:.3f}" for m, v in modes.items()]
        figures += [
            f"{r.name} R@5 {routed[r.name]['recall@5']:.3f}" for r in routers if r.name in routed
        ]
        line = ", ".join(figures)
        say(f"evaluate: test split: {line}")
        if families:  # every labelled corpus, the k-way router left one corpus out on each
            rep = steps.evaluate_corpora()
            say(f"evaluate: corpora {', '.join(rep['corpora'])}: {rep['saved']['json']}")

    once: dict[str, Callable[[], None]] = {
        "validate": validate,
        "index": index,
        "label": label,
        "corpora": corpora,
        "train_kway": train_kway,
        "promote_kway": promote_kway,
        "train_adr": train_adr,
        "promote_adr": promote_adr,
        "evaluate": evaluate,
    }
    each: dict[str, Callable[[RouterKind], None]] = {"train": train, "promote": promote}
    assert set(once) | set(each) == set(STEPS) and set(each) == set(PER_ROUTER)
    family_of = {step: name for name, pair in FAMILY_STEPS.items() for step in pair}
    for step in STEPS:
        if (step in family_of or step == CORPORA_STEP) and not families:
            continue
        if family_of.get(step) in skipped:
            say(f"{step}: skipped: {skipped[family_of[step]]}")
            continue
        if step in each:
            for r in routers:
                each[step](r)
        else:
            once[step]()
    return out
