"""ADR in `r2a evaluate routing --protocol cv5|test`: the router `adr` (trained softmax head,
γ fallback to moderate) beside the frozen operators `always_adr_<operator>`, with the field
names of the routing report (r2adapter/evaluate/routing_report.py `router_figures`),
computed from the ADR labels on exactly the report's queries (r2adapter/steps.py hands
`merge_adr_rows` to the report).

- cv5: the head is trained out of fold (r2adapter/data/splits.py `fold_of`): in fold k
  on every other fold, scored on fold k.
- test: trained on the train and val splits, scored on the test split.
- all: the registered champion (`r2a-router-adr@champion`, trained on its own corpus, the
  one the service routes with) decides on this corpus's queries at its own γ; without a
  champion, or one that reads another encoder's embedding, the frozen operators only, noted.

A router's `mean_ms` is the operator's (query embedding included, as labelled) plus the
head's own measured latency, one query at a time (the one timer and its thread policy,
r2adapter/evaluate/timing.py: R2A_MODEL_THREADS, default 1).

Tokens two ways: `mean_tokens` counts the context only (facts, narratives and any passages,
as labelled); `mean_prompt_tokens` counts the prompt the service's reader would be sent
(r2adapter/llm/reader.py: instructions + question + context, in the reader's tokenizer,
adr.tokenizer), as the ADR paper counts. The separators between context items are not
counted (about two tokens an item). The `adr` row's `prompt_tokens_vs_complex` is the
routed prompt tokens over always-complex's on the same queries with a 95% paired bootstrap
interval, and `prompt_tokens_by_gamma` the same ratio at each γ of adr.gammas.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from r2adapter.adr.gamma import (
    COMPLEX,
    choose_gamma,
    fit_with_gamma,
    out_of_fold,
    prompt_overhead,
    prompt_tokens,
)
from r2adapter.adr.labels import AdrLabel, figures, read_adr_labels
from r2adapter.adr.operators import OPERATORS
from r2adapter.adr.router import Decision, SoftmaxHead, decide, fallback_share
from r2adapter.config import AdrParams, adr_params
from r2adapter.data.splits import N_FOLDS, fold_of
from r2adapter.errors import R2AError
from r2adapter.evaluate.stats import ratio_interval
from r2adapter.evaluate.timing import time_per_query

__all__ = ["adr_routers", "figures", "merge_adr_rows", "out_of_fold", "prompt_overhead"]


def _time_head(head: SoftmaxHead, x: np.ndarray, gamma: float) -> np.ndarray:
    """The head's decision, one query at a time (the one timer and its thread policy:
    r2adapter/evaluate/timing.py)."""
    _, ms = time_per_query(lambda i: decide(head.probs(x[i : i + 1]), gamma), len(x))
    return ms


def adr_routers(
    dataset: str,
    protocol: str,
    query_ids: Sequence[str],
    p: AdrParams | None = None,
    adr_labels: Sequence[AdrLabel] | None = None,
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Rows `adr`, `always_adr_<operator>` and `adr_oracle` on the report's queries, and
    notes (queries without ADR labels, the fallback share at each γ of adr.gammas). On
    `test` the head trains on the labels' own train and val splits (the same hash).
    `adr_labels`: these instead of the dataset's label file."""
    from r2adapter.index.encoder import get_encoder

    p = p or adr_params()
    every = read_adr_labels(dataset) if adr_labels is None else adr_labels
    by_id = {lab.query_id: lab for lab in every}
    notes: list[str] = []
    labels = [by_id[q] for q in query_ids if q in by_id]
    missing = len(query_ids) - len(labels)
    if missing:
        notes.append(
            f"adr: {missing} of the report's {len(query_ids)} queries have no ADR labels "
            f"(figures on the other {len(labels)}): run `r2a adr label --dataset {dataset}`"
        )
    if not labels:
        raise R2AError(
            f"no ADR labels for the report's queries: run `r2a adr label --dataset {dataset}`"
        )
    rows: dict[str, dict[str, Any]] = {}
    chosen: dict[str, list[str]] = {}
    zero = np.zeros(len(labels))
    for op in OPERATORS:
        chosen[f"always_adr_{op}"] = [op] * len(labels)
    chosen["adr_oracle"] = [lab.label for lab in labels]
    for name, ops in chosen.items():
        rows[name] = figures(labels, ops, zero)
    overhead = prompt_overhead([lab.question for lab in labels], p)
    x = get_encoder().encode([lab.question for lab in labels])
    chosen_gamma: dict[str, Any] = {}
    gamma_each: np.ndarray | None = None  # cv5: each query's γ, its outer fold's choice
    if protocol == "cv5":
        probs, head = out_of_fold(labels, x, p)
        gamma_each, chosen_gamma = _fold_gammas(labels, x, p, overhead)
        p = replace(p, gamma=float(np.median(gamma_each)))
        how = "out of fold"
    elif protocol == "test":
        held = set(query_ids)
        train = [lab for lab in by_id.values() if lab.split != "test" and lab.query_id not in held]
        if not train:
            raise R2AError("no labelled train/val queries to train the ADR head on")
        head, gamma, chosen_gamma = fit_with_gamma(train, p)
        p = replace(p, gamma=gamma)
        probs = head.probs(x)
        how = "trained on train+val"
    elif protocol == "loco":
        train, sizes = other_corpora_labels(dataset)
        head, gamma, chosen_gamma = fit_with_gamma(train, p)
        p = replace(p, gamma=gamma)
        probs = head.probs(x)
        how = f"trained on {' + '.join(f'{c} ({n})' for c, n in sizes.items())}, {dataset} held out"
    else:
        served = _champion_head(dataset, notes)
        if served is None:
            _prompt_rows(labels, chosen, overhead, rows)
            return rows, notes
        head, gamma, how = served
        p = replace(p, gamma=gamma)
        probs = head.probs(x)
    ds: list[Decision] = (
        decide(probs, p.gamma)
        if gamma_each is None
        else [decide(probs[i : i + 1], float(g))[0] for i, g in enumerate(gamma_each)]
    )
    route_ms = _time_head(head, x, p.gamma)
    rows["adr"] = figures(
        labels,
        [d.operator for d in ds],
        route_ms,
        ["fallback" if d.fallback else d.operator for d in ds],
    )
    chosen["adr"] = [d.operator for d in ds]
    _llm_row(labels, p, rows, notes, chosen)
    by_gamma = {f"{g:g}": fallback_share(probs, g) for g in p.gammas}
    rows["adr"]["gamma"] = p.gamma
    if chosen_gamma:
        rows["adr"]["gamma_chosen"] = chosen_gamma
    rows["adr"]["fallback_by_gamma"] = by_gamma
    _prompt_rows(labels, chosen, overhead, rows)
    reference = prompt_tokens(labels, chosen[f"always_adr_{COMPLEX}"], overhead)
    rows["adr"]["prompt_tokens_by_gamma"] = {
        f"{g:g}": ratio_interval(
            prompt_tokens(labels, [d.operator for d in decide(probs, g)], overhead), reference
        )
        for g in p.gammas
    }
    notes.append(
        "adr: fallback share to moderate by γ: "
        + ", ".join(f"γ {g} {s:.2f}" for g, s in by_gamma.items())
        + f" (head {how})"
    )
    return rows, notes


