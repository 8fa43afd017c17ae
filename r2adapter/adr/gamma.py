"""ADR's γ chosen on the folds under a prompt-token budget (issue 26).

ADR eq. 1 routes a question to the class its head is surest of when that confidence is at
least γ, else to `moderate`. The paper fixes γ; here a larger γ falls back more often, and
on 2Wiki (cv5) the routed prompt tokens rise from 49% of always-complex's at γ .5 to 68% at
γ .85. With `adr.token_budget` > 0 γ is not fixed: it is the largest of `adr.gammas` whose
routed prompt tokens, out of fold on the training queries, are at most `token_budget` ×
always-complex's (the most conservative γ the budget allows); none within it: the
smallest. `r2a evaluate routing --protocol cv5` chooses it inside each outer fold on the
other four (inner folds: the same `fold_of` hash, so the held-out fold never takes part),
`--protocol test` on train+val, and `r2a train --router adr` on the queries it trains on;
the registered router keeps the chosen γ.

Prompt tokens are what the service's reader would be sent (r2adapter/llm/reader.py:
instructions + question + context), as the ADR paper counts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from r2adapter.adr.labels import AdrLabel
from r2adapter.adr.router import SoftmaxHead, decide, fit_head
from r2adapter.config import AdrParams
from r2adapter.data.splits import N_FOLDS, fold_of
from r2adapter.errors import R2AError

__all__ = [
    "COMPLEX",
    "choose_gamma",
    "fit_with_gamma",
    "out_of_fold",
    "prompt_overhead",
    "prompt_tokens",
]

COMPLEX = "complex"  # the reference of the token ratio (always-complex, the paper's)


def prompt_overhead(questions: Sequence[str], p: AdrParams) -> np.ndarray:
    """Per question, the reader prompt's tokens besides the context: the instructions and
    the question (r2adapter/llm/reader.py with an empty context)."""
    from r2adapter.adr.build import token_counter
    from r2adapter.llm.reader import answer_prompt

    return np.array(token_counter(p)([answer_prompt(q, "") for q in questions]), dtype=float)


def prompt_tokens(
    labels: Sequence[AdrLabel], chosen: Sequence[str], overhead: np.ndarray
) -> np.ndarray:
    """Per query, the prompt tokens of the operator chosen for it."""
    ctx = np.array([lab.outcomes[c].tokens for lab, c in zip(labels, chosen, strict=True)])
    return ctx.astype(float) + overhead


def out_of_fold(
    labels: Sequence[AdrLabel], x: np.ndarray, p: AdrParams
) -> tuple[np.ndarray, SoftmaxHead]:
    """(n, 3) class probabilities, each fold's from a head trained on the other folds
    (folds absent from `labels` are skipped: on a training subset, the inner folds)."""
    folds = np.array([fold_of(lab.query_id) for lab in labels])
    probs = np.zeros((len(labels), 3))
    head = None
    for k in range(N_FOLDS):
        test = folds == k
        if not test.any():
            continue
        train = ~test
        if not train.any():
            raise R2AError("cv5 needs labelled queries in more than one fold")
        head = fit_head(
            x[train], [labels[i].label for i in np.where(train)[0]], p.classifier_c, p.seed
        )
        probs[test] = head.probs(x[test])
    if head is None:
        raise R2AError("no labelled queries to choose γ on")
    return probs, head


def token_ratio(
    labels: Sequence[AdrLabel], probs: np.ndarray, gamma: float, overhead: np.ndarray
) -> float:
    """Routed prompt tokens at `gamma` over always-complex's, on these queries."""
    routed = prompt_tokens(labels, [d.operator for d in decide(probs, gamma)], overhead)
    reference = prompt_tokens(labels, [COMPLEX] * len(labels), overhead)
    return float(routed.sum() / reference.sum())


def choose_gamma(
    labels: Sequence[AdrLabel], x: np.ndarray, p: AdrParams, overhead: np.ndarray
) -> tuple[float, dict[str, Any]]:
    """γ for a head trained on `labels` (see the module's doc): p.gamma when
    adr.token_budget is 0 or fewer than two folds are present; else the largest of
    p.gammas within the budget out of fold. Returns γ and how it was chosen."""
    folds = {fold_of(lab.query_id) for lab in labels}
    if p.token_budget <= 0 or len(folds) < 2:
        why = "fixed (adr.token_budget 0)" if p.token_budget <= 0 else "fixed (one fold)"
        return p.gamma, {"gamma": p.gamma, "how": why}
    probs, _ = out_of_fold(labels, x, p)
    ratios = {g: token_ratio(labels, probs, g, overhead) for g in sorted(p.gammas)}
    within = [g for g, r in ratios.items() if r <= p.token_budget]
    gamma = max(within) if within else min(ratios)
    return gamma, {
        "gamma": gamma,
        "how": f"largest γ within {p.token_budget:g} of always-complex's prompt tokens, "
        f"out of fold on {len(labels)} queries"
        + ("" if within else " (none within: the smallest)"),
        "ratio_by_gamma": {f"{g:g}": round(r, 4) for g, r in ratios.items()},
    }


def fit_with_gamma(
    labels: Sequence[AdrLabel], p: AdrParams, x: np.ndarray | None = None
) -> tuple[SoftmaxHead, float, dict[str, Any]]:
    """The head fitted on `labels` (their questions embedded unless `x` is given) and its γ
    chosen on them (`choose_gamma`): what `r2a train --router adr`, `--protocol test` and
    `--protocol loco` each fit."""
    if x is None:
        from r2adapter.index.encoder import get_encoder

        x = get_encoder().encode([lab.question for lab in labels])
    head = fit_head(x, [lab.label for lab in labels], p.classifier_c, p.seed)
    overhead = prompt_overhead([lab.question for lab in labels], p)
    gamma, how = choose_gamma(labels, x, p, overhead)
    return head, gamma, how
