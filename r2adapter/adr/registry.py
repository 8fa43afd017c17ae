"""ADR's trained intent classifier in the MLflow registry, as the R²Adapter and k-way
routers are: `r2a train --router adr` fits the softmax head on the ADR labels' train and
val splits (`labels/<dataset>.adr.jsonl`), logs the run, registers `r2a-router-adr` with
alias `candidate` and its test-split figures as tags; `r2a promote --router adr` moves
`champion` to it when the gate holds on the frozen test split: recall and FCR not worse
(the k-way gate's tolerance), context tokens, ms and passages not costlier (its cost
tolerance). The first model becomes champion; a changed γ is another operating point
and replaces the champion."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import numpy as np

from r2adapter.adr.labels import AdrLabel, adr_label_path, figures, read_adr_labels
from r2adapter.adr.router import AdrRouter, fit_head
from r2adapter.config import AdrParams, adr_params
from r2adapter.errors import R2AError
from r2adapter.kway.registry import COST_TOLERANCE, RECALL_TOLERANCE
from r2adapter.kway.registry import gate as kway_gate

MODEL = "r2a-router-adr"


def test_figures(router: AdrRouter, labels: list[AdrLabel], x: np.ndarray) -> dict[str, float]:
    """Recall, FCR, passages, context tokens and ms of the router's operators on the test
    split (the labels' ms: the operator's, query embedding included)."""
    te = [i for i, lab in enumerate(labels) if lab.split == "test"]
    if not te:
        return {}
    ds = router.decide(x[te])
    f = figures([labels[i] for i in te], [d.operator for d in ds], np.zeros(len(te)))
    out = {k: float(f[k]) for k in ("recall", "fcr", "mean_passages", "mean_tokens", "mean_ms")}
    out["fallback_share"] = float(np.mean([d.fallback for d in ds]))
    return out


def _labels_and_x(dataset: str) -> tuple[list[AdrLabel], np.ndarray, str]:
    from r2adapter.index.encoder import get_encoder

    labels = read_adr_labels(dataset)
    enc = get_encoder()
    return labels, enc.encode([lab.question for lab in labels]), enc.name


def train_and_register_adr(dataset: str, p: AdrParams | None = None) -> dict[str, Any]:
    import mlflow

    from r2adapter.adr.pyfunc import AdrModel
    from r2adapter.registry.models import register_candidate
    from r2adapter.registry.tracking import mlflow_setup

    t0 = time.perf_counter()
    p = p or adr_params()
    labels, x, encoder = _labels_and_x(dataset)
    tr = [i for i, lab in enumerate(labels) if lab.split != "test"]
    if not tr:
        raise R2AError(f"{dataset}: the ADR labels have no train or val queries to train on")
    md5 = hashlib.md5(adr_label_path(dataset).read_bytes()).hexdigest()
    exp = mlflow_setup()
    with mlflow.start_run(experiment_id=exp, run_name=f"adr-{dataset}") as run:
        mlflow.log_params(
            {
                "adr.gamma": p.gamma,
                "adr.classifier_c": p.classifier_c,
                "adr.seed": p.seed,
                "encoder": encoder,
                "dataset": dataset,
                "label_md5": md5,
                "n_train": len(tr),
                "n_test": len(labels) - len(tr),
            }
        )
        head = fit_head(x[tr], [labels[i].label for i in tr], p.classifier_c, p.seed)
        router = AdrRouter(head, p.gamma, encoder, dataset)
        test = test_figures(router, labels, x)
        mlflow.log_metrics({f"test_{k}": v for k, v in test.items()})
        version = register_candidate(MODEL, AdrModel(), router.save, dataset, test)
    return {
        "router": "adr",
        "version": version,
        "run_id": run.info.run_id,
        "gamma": p.gamma,
        "n_train": len(tr),
        "seconds": time.perf_counter() - t0,
        **{f"test_{k}": v for k, v in test.items()},
    }


def load_adr(alias: str = "champion") -> tuple[AdrRouter, str]:
    """The registered ADR classifier behind an alias, and its version; none is a one-line
    error naming the commands that make one."""
    from r2adapter.adr import AdrUnavailable
    from r2adapter.registry.models import version_by_alias

    v = version_by_alias(MODEL, alias)
    if v is None:
        raise AdrUnavailable(
            f"no {alias} for {MODEL}: run `r2a train --dataset D --router adr` then "
            "`r2a promote --router adr`"
        )
    import mlflow.pyfunc

    model = mlflow.pyfunc.load_model(f"models:/{MODEL}@{alias}")
    return model.unwrap_python_model().router, str(v.version)


def gate(cand: dict[str, float], champ: dict[str, float]) -> tuple[bool, list[str]]:
    """The k-way gate (recall, ms, passages) plus ADR's own terms: FCR not worse, context
    tokens not costlier."""
    ok, why = kway_gate(cand, champ)
    if cand["fcr"] < champ["fcr"] - RECALL_TOLERANCE:
        why.append(f"fcr {cand['fcr']:.3f} < champion {champ['fcr']:.3f}")
    if cand["mean_tokens"] > champ["mean_tokens"] * (1 + COST_TOLERANCE):
        why.append(f"mean_tokens {cand['mean_tokens']:.0f} > champion {champ['mean_tokens']:.0f}")
    return not why, why


def promote_adr(dataset: str | None = None) -> dict[str, Any]:
    from r2adapter.registry.models import candidate_of, client, version_by_alias
    from r2adapter.registry.promote import PromoteResult

    cand_v, dataset = candidate_of(MODEL, dataset, "r2a train --dataset D --router adr")
    champ_v = version_by_alias(MODEL, "champion")
    cand, _ = load_adr("candidate")
    labels, x, _ = _labels_and_x(dataset)
    cand_m = test_figures(cand, labels, x)
    if not cand_m:
        raise R2AError(f"{dataset}: the ADR labels have no test split to gate on")
    champ_m = None
    if champ_v is not None and champ_v.version == cand_v.version:
        ok, reasons, champ_m = False, ["the candidate is already champion"], cand_m
    elif champ_v is None:
        ok, reasons = True, ["no champion yet: the first model becomes champion"]
    else:
        champ, _ = load_adr("champion")
        if champ.gamma != cand.gamma or champ.encoder != cand.encoder:
            moved = f"{champ.gamma}/{champ.encoder} → {cand.gamma}/{cand.encoder}"
            ok, reasons = True, [f"γ or the encoder changed ({moved}): the candidate replaces"]
        else:
            champ_m = test_figures(champ, labels, x)
            ok, reasons = gate(cand_m, champ_m)
            if ok:
                reasons = ["not worse on recall and FCR, not costlier in tokens, ms or passages"]
    if ok:
        client().set_registered_model_alias(MODEL, "champion", cand_v.version)
    before = champ_v.version if champ_v else None
    return PromoteResult("adr", ok, cand_v.version, before, reasons, cand_m, champ_m).to_report()
