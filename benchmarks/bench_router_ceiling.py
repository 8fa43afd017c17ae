"""How far can a router that reads the query (and the dense evidence) get? A ceiling check.

Issue 4 asks the champion for the better single retriever's Recall@5 (within .005) while
sending at most half of the queries to graph. Whether that is within reach of a query-only
router depends on the labels, not on the training loop, so this script measures it without
our training loop: 5-fold cross-validation over the training corpus's train+val split (the
test split is left alone) of plain logistic regressions, each fold's model scoring the
fold it did not see. Per model:

  - ROC AUC of the out-of-fold scores against "graph returns more gold in the top 5";
  - hybrid Recall@5 when the top 40% / 50% of queries by score go to graph;

next to always-dense, always-graph, the oracle and the issue's bar (the better single
− .005). The inputs are the retrieval embedding of the question, with and without the
dense-evidence feature the routers read (r2adapter.route.evidence), for a grid of L2
strengths. Saves JSON (and logs nothing to MLflow: no model comes out of it).

    .venv/bin/python benchmarks/bench_router_ceiling.py
    .venv/bin/python benchmarks/bench_router_ceiling.py --quick     # 2 strengths
"""

from __future__ import annotations

import hashlib
import sys
import warnings
from pathlib import Path

import numpy as np

if not __package__:  # `python benchmarks/bench_router_ceiling.py`: repository root on path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import arg_parser, die, finish, new_result, require_db  # noqa: E402

FOLDS = 5
BAR = 0.005  # issue 4: within half a point of the better single retriever
USAGES = (0.4, 0.5)


def fold_of(query_id: str) -> int:
    return int(hashlib.md5(query_id.encode()).hexdigest()[:6], 16) % FOLDS


def hybrid_at(scores: np.ndarray, dense: np.ndarray, graph: np.ndarray, usage: float) -> float:
    """Recall@5 when the `usage` share of highest-scored queries goes to graph."""
    to_graph = np.zeros(len(scores), dtype=bool)
    to_graph[np.argsort(-scores)[: int(np.floor(usage * len(scores) + 1e-9))]] = True
    return float(np.where(to_graph, graph, dense).mean())


def out_of_fold(x: np.ndarray, y: np.ndarray, folds: np.ndarray, c: float) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression

    scores = np.zeros(len(y))
    for k in range(FOLDS):
        fit, held = folds != k, folds == k
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = LogisticRegression(C=c, max_iter=3000).fit(x[fit], y[fit])
        scores[held] = model.decision_function(x[held])
    return scores


def main(argv: list[str] | None = None) -> int:
    from sklearn.metrics import roc_auc_score

    ap = arg_parser(__doc__, "two L2 strengths instead of five", "router_ceiling.json")
    ap.add_argument("--dataset", help="training corpus (default: params.yaml pipeline.dataset)")
    args = ap.parse_args(argv)

    from r2adapter.config import label_params, pipeline_dataset
    from r2adapter.data.metrics import recall_at_k
    from r2adapter.errors import R2AError
    from r2adapter.index.encoder import get_encoder
    from r2adapter.label.annotate import db_labels
    from r2adapter.route.evidence import DenseEvidence
    from r2adapter.steps import dataset_name

    require_db()
    try:
        dataset = dataset_name(args.dataset or pipeline_dataset())
        rule = label_params().rule
        records = [r for r in db_labels(dataset, rule, "all") if r.split != "test"]
        if len(records) < 10 * FOLDS:
            die(f"{dataset}: {len(records)} labelled train+val queries are too few for CV")
        questions = [r.question for r in records]
        emb = np.asarray(get_encoder().encode(questions, progress=True), dtype=np.float32)
        feats = DenseEvidence(dataset)(questions, emb)
    except R2AError as e:
        die(str(e))
    dense = np.array([recall_at_k(r.dense_top, r.gold, 5) for r in records])
    graph = np.array([recall_at_k(r.graph_top, r.gold, 5) for r in records])
    better = (graph > dense).astype(int)
    folds = np.array([fold_of(r.query_id) for r in records])
    best_single = max(dense.mean(), graph.mean())
    result = new_result("router_ceiling", args.quick)
    result.update(
        dataset=dataset,
        split="train+val",
        rule=rule,
        n_queries=len(records),
        folds=FOLDS,
        reference={
            "always_dense": float(dense.mean()),
            "always_graph": float(graph.mean()),
            "oracle": float(np.maximum(dense, graph).mean()),
            "oracle_graph_usage": float(better.mean()),
            "ties": float((graph == dense).mean()),
            "bar": float(best_single - BAR),
        },
        models={},
    )
    inputs = {"embedding": emb, "embedding+title_cover": np.hstack([emb, feats])}
    strengths = (0.3, 3.0) if args.quick else (0.1, 0.3, 1.0, 3.0, 10.0)
    for name, x in inputs.items():
        for c in strengths:
            s = out_of_fold(x, better, folds, c)
            m = {"auc": float(roc_auc_score(better, s))}
            m.update({f"recall@5_at_usage_{u}": hybrid_at(s, dense, graph, u) for u in USAGES})
            result["models"][f"lr[{name}] C={c}"] = m
            print(
                f"  {name:<23} C={c:<5} AUC {m['auc']:.3f}  "
                + "  ".join(f"R@5 at {u:.0%} {m[f'recall@5_at_usage_{u}']:.3f}" for u in USAGES),
                flush=True,
            )
    best = max(result["models"].items(), key=lambda kv: kv[1]["recall@5_at_usage_0.5"])
    ref = result["reference"]
    result["best"] = {
        "model": best[0],
        **best[1],
        "meets_bar_at_half": best[1]["recall@5_at_usage_0.5"] >= ref["bar"],
    }
    print(
        f"{dataset} train+val, {len(records)} queries, {FOLDS}-fold: always-dense "
        f"{ref['always_dense']:.3f}, always-graph {ref['always_graph']:.3f}, oracle "
        f"{ref['oracle']:.3f} at {ref['oracle_graph_usage']:.0%} graph; bar {ref['bar']:.3f}"
    )
    print(
        f"best: {best[0]} R@5 {best[1]['recall@5_at_usage_0.5']:.3f} at 50% graph "
        f"({'meets' if result['best']['meets_bar_at_half'] else 'misses'} the bar)"
    )
    finish(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
