"""The corpora a family trains on: the training dataset and the extra corpora whose labels
are here (the k-way router's and ADR's `train_corpora`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

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
