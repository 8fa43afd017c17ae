"""ADR labels (`r2a adr label` writes `labels/<dataset>.adr.jsonl`).

For every stored query with complete gold: the query embedding's milliseconds, and per
operator the passages it delivers (ranked), their Recall@5 and full chain (FCR@5), how
many it delivers, its context tokens and its milliseconds (the embedding included, as the
strategy labels count it), timed one query at a time on one BLAS thread as the service
runs, the operators in turn from a rotating first one. The class label is derived: the
cheapest operator (context tokens, then ms) whose passages reach the best Recall@5 of the
three for that query.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from r2adapter.adr.operators import OPERATORS, AdrOperators
from r2adapter.config import AdrParams, adr_params, settings
from r2adapter.data.metrics import full_chain, recall_at_k
from r2adapter.errors import R2AError
from r2adapter.label.jsonl import read_label_lines, write_label_lines
from r2adapter.label.outcome import Outcome as OperatorOutcome  # one operator on one query

FORMAT = 1
K = 5  # Recall@5 and FCR@5, as every other strategy is reported


@dataclass
class AdrLabel:
    query_id: str
    question: str
    qtype: str
    split: str
    gold: list[str]
    outcomes: dict[str, OperatorOutcome]

    @property
    def label(self) -> str:
        """The cheapest operator (tokens, then ms) reaching the best Recall@5 of the three."""
        best = max(o.recall for o in self.outcomes.values())
        ok = [n for n in OPERATORS if self.outcomes[n].recall >= best - 1e-9]
        return min(ok, key=lambda n: (self.outcomes[n].tokens, self.outcomes[n].ms))

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "query_id": self.query_id,
            "question": self.question,
            "qtype": self.qtype,
            "split": self.split,
            "gold": self.gold,
            "operators": {
                n: {
                    "passages": o.passages,
                    "recall": o.recall,
                    "full": o.full,
                    "tokens": o.tokens,
                    "ms": o.ms,
                }
                for n, o in self.outcomes.items()
            },
            "label": self.label,
        }


def outcome(passages: list[str], gold: Sequence[str], tokens: int, ms: float) -> OperatorOutcome:
    return OperatorOutcome(
        passages, recall_at_k(passages, gold, K), full_chain(passages, gold, K), tokens, ms
    )


def rotated(names: Sequence[str], i: int) -> list[str]:
    """`names` starting at position i mod their number: the operator run first after the
    query embedding is about 1 ms slower (caches the encoder evicted; 2Wiki: 13.7 against
    12.5 ms for simple first or last), so each runs first on a third of the queries."""
    k = i % len(names)
    return [*names[k:], *names[:k]]


def label_dataset(dataset: str, p: AdrParams | None = None) -> list[AdrLabel]:
    from threadpoolctl import threadpool_limits

    from r2adapter.config import label_params
    from r2adapter.data.splits import split_of
    from r2adapter.evaluate.retrieval import stored_queries
    from r2adapter.index.encoder import get_encoder

    p = p or adr_params()
    ops = AdrOperators(dataset, p)
    queries = stored_queries(dataset, complete_only=True)
    if not queries:
        raise R2AError(f"dataset '{dataset}' has no queries with complete gold to label")
    enc = get_encoder()
    split = label_params().split
    v0 = enc.encode([queries[0].question])[0]  # warm-up: lazy loads are not a query's cost
    for n in OPERATORS:
        ops.run(n, v0, queries[0].question)
    out: list[AdrLabel] = []
    with threadpool_limits(1):
        for q in tqdm(queries, desc="label: adr operators", unit="query"):
            t = time.perf_counter()
            v = enc.encode([q.question])[0]
            embed_ms = (time.perf_counter() - t) * 1000
            res = {}
            for n in rotated(OPERATORS, len(out)):
                c = ops.run(n, v, q.question)
                res[n] = outcome(c.passage_ids, q.gold_passage_ids, c.tokens, c.ms + embed_ms)
            res = {n: res[n] for n in OPERATORS}
            out.append(
                AdrLabel(
                    q.id, q.question, q.type, split_of(q.id, split), list(q.gold_passage_ids), res
                )
            )
    return out


def adr_label_path(dataset: str) -> Path:
    return settings().root / "labels" / f"{dataset}.adr.jsonl"


def export_adr_labels(path: Path, labels: Sequence[AdrLabel]) -> str:
    """JSON lines, written atomically (a temporary file, then a rename); returns the md5."""
    return write_label_lines(path, (lab.to_json() for lab in labels))


def read_adr_labels(dataset: str, path: Path | None = None) -> list[AdrLabel]:
    path = path or adr_label_path(dataset)
    again = f"run `r2a adr label --dataset {dataset}`"
    out: list[AdrLabel] = []
    for i, raw in read_label_lines(path, FORMAT, "ADR labels", "an ADR label", again):
        ops = raw["operators"]
        unknown = sorted(set(ops) - set(OPERATORS)) or sorted(set(OPERATORS) - set(ops))
        if unknown or raw.get("label") not in OPERATORS:
            raise R2AError(
                f"{path}: line {i}: class labels must be {', '.join(OPERATORS)}, not "
                f"{unknown or [raw.get('label')]}: {again}"
            )
        out.append(
            AdrLabel(
                raw["query_id"],
                raw["question"],
                raw["qtype"],
                raw["split"],
                list(raw["gold"]),
                {
                    n: OperatorOutcome(
                        list(o["passages"]), o["recall"], o["full"], int(o["tokens"]), o["ms"]
                    )
                    for n, o in ops.items()
                },
            )
        )
    return out


def summary(labels: Sequence[AdrLabel]) -> dict[str, Any]:
    """Per operator: mean Recall@5, FCR@5, passages, tokens, ms; the class label shares."""
    n = len(labels)
    per = {
        op: {
            "recall": sum(lab.outcomes[op].recall for lab in labels) / n,
            "fcr": sum(lab.outcomes[op].full for lab in labels) / n,
            "mean_passages": sum(len(lab.outcomes[op].passages) for lab in labels) / n,
            "mean_tokens": sum(lab.outcomes[op].tokens for lab in labels) / n,
            "mean_ms": sum(lab.outcomes[op].ms for lab in labels) / n,
        }
        for op in OPERATORS
    }
    classes = {op: sum(lab.label == op for lab in labels) / n for op in OPERATORS}
    return {"n_queries": n, "operators": per, "classes": classes}


def write_labels(dataset: str) -> dict[str, Any]:
    """`r2a adr label`: label every complete-gold query, write the file, return a summary
    (with the file's path and md5)."""
    from r2adapter.data.adapters import dataset_name

    name = dataset_name(dataset)
    labels = label_dataset(name)
    path = adr_label_path(name)
    md5 = export_adr_labels(path, labels)
    return {"dataset": name, "path": str(path), "md5": md5, **summary(labels)}


def label_adr(dataset: str) -> dict[str, object]:
    """ADR's three operators on every query (`r2a label`, after the two-way labels:
    labels/<dataset>.adr.jsonl, what the routing report's `adr` rows read) when params.yaml
    `adr.enabled` and the index holds the hypergraph; otherwise what was skipped and why."""
    from r2adapter.adr.store import NoHypergraphError, require_hypergraph

    if not adr_params().enabled:
        return {"skipped": "adr.enabled is false in params.yaml"}
    try:
        require_hypergraph(dataset)
    except NoHypergraphError as e:
        return {"skipped": str(e)}
    return write_labels(dataset)


def figures(labels: Sequence[AdrLabel], chosen: Sequence[str], route_ms: np.ndarray,
            share_of: Sequence[str] | None = None) -> dict[str, Any]:  # fmt: skip
    """The routing report's fields for operator `chosen[i]` on query i; `share_of[i]` is
    what the share counts (the class, or `fallback`)."""
    outs = [lab.outcomes[c] for lab, c in zip(labels, chosen, strict=True)]
    keys = list(share_of if share_of is not None else chosen)
    share = {k: keys.count(k) / len(keys) for k in dict.fromkeys(keys)}
    return {
        "recall": float(np.mean([o.recall for o in outs])),
        "fcr": float(np.mean([o.full for o in outs])),
        "mean_passages": float(np.mean([len(o.passages) for o in outs])),
        "mean_tokens": float(np.mean([o.tokens for o in outs])),
        "mean_ms": float(np.mean([o.ms for o in outs]) + np.mean(route_ms)),
        "graph_usage": 1.0,  # every operator walks the hypergraph
        "share": share,
        "latency_ms_p50": float(np.median(route_ms)),
    }
