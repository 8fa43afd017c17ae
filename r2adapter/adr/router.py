"""ADR's intent router (ADR §3.2): a classifier gives a class (simple, moderate, complex) and
a confidence; the decision is the class when its confidence ≥ γ, else moderate (eq. 1,
the conservative fallback). The trained classifier is a softmax head over the query's
retrieval embedding (multinomial logistic regression, L2), fitted on the ADR labels."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from r2adapter.adr.operators import OPERATORS, check_operator

FALLBACK = "moderate"


@dataclass(frozen=True)
class Decision:
    operator: str  # what runs
    predicted: str  # the classifier's class
    confidence: float
    fallback: bool  # confidence < γ: moderate instead of the class


def decide(probs: np.ndarray, gamma: float) -> list[Decision]:
    """ADR eq. 1 on (n, 3) class probabilities in OPERATORS' order."""
    out = []
    for row in np.asarray(probs, dtype=np.float64):
        y = int(np.argmax(row))
        c = float(row[y])
        fb = c < gamma
        out.append(Decision(FALLBACK if fb else OPERATORS[y], OPERATORS[y], c, fb))
    return out


def fallback_share(probs: np.ndarray, gamma: float) -> float:
    return float(np.mean(np.max(probs, axis=1) < gamma)) if len(probs) else 0.0


@dataclass
class SoftmaxHead:
    """p(y | q) = softmax(W e_q + b), e_q the query's normalised retrieval embedding."""

    weight: np.ndarray  # (3, d)
    bias: np.ndarray  # (3,)

    def probs(self, x: np.ndarray) -> np.ndarray:
        z = np.atleast_2d(x) @ self.weight.T + self.bias
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)


def fit_head(x: np.ndarray, labels: Sequence[str], c: float = 1.0, seed: int = 13) -> SoftmaxHead:
    """Multinomial logistic regression (L2, inverse strength `c`); a class absent from the
    training labels gets probability 0 (a one-class fit: that class with confidence 1)."""
    from sklearn.linear_model import LogisticRegression

    y = np.array([OPERATORS.index(check_operator(lab)) for lab in labels])
    d = x.shape[1]
    present = sorted(set(y.tolist()))
    w, b = np.zeros((3, d)), np.full(3, -1e9)
    if len(present) == 1:
        b[present[0]] = 0.0
        return SoftmaxHead(w, b)
    clf = LogisticRegression(C=c, max_iter=2000, random_state=seed)
    clf.fit(x, y)
    coef = clf.coef_ if len(present) > 2 else np.vstack([-clf.coef_[0] / 2, clf.coef_[0] / 2])
    icpt = (
        clf.intercept_
        if len(present) > 2
        else np.array([-clf.intercept_[0] / 2, clf.intercept_[0] / 2])
    )
    for row, cls in enumerate(clf.classes_):
        w[cls], b[cls] = coef[row], icpt[row]
    return SoftmaxHead(w, b)


# ADR §3.2's classifier f_φ, the prompt in our own words
LLM_PROMPT = (
    "Decide how much retrieval the question needs. simple: one entity, a definition or a "
    "direct fact. moderate: relations or steps across several facts. complex: a theme, a "
    "comparison across sources or causal reasoning. Reply with JSON only: "
    '{{"class": "simple" | "moderate" | "complex", "confidence": <0..1>}}\n\n'
    "Question: {question}"
)


def parse_llm_class(reply: str) -> tuple[str, float]:
    """(class, confidence) from the LLM's reply; a class outside the three (or no JSON) is
    an R2AError naming what came back."""
    from r2adapter.errors import R2AError
    from r2adapter.llm.jsonreply import extract_json_object

    obj = extract_json_object(reply) or {}
    cls = str(obj.get("class", "")).strip().lower()
    if cls not in OPERATORS:
        raise R2AError(f"the LLM classifier answered class {cls or reply[:60]!r}, not one of "
                       f"{', '.join(OPERATORS)}")  # fmt: skip
    try:
        conf = min(1.0, max(0.0, float(obj.get("confidence", 0.0))))
    except (TypeError, ValueError):
        conf = 0.0
    return cls, conf


def llm_probs(llm: object, questions: Sequence[str], timeout: float) -> tuple[np.ndarray, int]:
    """One-hot-at-confidence rows from the LLM classifier (the rest of the mass spread over
    the other classes), and how many replies failed (timeout, error, a class outside the
    three: confidence 0, so eq. 1 falls back to moderate)."""
    from r2adapter.errors import R2AError

    out, failed = np.zeros((len(questions), 3)), 0
    for i, q in enumerate(questions):
        try:
            reply = llm.complete(  # type: ignore[attr-defined]
                [{"role": "user", "content": LLM_PROMPT.format(question=q)}],
                max_tokens=48,
                timeout=timeout,
            )
            cls, conf = parse_llm_class(reply)
        except (R2AError, TimeoutError, OSError):
            failed += 1
            out[i] = 1 / 3
            continue
        out[i] = (1 - conf) / 2
        out[i, OPERATORS.index(cls)] = conf
    return out, failed


@dataclass
class AdrRouter:
    """The trained classifier as the registry keeps it: the head, γ, and the encoder whose
    embedding it reads (r2adapter/adr/registry.py registers it)."""

    head: SoftmaxHead
    gamma: float
    encoder: str  # the retrieval encoder's name (the head reads its query embedding)
    dataset: str = ""  # the corpus whose labels trained it

    def decide(self, qvecs: np.ndarray) -> list[Decision]:
        return decide(self.head.probs(qvecs), self.gamma)

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        cfg = {"gamma": self.gamma, "encoder": self.encoder, "dataset": self.dataset}
        (folder / "config.json").write_text(json.dumps(cfg, indent=2))
        np.savez(folder / "head.npz", weight=self.head.weight, bias=self.head.bias)

    @classmethod
    def load(cls, folder: Path) -> AdrRouter:
        from r2adapter.errors import R2AError

        try:
            cfg = json.loads((folder / "config.json").read_text())
            with np.load(folder / "head.npz") as z:
                head = SoftmaxHead(z["weight"], z["bias"])
            return cls(head, float(cfg["gamma"]), str(cfg["encoder"]), str(cfg.get("dataset", "")))
        except (OSError, KeyError, TypeError, ValueError) as e:
            raise R2AError(f"{folder}: not a saved ADR router ({str(e).splitlines()[0]})") from None