def other_corpora_labels(held_out: str) -> tuple[list[AdrLabel], dict[str, int]]:
    """`--protocol loco`: the ADR labels (all their splits) of every corpus of the served
    union (the pipeline's dataset and `adr.train_corpora`: `label/corpora.py`
    `served_union`) the fold trains on (`outside_fold`: `held_out` and every query set over
    its passages left out, as the k-way router's fold leaves them out), a question asked in
    two query sets over one corpus counted once, and how many from each; none is a one-line
    error naming the command that makes them."""
    from r2adapter.adr.labels import adr_label_path
    from r2adapter.config import adr_params
    from r2adapter.label.corpora import outside_fold, served_union

    out: list[AdrLabel] = []
    sizes: dict[str, int] = {}
    seen: set[str] = set()
    union = served_union(adr_params().train_corpora)
    for c in outside_fold(held_out, union, adr_label_path):
        labs = [lab for lab in read_adr_labels(c) if lab.query_id not in seen]
        seen.update(lab.query_id for lab in labs)
        out += labs
        sizes[c] = len(labs)
    if not out:
        raise R2AError(
            f"loco: no other corpus has ADR labels to train on: run `r2a index --dataset C "
            f"--adr` then `r2a adr label --dataset C` for another corpus C (held out: {held_out})"
        )
    return out, sizes


def _fold_gammas(
    labels: Sequence[AdrLabel], x: np.ndarray, p: AdrParams, overhead: np.ndarray
) -> tuple[np.ndarray, dict[str, Any]]:
    """cv5: in each outer fold, γ chosen on the other four (r2adapter/adr/gamma.py
    `choose_gamma`, inner folds on those four only); each query gets its fold's γ."""
    folds = np.array([fold_of(lab.query_id) for lab in labels])
    each = np.full(len(labels), p.gamma)
    per_fold: dict[str, Any] = {}
    for k in range(N_FOLDS):
        held = folds == k
        if not held.any():
            continue
        idx = np.where(~held)[0]
        g, info = choose_gamma([labels[i] for i in idx], x[idx], p, overhead[idx])
        each[held] = g
        per_fold[str(k)] = info
    gammas = sorted({float(g) for g in each})
    return each, {
        "gamma_by_fold": {k: v["gamma"] for k, v in per_fold.items()},
        "how": next(iter(per_fold.values()))["how"].split(", out of fold")[0]
        + ", chosen in each outer fold on the other four",
        "gammas": gammas,
        "per_fold": per_fold,
    }


