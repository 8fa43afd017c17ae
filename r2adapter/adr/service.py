"""One question through ADR (`r2a adr retrieve`): an operator by name, or `route`: the
softmax head fitted on the dataset's ADR labels decides, with eq. 1's fallback."""

from __future__ import annotations

from typing import Any

from r2adapter.adr.labels import read_adr_labels
from r2adapter.adr.operators import OPERATORS, AdrOperators, check_operator
from r2adapter.adr.router import SoftmaxHead, decide
from r2adapter.config import AdrParams, adr_params
from r2adapter.errors import R2AError
from r2adapter.retrieve.base import check_query


def route_head(dataset: str, p: AdrParams) -> tuple[SoftmaxHead, float]:
    """The head fitted on all of the dataset's ADR labels and its γ (chosen under
    adr.token_budget as `r2a train --router adr` chooses it: r2adapter/adr/gamma.py), cached
    under `.cache/adr/` by the label file's content and the parameters (a second call reads
    them back)."""
    import hashlib

    import numpy as np

    from r2adapter.adr.gamma import fit_with_gamma
    from r2adapter.adr.labels import adr_label_path
    from r2adapter.config import settings

    path = adr_label_path(dataset)
    labels = read_adr_labels(dataset, path)
    shaping = f"{p.classifier_c}/{p.seed}/{p.gamma}/{p.token_budget}/{p.gammas}"
    key = hashlib.sha256(path.read_bytes() + shaping.encode()).hexdigest()[:16]
    cache = settings().root / ".cache" / "adr" / f"{dataset}-head-{key}.npz"
    if cache.is_file():
        with np.load(cache) as z:
            return SoftmaxHead(z["weight"], z["bias"]), float(z["gamma"])
    head, gamma, _ = fit_with_gamma(labels, p)
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp.npz")
    np.savez(tmp, weight=head.weight, bias=head.bias, gamma=gamma)
    tmp.replace(cache)
    return head, gamma


def answer(dataset: str, question: str, operator: str = "route") -> dict[str, Any]:
    from r2adapter.data.adapters import dataset_name
    from r2adapter.index.encoder import get_encoder
    from r2adapter.store.graph_store import passages_by_id

    if operator != "route":
        check_operator(operator)
    question = check_query(question)
    name = dataset_name(dataset)
    p = adr_params()
    ops = AdrOperators(name, p)  # no hypergraph: a one-line error naming the command
    enc = get_encoder()
    qvec = enc.encode_query(question)
    decision = "forced"
    if operator == "route":
        head, gamma = route_head(name, p)
        d = decide(head.probs(qvec[None, :]), gamma)[0]
        operator = d.operator
        decision = (
            f"{d.predicted} at {d.confidence:.2f} < γ {gamma}: fallback"
            if d.fallback
            else f"{d.predicted} at {d.confidence:.2f}"
        )
    if operator not in OPERATORS:  # pragma: no cover - decide() returns OPERATORS only
        raise R2AError(f"unknown ADR class {operator!r}")
    c = ops.run(operator, qvec, question)
    texts = passages_by_id(name, c.passage_ids)
    return {
        "dataset": name,
        "operator": operator,
        "decision": decision,
        "tokens": c.tokens,
        "ms": c.ms,
        "facts": c.facts,
        "insights": c.insights,
        "passages": [
            {"id": pid, "score": s, "title": texts[pid].title if pid in texts else ""}
            for pid, s in c.passages
        ],
    }
