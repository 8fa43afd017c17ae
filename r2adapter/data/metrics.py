"""Retrieval metrics as in HippoRAG 2 and CatRAG, over ranked passage ids: pure functions,
the leaf that label/, evaluate/ and the families all score with."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

import numpy as np


def recall_at_k(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Fraction of the gold passages found in the top k (HippoRAG 2's Recall@k)."""
    if not gold:
        return 0.0
    top = set(ranked[:k])
    return sum(g in top for g in set(gold)) / len(set(gold))


def full_chain(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """1 when every gold passage is in the top k (CatRAG's Full Chain Retrieval)."""
    return float(bool(gold) and set(gold) <= set(ranked[:k]))


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = re.compile(r"[^\w\s]")
YES_NO = frozenset({"yes", "no"})


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, one space."""
    return " ".join(_ARTICLES.sub(" ", _PUNCT.sub("", text.lower())).split())


def answer_in_context(
    context: str, answers: Sequence[str], ranked: Sequence[str], gold: Sequence[str], k: int
) -> float:
    """1 when the full chain is in the top k and a gold answer (or alias) appears in their
    text, normalised (the CPU stand-in for CatRAG's Joint Success Rate). A yes/no answer is
    no span of any passage: such a query needs only the full chain."""
    if not full_chain(ranked, gold, k):
        return 0.0
    return answer_in_text(context, answers)


def answer_in_text(context: str, answers: Sequence[str]) -> float:
    """1 when a gold answer (or alias) occurs in `context` as whole words, normalised by
    `normalize_answer`; a yes/no answer counts as found (it is no span)."""
    norm = [a for a in (normalize_answer(x) for x in answers) if a]
    if not norm or set(norm) <= YES_NO:
        return 1.0
    text = f" {normalize_answer(context)} "
    return float(any(f" {a} " in text for a in norm))


# ---- answers: HotpotQA's official exact match and token F1 (hotpot_evaluate_v1.py) ------

_HOTPOT_PUNCT = frozenset(string.punctuation)  # ASCII only, as the official script
_HOTPOT_SPECIAL = frozenset({"yes", "no", "noanswer"})


def normalize_hotpot(text: str) -> str:
    """HotpotQA's normalisation (hotpot_evaluate_v1.py `normalize_answer`): lower case, no
    ASCII punctuation, no articles a/an/the, single spaces. `normalize_answer` above differs
    only in dropping every non-word character (Unicode punctuation and symbols too)."""
    text = "".join(ch for ch in text.lower() if ch not in _HOTPOT_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the two are equal after `normalize_hotpot`."""
    return float(normalize_hotpot(prediction) == normalize_hotpot(gold))


def token_f1(prediction: str, gold: str) -> float:
    """HotpotQA's token F1: the harmonic mean of token precision and recall after
    `normalize_hotpot`; 0 when either side is yes/no/noanswer and they differ."""
    pred, ref = normalize_hotpot(prediction), normalize_hotpot(gold)
    if (pred in _HOTPOT_SPECIAL or ref in _HOTPOT_SPECIAL) and pred != ref:
        return 0.0
    p_tok, r_tok = pred.split(), ref.split()
    same = sum((Counter(p_tok) & Counter(r_tok)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p_tok), same / len(r_tok)
    return 2 * precision * recall / (precision + recall)


def contains_answer(prediction: str, gold: str) -> float:
    """1.0 when the normalised gold answer occurs in the normalised prediction as whole
    words ("accuracy" in the adaptive-retrieval papers: a reader that answers in a sentence
    still scores when the sentence holds the answer)."""
    ref = normalize_hotpot(gold)
    return float(bool(ref) and f" {ref} " in f" {normalize_hotpot(prediction)} ")


def answer_scores(prediction: str, answers: Sequence[str]) -> tuple[float, float, float]:
    """(EM, F1, contains) of `prediction`, each the best over the gold answer and its
    aliases."""
    if not answers:
        return 0.0, 0.0, 0.0
    return (
        max(exact_match(prediction, a) for a in answers),
        max(token_f1(prediction, a) for a in answers),
        max(contains_answer(prediction, a) for a in answers),
    )


def average_rank(ranked: Sequence[str], gold: Sequence[str], depth: int) -> float:
    """Mean 1-based rank of the gold passages; a gold passage not retrieved counts depth + 1
    (R²Adapter §3.2)."""
    pos = {pid: i + 1 for i, pid in enumerate(ranked[:depth])}
    return float(np.mean([pos.get(g, depth + 1) for g in gold])) if gold else float(depth + 1)


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else 0.0


def metric_key(name: str) -> str:
    """A figure's name as a metric key. MLflow takes only letters, digits, ``_ - . /`` and
    spaces in a metric's name, Kubeflow no '@': recall@5 → recall_at_5, graph+rw@5 →
    graph_plus_rw_at_5, any other character → '_'."""
    key = name.replace("@", "_at_").replace("+", "_plus_")
    return re.sub(r"[^A-Za-z0-9_\-. /]", "_", key)
