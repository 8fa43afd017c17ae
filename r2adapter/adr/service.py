"""One question through ADR (`r2a adr retrieve`): an operator by name, or `route`: the
softmax head fitted on the dataset's ADR labels decides, with eq. 1's fallback."""

from __future__ import annotations

from typing import Any

from r2adapter.adr.labels import read_adr_labels
from r2adapter.adr.operators import OPERATORS, AdrOperators, check_operator
from r2adapter.adr.router import SoftmaxHead, decide, fit_head
from r2adapter.config import adr_params
from r2adapter.errors import R2AError
from r2adapter.retrieve.base import check_query


def route_head(dataset: str, c: float, seed: int) -> SoftmaxHead:
    """The head fitted on all of the dataset's ADR labels, cached under `.cache/adr/` by the
    label file's content and the head's parameters (a second call reads it back)."""
    import hashlib

    import numpy as np

    from r2adapter.adr.labels import adr_label_path
    from r2adapter.config import settings
    from r2adapter.index.encoder import get_encoder

    path = adr_label_path(dataset)
    labels = read_adr_labels(dataset, path)
    key = hashlib.sha256(path.read_bytes() + f"{c}/{seed}".encode()).hexdigest()[:16]
    cache = settings().root / ".cache" / "adr" / f"{dataset}-head-{key}.npz"
    if cache.is_file():
        with np.load(cache) as z:
            return SoftmaxHead(z["weight"], z["bias"])
    x = get_encoder().encode([lab.question for lab in labels])
    head = fit_head(x, [lab.label for lab in labels], c, seed)
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp.npz")
    np.savez(tmp, weight=head.weight, bias=head.bias)
    tmp.replace(cache)
    return head


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
        head = route_head(name, p.classifier_c, p.seed)
        d = decide(head.probs(qvec[None, :]), p.gamma)[0]
        operator = d.operator
        decision = (
            f"{d.predicted} at {d.confidence:.2f} < γ {p.gamma}: fallback"
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
