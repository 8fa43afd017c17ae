"""K-fold cross-validation over all labelled queries, and the two-way routers' out-of-fold
scores (`r2a evaluate routing --protocol cv5`).

Fold of a query: a hash of its id, so a query keeps its fold when others are added. In fold
k, fold k is the test set, fold k+1 the validation set (τ* and the periodic search read it)
and the rest is training: every router is scored on queries it never saw, and its threshold
on queries it was not fitted on. Training a fine-tuned encoder five times is slow (minutes
each on 2 cores), so each fold's out-of-fold scores are cached under `.cache/cv/` by a hash
of the labels and the router's parameters: a second report reads them back.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from r2adapter.config import RouterParams, settings
from r2adapter.data.splits import N_FOLDS, fold_of, fold_roles
from r2adapter.label.annotate import LabelRecord

log = logging.getLogger(__name__)


def split_for_fold(
    records: Sequence[LabelRecord], fold: int, n_folds: int = N_FOLDS
) -> list[LabelRecord]:
    """The records with `split` set to their role in `fold` (what `train_router` reads)."""
    roles = fold_roles(fold, n_folds)
    return [replace(r, split=roles[fold_of(r.query_id, n_folds)]) for r in records]


def _cache_key(records: Sequence[LabelRecord], p: RouterParams, fold: int, n: int) -> str:
    h = hashlib.sha256()
    for r in sorted(records, key=lambda r: r.query_id):
        h.update(json.dumps(asdict(r), sort_keys=True).encode())
    params = asdict(p)
    # which rewrites fire does not touch training: a new ε field keeps the cached folds
    params.pop("structural_epsilon", None)
    h.update(json.dumps(params, sort_keys=True, default=str).encode())
    h.update(f"{fold}/{n}".encode())
    return h.hexdigest()[:20]


def two_way_oof(
    kind: str,
    records: Sequence[LabelRecord],
    dataset: str,
    n_folds: int = N_FOLDS,
    progress: bool = True,
) -> dict[str, dict[str, float]]:
    """query id → {p_dense, p_graph, tau} out of fold for the two-way router `kind` (its
    pipeline parameters), each fold's router trained by `train_router` on the other folds."""
    from r2adapter.config import router_params
    from r2adapter.route.kinds import TRAINED_ROUTERS
    from r2adapter.train.fit import train_router

    p = router_params(TRAINED_ROUTERS[kind].backbone)
    out: dict[str, dict[str, float]] = {}
    root = settings().root / ".cache" / "cv" / dataset / kind
    for fold in range(n_folds):
        path = root / f"fold{fold}-{_cache_key(records, p, fold, n_folds)}.json"
        if path.is_file():
            out.update(json.loads(path.read_text()))
            continue
        log.warning("cv: training %s for fold %d/%d (cached after)", kind, fold + 1, n_folds)
        split = split_for_fold(records, fold, n_folds)
        result = train_router(list(split), p, progress=progress, dataset=dataset)
        router = result.router
        test = [r for r in split if r.split == "test"]
        if router.uses_embedding:
            from r2adapter.index.encoder import get_encoder

            qvecs: np.ndarray | None = get_encoder(router.cfg.encoder).encode(
                [r.question for r in test]
            )
        else:
            qvecs = None
        pd, pg = router.score([r.question for r in test], qvecs)
        scores = {
            r.query_id: {"p_dense": float(a), "p_graph": float(b), "tau": float(router.tau)}
            for r, a, b in zip(test, pd, pg, strict=True)
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(scores, sort_keys=True))
        tmp.replace(path)
        out.update(scores)
    return out


def cached_folds(path: Path) -> list[Path]:
    return sorted(path.glob("fold*.json"))