def _prompt_rows(
    labels: Sequence[AdrLabel],
    chosen: dict[str, list[str]],
    overhead: np.ndarray,
    rows: dict[str, dict[str, Any]],
) -> None:
    """`mean_prompt_tokens` on every row; on `adr`, the ratio to always-complex's."""
    reference = prompt_tokens(labels, chosen[f"always_adr_{COMPLEX}"], overhead)
    for name, ops in chosen.items():
        rows[name]["mean_prompt_tokens"] = float(prompt_tokens(labels, ops, overhead).mean())
    if "adr" in chosen:
        routed = prompt_tokens(labels, chosen["adr"], overhead)
        rows["adr"]["prompt_tokens_vs_complex"] = ratio_interval(routed, reference)


def _champion_head(dataset: str, notes: list[str]) -> tuple[SoftmaxHead, float, str] | None:
    """`--protocol all`: the registered champion's head, γ and a description; None (and a
    note) without a champion or when it reads another encoder's embedding."""
    from r2adapter.adr.registry import load_adr
    from r2adapter.index.encoder import get_encoder

    try:
        router, version = load_adr("champion")
    except R2AError as e:
        notes.append(f"adr: protocol all routes with the registered champion: {e}")
        return None
    name = get_encoder().name
    if router.encoder != name:
        notes.append(
            f"adr: the champion v{version} reads {router.encoder}'s embedding, not {name}'s: "
            "the frozen operators only"
        )
        return None
    where = f"trained on {router.dataset}" if router.dataset else "its corpus unrecorded"
    if router.dataset == dataset:
        where += ", this corpus: not a transfer"
    return router.head, router.gamma, f"the registered champion v{version}, {where}"


def merge_adr_rows(
    dataset: str,
    protocol: str,
    query_ids: Sequence[str],
    routers: dict[str, dict[str, Any]],
    notes: list[str],
    profile: str | None = None,
) -> None:
    """The routing report's hook: ADR's rows merged into `routers` when the dataset has ADR
    labels, each priced under the cost profile `profile` (`priced_rows`); otherwise (or on
    any failure) a note, never a failed report."""
    from r2adapter.adr.labels import adr_label_path

    if not adr_label_path(dataset).is_file():
        notes.append(
            f"adr: no ADR labels for {dataset}: run `r2a index --dataset {dataset} --adr` "
            f"then `r2a adr label --dataset {dataset}`"
        )
        return
    try:
        rows, more = adr_routers(dataset, protocol, query_ids)
    except Exception as e:  # the report stands without ADR; the note says why
        notes.append(f"adr: not reported: {type(e).__name__}: {e}")
        return
    routers.update(priced_rows(rows, profile))
    notes.extend(more)
    notes.append(
        "adr: mean_cost prices each row's mean ms and prompt tokens under the cost profile; "
        "ADR's context tokens are counted in adr.tokenizer (default the encoder's), not the "
        "reader's, and its ms are the labelled wall ms, not kway.cost's CPU ms"
    )


def priced_rows(
    rows: dict[str, dict[str, Any]], profile: str | None = None
) -> dict[str, dict[str, Any]]:
    """Each row with `mean_cost` (under `profile`, default params.yaml cost.profile) and
    `costs_by_profile`: its mean ms and mean prompt tokens priced, plus the answer's tokens
    (the profiles are linear, so the mean of the costs is the cost of the means). ADR's
    operators make no LLM call of their own (extractive insights, the default)."""
    from r2adapter.config import COST_PROFILES, cost_params

    cp = cost_params()
    for row in rows.values():
        if "mean_prompt_tokens" not in row:
            continue
        args = (row["mean_ms"], row["mean_prompt_tokens"], cp.answer_tokens)
        row["costs_by_profile"] = {}
        for n in COST_PROFILES:
            try:
                row["costs_by_profile"][n] = float(cp.priced(n).price(*args))
            except R2AError:  # a profile without its prices (local before it is measured)
                continue
        row["mean_cost"] = float(cp.priced(profile).price(*args))
    return rows


def _llm_row(
    labels: Sequence[AdrLabel],
    p: AdrParams,
    rows: dict[str, dict[str, Any]],
    notes: list[str],
    chosen: dict[str, list[str]],
) -> None:
    """`adr_llm`: the paper's LLM classifier through the configured LLM client (routing ms
    = the LLM's); skipped with a note when none is configured."""
    from r2adapter.adr.router import llm_probs
    from r2adapter.llm import get_llm

    llm = get_llm()
    if llm is None:
        notes.append("adr_llm: skipped: no LLM configured (R2A_LLM_BACKEND or R2A_LLM_BASE_URL)")
        return
    ms = np.zeros(len(labels))
    probs = np.zeros((len(labels), 3))
    failed = 0
    for i, lab in enumerate(labels):
        t = time.perf_counter()
        row, bad = llm_probs(llm, [lab.question], p.llm_timeout_s)
        ms[i] = (time.perf_counter() - t) * 1000
        probs[i], failed = row[0], failed + bad
    ds = decide(probs, p.gamma)
    chosen["adr_llm"] = [d.operator for d in ds]
    rows["adr_llm"] = figures(
        labels,
        [d.operator for d in ds],
        ms,
        ["fallback" if d.fallback else d.operator for d in ds],
    )
    notes.append(f"adr_llm: {llm.identity}, {failed} replies failed (fell back to moderate)")
