"""What the k-way router reads: the query embedding dense retrieval computes anyway, and the
evidence of the cheapest stage (dense), from one matrix–vector product over the corpus's
passage embeddings the in-memory index holds (graph retrieval computes it for its passage
seeds anyway):

- `query_embedding`: the normalised retrieval embedding (384 for MiniLM);
- `title_cover`: how many of the dense top-5 titles the question names (one-hot 0..3+,
  `r2adapter/route/evidence.py`);
- `dense_scores`: the dense top-1 cosine, its margins over the 2nd and 5th, and the gap
  between the top-5 mean and the 6th–20th mean (does dense retrieval find a clear answer?);
- `question_shape`: the question's form, read from its words alone (no parser, no corpus):
  its wh-word, capitalised spans (named things), "of" and possessive chains, relative
  clauses, comparison cues and length (`question_shape`), meant to carry across corpora.

Each group's value is measured by out-of-fold ablation (`r2a evaluate routing --protocol
cv5` reports it); params.yaml `kway.features` keeps those that earn their place.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from r2adapter.config import ROUTING_FEATURES
from r2adapter.errors import DatabaseError
from r2adapter.route.evidence import GraphSource, normalise_title, title_cover

DENSE_SCORES = 4
TOP = 5
WH = ("who", "what", "which", "when", "where", "how", "yesno")
SHAPE = len(WH) + 7
WIDTHS = {
    "title_cover": ROUTING_FEATURES["title_cover"],
    "dense_scores": DENSE_SCORES,
    "question_shape": SHAPE,
}
_YESNO = {"is", "are", "was", "were", "do", "does", "did", "can", "could", "has", "have", "had"}
_COMPARE = re.compile(
    r"\b(or|both|same|first|earlier|later|older|younger|longer|shorter|more|less|than|"
    r"either|neither|born first|died first)\b"
)
_SPAN = re.compile(r"\b[A-Z][\w'’.-]*(?:\s+(?:of\s+|the\s+|de\s+|von\s+)?[A-Z][\w'’.-]*)*")
_RELATIVE = re.compile(r"\s(that|who|whose|whom|which|where|when)\s")


_QVECS: dict[tuple[str, str], np.ndarray] = {}  # (encoder, question) → its embedding
_QVECS_MAX = 200_000  # ≈ 300 MB of 384-d vectors; cleared when full


def embed_questions(questions: Sequence[str]) -> np.ndarray:
    """The retrieval encoder's embeddings of `questions`, each question encoded once per
    process: the left-one-corpus-out reports read every corpus once per held-out corpus
    (r2a evaluate corpora: five times), and the query embedding does not change between."""
    from r2adapter.index.encoder import get_encoder

    enc = get_encoder()
    todo = list(dict.fromkeys(q for q in questions if (enc.name, q) not in _QVECS))
    if todo:
        if len(_QVECS) + len(todo) > _QVECS_MAX:
            _QVECS.clear()
        vecs = np.asarray(enc.encode(todo), dtype=np.float32)
        _QVECS.update(((enc.name, q), v) for q, v in zip(todo, vecs, strict=True))
    if not questions:
        return np.zeros((0, enc.dim), dtype=np.float32)
    return np.stack([_QVECS[(enc.name, q)] for q in questions])


def question_shape(q: str) -> np.ndarray:
    """The question's form (SHAPE values in [0, 1]): its wh-word (one-hot over WH, a leading
    auxiliary counting as yes/no), then capitalised spans after the first word (/4), " of "
    (/3), possessives (/2), a relative clause, a comparison cue, a conjunction of two spans
    ("X or Y", "X and Y"), and its length in words (/40), each capped at 1."""
    text = q.strip()
    words = text.split()
    first = words[0].lower().strip("\"'") if words else ""
    out = np.zeros(SHAPE, dtype=np.float32)
    if first in WH:
        out[WH.index(first)] = 1.0
    elif first in _YESNO:
        out[WH.index("yesno")] = 1.0
    low = f" {text.lower()} "
    spans = _SPAN.findall(" ".join(words[1:]))  # the first word is capitalised anyway
    n = len(WH)
    out[n] = min(len(spans), 4) / 4
    out[n + 1] = min(low.count(" of "), 3) / 3
    out[n + 2] = min(low.count("'s ") + low.count("’s "), 2) / 2
    out[n + 3] = float(bool(_RELATIVE.search(low[len(first) + 1 :])))
    out[n + 4] = float(bool(_COMPARE.search(low)))
    out[n + 5] = float(bool(re.search(r"[A-Z][\w'’.-]*\s+(or|and)\s+(the\s+)?[A-Z]", text)))
    out[n + 6] = min(len(words), 40) / 40
    return out


def width(names: Sequence[str], dim: int) -> int:
    return sum(dim if n == "query_embedding" else WIDTHS[n] for n in names)


def embedding_columns(names: Sequence[str], n_columns: int) -> slice:
    """Where `query_embedding` sits in a feature matrix of `n_columns` built from `names`
    (an empty slice when it is not among them)."""
    if "query_embedding" not in names:
        return slice(0, 0)
    dim = n_columns - sum(WIDTHS[n] for n in names if n != "query_embedding")
    start = sum(WIDTHS[n] for n in names[: list(names).index("query_embedding")])
    return slice(start, start + dim)


class KwayFeatures:
    """Features for queries of one corpus, read from its in-memory index (`graphs`)."""

    def __init__(self, dataset: str, graphs: GraphSource, names: Sequence[str]) -> None:
        self.dataset, self.names, self._graphs = dataset, tuple(names), graphs
        self._titles: tuple[int, list[str]] | None = None
        self._last: tuple[np.ndarray, list[str]] | None = None

    def _index(self) -> tuple[np.ndarray, list[str]]:
        """The corpus's passage embeddings and titles. With the database down (its version
        check fails) the index last read serves: routing decides in memory as the two-way
        router does, and retrieval, which needs the database, answers 503 until it is back."""
        try:
            g = self._graphs.get(self.dataset)
        except DatabaseError:
            if self._last is None:
                raise
            return self._last
        if self._titles is None or self._titles[0] != g.version.id:
            self._titles = (g.version.id, [normalise_title(t) for t in g.passage_titles])
        self._last = (g.passage_emb, self._titles[1])
        return self._last

    def __call__(self, questions: Sequence[str], qvecs: np.ndarray) -> np.ndarray:
        qvecs = np.asarray(qvecs, dtype=np.float32).reshape(len(questions), -1)
        if not len(questions):
            return np.zeros((0, width(self.names, qvecs.shape[1])), dtype=np.float32)
        parts: list[np.ndarray] = []
        needs_scores = any(n in ("title_cover", "dense_scores") for n in self.names)
        if needs_scores and len(questions):
            emb, titles = self._index()
            scores = (emb @ qvecs.T).T  # row-major passes over emb: ~3x faster than q @ emb.T
            depth = min(20, scores.shape[1])
            top = np.argpartition(-scores, depth - 1, axis=1)[:, :depth]
            top_scores = np.take_along_axis(scores, top, axis=1)
            order = np.argsort(-top_scores, axis=1)
            top = np.take_along_axis(top, order, axis=1)
            top_scores = np.take_along_axis(top_scores, order, axis=1)
        for name in self.names:
            if name == "query_embedding":
                parts.append(qvecs)
            elif name == "question_shape":
                parts.append(np.stack([question_shape(q) for q in questions]))
            elif name == "title_cover":
                out = np.zeros((len(questions), WIDTHS["title_cover"]), dtype=np.float32)
                for i, q in enumerate(questions):
                    c = title_cover(q, [titles[j] for j in top[i, :TOP]])
                    out[i, min(c, WIDTHS["title_cover"] - 1)] = 1.0
                parts.append(out)
            elif name == "dense_scores":
                s = top_scores
                k = min(TOP, s.shape[1]) - 1
                rest = s[:, TOP:] if s.shape[1] > TOP else s[:, -1:]
                parts.append(
                    np.stack(
                        [
                            s[:, 0],
                            s[:, 0] - s[:, min(1, k)],
                            s[:, 0] - s[:, k],
                            s[:, : k + 1].mean(axis=1) - rest.mean(axis=1),
                        ],
                        axis=1,
                    ).astype(np.float32)
                )
        if not parts:
            return np.zeros((len(questions), 0), dtype=np.float32)
        return np.hstack(parts)
