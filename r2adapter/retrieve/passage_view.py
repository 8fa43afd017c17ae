"""A corpus's passage view: what the routers' features read of its index (the passage
embeddings and titles), saved beside its labels (labels/<dataset>.passages.npz).

The development corpora (params.yaml pipeline.corpora) exist in the loop for their labels,
on which the k-way router trains and is evaluated; its features read each corpus's dense
scores and titles (r2adapter/kway/features.py). With the view beside the labels, a machine
whose labels came from the DVC remote (a fresh clone: `dvc repro --pull` restores the
corpora stage's outputs instead of indexing and labelling again, issue 42) trains and
evaluates on the same numbers without indexing those corpora. The served dataset has no
view: the service and its label stage read the live index.

`PassageViews` is a GraphSource (r2adapter/route/evidence.py): a dataset's view when its
file exists, else the index in Postgres (`GRAPHS`). The view was written by the stage that
wrote the labels, from the index those labels were computed on, so the two always agree;
the live index may be newer than both.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from r2adapter.config import settings
from r2adapter.errors import R2AError

VIEW_FORMAT = 1
_KEYS = ("format", "dataset", "version", "encoder", "passage_ids", "passage_titles", "passage_emb")


class PassageViewError(R2AError):
    pass


def view_path(dataset: str) -> Path:
    return settings().root / "labels" / f"{dataset}.passages.npz"


@dataclass(frozen=True)
class ViewVersion:
    id: int
    encoder: str


@dataclass(frozen=True)
class PassageView:
    dataset: str
    version: ViewVersion
    passage_ids: list[str]
    passage_titles: list[str]
    passage_emb: np.ndarray  # (P, d) float32, normalised: the index's own vectors


def write_view(dataset: str, path: Path | None = None, graphs: Any = None) -> Path:
    """Save the passage view of `dataset`'s index (its own or the one it shares), atomically."""
    if graphs is None:
        from r2adapter.retrieve.graph_index import GRAPHS as graphs
    g = graphs.get(dataset)
    path = path or view_path(dataset)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:  # a file object: np.savez would append .npz to a name
        np.savez_compressed(
            f,
            format=np.int64(VIEW_FORMAT),
            dataset=np.str_(dataset),
            version=np.int64(g.version.id),
            encoder=np.str_(g.version.encoder),
            passage_ids=np.array(g.passage_ids, dtype=np.str_),
            passage_titles=np.array(g.passage_titles, dtype=np.str_),
            passage_emb=np.ascontiguousarray(g.passage_emb, dtype=np.float32),
        )
    tmp.replace(path)  # never a half-written view
    return path


def read_view(path: Path) -> PassageView:
    """The view in `path`; a file that is not one is a one-line error naming the relabel."""
    relabel = "remove it and run `dvc repro corpora` (or `r2a index` for the dataset)"
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in _KEYS if k not in z.files]
            if missing:
                raise PassageViewError(f"{path} is not a passage view (no {missing[0]}): {relabel}")
            if int(z["format"]) != VIEW_FORMAT:
                raise PassageViewError(
                    f"{path} is a passage view of format {int(z['format'])}, this code reads "
                    f"{VIEW_FORMAT}: {relabel}"
                )
            ids, titles = [str(s) for s in z["passage_ids"]], [str(s) for s in z["passage_titles"]]
            emb = np.asarray(z["passage_emb"], dtype=np.float32)
            view = PassageView(
                str(z["dataset"]),
                ViewVersion(int(z["version"]), str(z["encoder"])),
                ids,
                titles,
                emb,
            )
    except (OSError, ValueError, KeyError) as e:  # unreadable, not a zip, a pickled field
        raise PassageViewError(f"{path} cannot be read as a passage view ({e}): {relabel}") from e
    if emb.ndim != 2 or len(ids) != len(titles) or len(ids) != emb.shape[0]:
        raise PassageViewError(
            f"{path}: {len(ids)} ids, {len(titles)} titles and {emb.shape[0]} vectors: {relabel}"
        )
    return view


class PassageViews:
    """A GraphSource: `dataset`'s saved view when labels/<dataset>.passages.npz exists (read
    once per file change), else the index (`graphs`, default GRAPHS). A view of another
    encoder than the one that embeds the queries is refused in one line."""

    def __init__(self, graphs: Any = None) -> None:
        self._graphs = graphs
        self._views: dict[Path, tuple[float, PassageView]] = {}
        self._lock = threading.Lock()

    def get(self, dataset: str) -> Any:
        path = view_path(dataset)
        try:
            mtime = path.stat().st_mtime
        except FileNotFoundError:
            graphs = self._graphs
            if graphs is None:
                from r2adapter.retrieve.graph_index import GRAPHS as graphs
            return graphs.get(dataset)
        with self._lock:
            have = self._views.get(path)
            if have is None or have[0] != mtime:
                view = read_view(path)
                _check_encoder(path, view)
                have = (mtime, view)
                self._views[path] = have
        return have[1]


def _check_encoder(path: Path, view: PassageView) -> None:
    from r2adapter.index.encoder import get_encoder

    name = get_encoder().name
    if view.version.encoder != name:
        raise PassageViewError(
            f"{path} holds {view.version.encoder} vectors and the queries are embedded with "
            f"{name}: relabel the corpus with `dvc repro corpora@{view.dataset}`"
        )


PASSAGE_VIEWS = PassageViews()
