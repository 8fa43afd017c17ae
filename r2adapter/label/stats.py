"""Statistics of a labelled corpus, like R²Adapter Tables 1, 8, 9, 10 and 11."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from r2adapter.data.metrics import full_chain
from r2adapter.label.annotate import LabelRecord
from r2adapter.nlp.ner import entities


def _pct(n: float, d: float) -> float:
    return round(100.0 * n / d, 1) if d else 0.0


def label_stats(records: Sequence[LabelRecord], top_k: int = 5) -> dict[str, object]:
    n = len(records)
    dense_ok = [full_chain(r.dense_top, r.gold, top_k) == 1.0 for r in records]
    graph_ok = [full_chain(r.graph_top, r.gold, top_k) == 1.0 for r in records]
    graph_pref = [r.preference == "graph" for r in records]
    table1 = {
        "total": n,
        "only_dense_recalled": sum(d and not g for d, g in zip(dense_ok, graph_ok, strict=True)),
        "only_graph_recalled": sum(g and not d for d, g in zip(dense_ok, graph_ok, strict=True)),
        "both_recalled": sum(d and g for d, g in zip(dense_ok, graph_ok, strict=True)),
        "neither_recalled": sum(not d and not g for d, g in zip(dense_ok, graph_ok, strict=True)),
        "preference_dense_pct": _pct(n - sum(graph_pref), n),
        "preference_graph_pct": _pct(sum(graph_pref), n),
        "both_suitable_pct": _pct(sum(r.y_dense and r.y_graph for r in records), n),
    }
    table8 = {}
    for split in ("train", "val", "test"):
        rs = [r for r in records if r.split == split]
        table8[split] = {
            "samples": len(rs),
            "dense_pref": sum(r.preference == "dense" for r in rs),
            "graph_pref": sum(r.preference == "graph" for r in rs),
            "graph_suitable": sum(r.y_graph for r in rs),
        }
    table9 = {}
    for qtype in sorted({r.qtype for r in records}):
        rs = [r for r in records if r.qtype == qtype]
        table9[qtype] = {
            "samples": len(rs),
            "graph_pref_pct": _pct(sum(r.preference == "graph" for r in rs), len(rs)),
            "graph_suitable_pct": _pct(sum(r.y_graph for r in rs), len(rs)),
        }
    ents = entities([r.question for r in records])
    table10, table11 = {}, {}
    for name, keep in (
        ("overall", lambda r: True),
        ("dense_pref", lambda r: r.preference == "dense"),
        ("graph_pref", lambda r: r.preference == "graph"),
    ):
        es = [e for r, e in zip(records, ents, strict=True) if keep(r)]
        table10[name] = {
            "avg_entities": round(sum(map(len, es)) / len(es), 2) if es else 0.0,
            "with_entities_pct": _pct(sum(bool(e) for e in es), len(es)),
        }
        if name != "overall":
            types = Counter(label for e in es for _, label in e)
            total = sum(types.values())
            table11[name] = {t: _pct(c, total) for t, c in types.most_common(8)}
    return {
        "table1": table1,
        "table8": table8,
        "table9": table9,
        "table10": table10,
        "table11": table11,
    }


def format_stats(s: dict[str, Any]) -> str:
    t1 = s["table1"]
    lines = ["Table 1 (recalled = all gold in top 5):"]
    lines += [f"  {k:<24}{v}" for k, v in t1.items()]
    lines.append(
        "Table 8 (splits): "
        + ", ".join(
            f"{k} {v['samples']} ({v['graph_pref']} graph-pref)" for k, v in s["table8"].items()
        )
    )
    lines.append("Table 9 (by type):")
    lines += [
        f"  {k:<20} n={v['samples']:<5} graph-pref {v['graph_pref_pct']}%  graph-suitable "
        f"{v['graph_suitable_pct']}%"
        for k, v in s["table9"].items()
    ]
    lines.append(
        "Table 10 (spaCy entities): "
        + ", ".join(
            f"{k} avg {v['avg_entities']} / {v['with_entities_pct']}% with"
            for k, v in s["table10"].items()
        )
    )
    lines.append(
        "Table 11 (entity types %): "
        + "; ".join(
            f"{k}: " + ", ".join(f"{t} {p}" for t, p in v.items()) for k, v in s["table11"].items()
        )
    )
    return "\n".join(lines)
