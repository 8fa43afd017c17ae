"""Issue 24: which structural triplets to seed, chosen on development folds.

For every corpus given, on its *train* split only (label.split's hash of the query id, the
split every router trains on), graph@5 against graph+rw@5 under each setting of
rewrite.min_confidence × rewrite.link_heads × rewrite.seed_weight: Recall@5 and FCR@5
gains with paired 95% bootstrap intervals. The setting kept is the one whose worst corpus
gain (the smaller of R@5's and FCR@5's) is highest over every corpus given (`choose`); the
test split is never read here.

    .venv/bin/python benchmarks/bench_rewriter_corpora.py \\
        --datasets 2wikimultihopqa,hotpotqa_dev,musique_dev \\
        --out benchmarks/results/rewriter_corpora.json
    .venv/bin/python benchmarks/bench_rewriter_corpora.py --confidences 0.5,0.7 \\
        --links 1 --weights 1,0.5,0.25 --out benchmarks/results/rewriter_seed_weight.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from r2adapter.config import label_params  # noqa: E402
from r2adapter.data.metrics import full_chain, recall_at_k  # noqa: E402
from r2adapter.evaluate.stats import paired_bootstrap as paired_interval  # noqa: E402


def _run(retriever: Any, enc: Any, texts: list[str], questions: list[str]) -> list[list[str]]:
    """q′ retrieved on q's own embedding, as the adapter serves a structural rewrite."""
    return [
        [h.passage_id for h in retriever.retrieve(t, 5, qvec=enc.encode_query(q))]
        for t, q in zip(texts, questions, strict=True)
    ]


def corpus(
    dataset: str,
    confidences: list[float],
    split: str,
    links: Sequence[bool] = (False, True),
    weights: Sequence[float] = (1.0,),
) -> dict[str, Any]:
    from r2adapter.data.splits import split_of
    from r2adapter.evaluate.retrieval import stored_queries
    from r2adapter.index.encoder import get_encoder
    from r2adapter.retrieve.strategies import make_retriever
    from r2adapter.rewrite import Rewriter

    lp = label_params()
    qs = [q for q in stored_queries(dataset) if split_of(q.id, lp.split) == split]
    enc = get_encoder()
    g = make_retriever("graph", dataset, enc)
    g.warmup()  # type: ignore[attr-defined]
    gold = [q.gold_passage_ids for q in qs]
    questions = [q.question for q in qs]
    base = _run(g, enc, questions, questions)
    r0 = np.array([recall_at_k(b, gl, 5) for b, gl in zip(base, gold, strict=True)])
    f0 = np.array([full_chain(b, gl, 5) for b, gl in zip(base, gold, strict=True)])
    out: dict[str, Any] = {"n": len(qs), "graph": {"recall@5": r0.mean(), "fcr@5": f0.mean()}}
    for c in confidences:
        rw = Rewriter(backend="structural", min_confidence=c)
        res = [rw.rewrite(q.question) for q in qs]
        texts = [r.rewritten for r in res]
        for link in links:
            for w in weights:
                g.link_heads, g.seed_weight = link, w  # type: ignore[attr-defined]
                got = _run(g, enc, texts, questions)
                r1 = np.array([recall_at_k(b, gl, 5) for b, gl in zip(got, gold, strict=True)])
                f1 = np.array([full_chain(b, gl, 5) for b, gl in zip(got, gold, strict=True)])
                key = f"conf{c}_link{int(link)}" + ("" if weights == (1.0,) else f"_w{w}")
                out[key] = {
                    "parsed": float(np.mean([r.rewritten_ok for r in res])),
                    "recall@5": float(r1.mean()),
                    "fcr@5": float(f1.mean()),
                    "r5_gain": paired_interval(r1, r0),
                    "fcr5_gain": paired_interval(f1, f0),
                }
        g.link_heads, g.seed_weight = None, None  # type: ignore[attr-defined]
    return out


def choose(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The setting whose worst corpus gain (the smaller of R@5's and FCR@5's, on each
    corpus's train split) is highest: a default must not lose on any corpus (the rule
    CatRAG's default is chosen by, benchmarks/bench_catrag.py `union_fold_choice`)."""
    keys = [k for k in next(iter(results.values())) if k.startswith("conf")]

    def worst(k: str) -> float:
        return min(
            min(r[k]["r5_gain"]["diff"], r[k]["fcr5_gain"]["diff"]) for r in results.values()
        )

    best = max(keys, key=lambda k: (worst(k), k))
    return {
        "rule": "max over settings of the min over corpora of min(R@5 gain, FCR@5 gain), "
        "train splits",
        "chosen": best,
        "worst_gain": worst(best),
        "worst_gain_by_setting": {k: round(worst(k), 4) for k in keys},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default="2wikimultihopqa,hotpotqa_dev,musique_dev")
    ap.add_argument("--confidences", default="0,0.3,0.5,0.7")
    ap.add_argument("--links", default="0,1", help="rewrite.link_heads values: 0, 1 or both")
    ap.add_argument("--weights", default="1", help="rewrite.seed_weight values")
    ap.add_argument("--split", default="train")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/rewriter_corpora.json"))
    a = ap.parse_args()
    conf = [float(c) for c in a.confidences.split(",")]
    links = tuple(bool(int(x)) for x in a.links.split(","))
    weights = tuple(float(w) for w in a.weights.split(","))
    results = {}
    for d in a.datasets.split(","):
        results[d] = corpus(d, conf, a.split, links, weights)
        print(d, json.dumps(results[d], default=float)[:2000], flush=True)
    report = {"split": a.split, "corpora": results, **choose(results)}
    Path(a.out).write_text(json.dumps(report, indent=1, default=float) + "\n")
    print("chosen:", report["chosen"], report["worst_gain"])


if __name__ == "__main__":
    main()
