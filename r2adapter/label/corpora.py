"""The corpora a family trains on: the training dataset and the extra corpora whose labels
are here (the k-way router's and ADR's `train_corpora`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from r2adapter.errors import R2AError

log = logging.getLogger(__name__)


def training_corpora(
    dataset: str, extra: Sequence[str], label_path: Callable[[str], Path] | None = None
) -> list[str]:
    """The training dataset, then the `extra` corpora (kway/adr.train_corpora), once each.
    With `label_path` (the family's label file of a corpus), an extra corpus without its
    labels here is left out with one warning naming the command that writes them (the loop's
    `corpora` step does, and the Kubeflow pipeline's `corpora` task ships them to the
    trainers)."""
    names = list(dict.fromkeys([dataset, *extra]))
    if label_path is None:
        return names
    kept = [dataset]
    for c in names[1:]:
        path = label_path(c)
        if path.is_file():
            kept.append(c)
            continue
        log.warning(
            "%s: no labels at %s: left out of the union (run `r2a index --dataset %s` and "
            "`r2a label --dataset %s`)",
            *(c, path, c, c),
        )
    return kept


def served_union(extra: Sequence[str]) -> list[str]:
    """What a family's champion trains on: the pipeline's dataset, then `extra` (its
    `train_corpora`). A leave-one-out fold draws its training corpora from this union, not
    from every labelled dataset: a corpus kept out of every `train_corpora` (musique_mixed,
    the unseen-corpus proxy) is evaluated, never trained on, in any fold."""
    from r2adapter.config import pipeline_dataset

    return list(dict.fromkeys([pipeline_dataset(), *extra]))


def corpus_key(dataset: str) -> str | None:
    """The stored corpus's identity (graph_store.corpus_key); None when the dataset is not
    loaded or the database cannot be reached (then it is its own corpus)."""
    from r2adapter.store.graph_store import corpus_key as key

    try:
        return key(dataset)
    except R2AError:
        return None


def outside_fold(
    held_out: str, names: Sequence[str], label_path: Callable[[str], Path]
) -> list[str]:  # fmt: skip
    """The corpora of `names` a leave-one-out fold trains on: those with their labels here
    (`label_path`, the family's label file), less `held_out` and every query set over the
    same passages (musique_dev is held out with musique_dev_mixed: `corpus_key`)."""
    held = corpus_key(held_out)
    return [
        c
        for c in names
        if c != held_out and label_path(c).is_file() and (held is None or corpus_key(c) != held)
    ]
