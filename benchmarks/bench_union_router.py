"""Routers trained on one corpus or on the union (issues 24 and 26): the k-way router and
ADR's head fitted as `r2a train` fits them (r2adapter/kway/registry.py `split_data`,
r2adapter/adr/gamma.py), once on the training dataset's labels alone and once with
`train_corpora` (kway.train_corpora, adr.train_corpora) adding the other corpora, then
scored on *each* corpus's test split: what serving the union-trained champion changes on
the corpus it was trained for and on the others. Nothing is registered.

    .venv/bin/python benchmarks/bench_union_router.py \\
        [--dataset 2wikimultihopqa] [--corpora hotpotqa_dev,musique_dev]

k-way: recall, FCR@5, mean ms and passages of its choices (test split), against the best
fixed routed strategy at no more passages, paired. ADR: routed prompt tokens over
always-complex's and FCR@5 against always-complex, paired.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

if not __package__:  # `python benchmarks/...py`: put the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import arg_parser, finish, new_result, require_db  # noqa: E402


def kway_rows(dataset: str, corpora: list[str], arms: dict[str, tuple[str, ...]]) -> dict:
    from r2adapter.config import kway_params
    from r2adapter.evaluate.stats import paired_bootstrap
    from r2adapter.kway.cascade import Costs, choose
    from r2adapter.kway.model import fit_kway
    from r2adapter.kway.registry import corpus_split_data, split_data

    base = kway_params().routed()
    held = {c: corpus_split_data(c, base) for c in [dataset, *corpora]}
    out: dict[str, Any] = {}
    for arm, extra in arms.items():
        p = replace(base, train_corpora=extra)
        d = split_data(dataset, p)
        tr, va = np.where(d.split == "train")[0], np.where(d.split == "val")[0]

        def costs(rows: np.ndarray, d: Any = d) -> Costs:
            return Costs(d.m["recall"][rows], d.m["ms"][rows], d.m["passages"][rows])

        router, _ = fit_kway(
            d.x[tr], d.m["suitable"][tr], d.x[va], costs(va), costs(tr), p.strategies, p, arm
        )
        rows: dict[str, Any] = {"n_train": len(tr), "n_val": len(va)}
        for c, h in held.items():
            te = np.where(h.split == "test")[0]
            ch = choose(router.probs(h.x[te]), router.tau, router.order, router.fallback_ix)
            i = np.arange(len(te))
            rec, fcr = h.m["recall"][te][i, ch], h.m["full"][te][i, ch]
            ms = h.m["ms"][te][i, ch]
            best = int(np.argmax(h.m["recall"][te].mean(axis=0)))  # the best fixed @5
            rows[c] = {
                "n_test": len(te),
                "recall": float(rec.mean()),
                "fcr": float(fcr.mean()),
                "mean_ms": float(ms.mean()),
                "share": {
                    s: float(np.mean(ch == j))
                    for j, s in enumerate(p.strategies)
                    if (ch == j).any()
                },
                "best_fixed": p.strategies[best],
                "best_fixed_recall": float(h.m["recall"][te][:, best].mean()),
                "best_fixed_ms": float(h.m["ms"][te][:, best].mean()),
                "recall_vs_best": paired_bootstrap(rec, h.m["recall"][te][:, best], seed=0),
            }
        out[arm] = rows
    return out


def adr_rows(dataset: str, corpora: list[str], arms: dict[str, tuple[str, ...]]) -> dict:
    from r2adapter.adr.evaluate import figures
    from r2adapter.adr.gamma import COMPLEX, choose_gamma, prompt_overhead, prompt_tokens
    from r2adapter.adr.labels import read_adr_labels
    from r2adapter.adr.router import decide, fit_head
    from r2adapter.config import adr_params
    from r2adapter.evaluate.stats import paired_bootstrap, ratio_interval
    from r2adapter.index.encoder import get_encoder

    p = adr_params()
    enc = get_encoder()
    held = {}
    for c in [dataset, *corpora]:
        labs = [lab for lab in read_adr_labels(c) if lab.split == "test"]
        held[c] = (labs, enc.encode([lab.question for lab in labs]))
    out: dict[str, Any] = {}
    for arm, extra in arms.items():
        train = [
            lab
            for c in dict.fromkeys([dataset, *extra])
            for lab in read_adr_labels(c)
            if lab.split != "test"
        ]
        x = enc.encode([lab.question for lab in train])
        head = fit_head(x, [lab.label for lab in train], p.classifier_c, p.seed)
        gamma, _ = choose_gamma(train, x, p, prompt_overhead([lab.question for lab in train], p))
        rows: dict[str, Any] = {"n_train": len(train), "gamma": gamma}
        for c, (labs, xt) in held.items():
            ops = [d.operator for d in decide(head.probs(xt), gamma)]
            over = prompt_overhead([lab.question for lab in labs], p)
            routed = prompt_tokens(labs, ops, over)
            ref = prompt_tokens(labs, [COMPLEX] * len(labs), over)
            f = figures(labs, ops, np.zeros(len(labs)))
            fx = figures(labs, [COMPLEX] * len(labs), np.zeros(len(labs)))
            full = np.array([lab.outcomes[o].full for lab, o in zip(labs, ops, strict=True)])
            full_x = np.array([lab.outcomes[COMPLEX].full for lab in labs])
            rows[c] = {
                "n_test": len(labs),
                "fcr": f["fcr"],
                "complex_fcr": fx["fcr"],
                "fcr_vs_complex": paired_bootstrap(full, full_x, seed=0),
                "prompt_tokens_vs_complex": ratio_interval(routed, ref),
                "share": {o: float(np.mean(np.array(ops) == o)) for o in sorted(set(ops))},
            }
        out[arm] = rows
    return out


def main(argv: list[str] | None = None) -> int:
    ap = arg_parser(__doc__ or "", "(no quick mode: the fits are seconds)", "union_router.json")
    ap.add_argument("--dataset", default="2wikimultihopqa")
    ap.add_argument("--corpora", default="hotpotqa_dev,musique_dev")
    args = ap.parse_args(argv)
    require_db()
    corpora = [c.strip() for c in args.corpora.split(",") if c.strip()]
    arms = {args.dataset: (), "union": tuple(corpora)}
    result = {
        **new_result("union_router", args.quick),
        "config": {"dataset": args.dataset, "corpora": corpora},
        "kway": kway_rows(args.dataset, corpora, arms),
        "adr": adr_rows(args.dataset, corpora, arms),
    }
    for fam in ("kway", "adr"):
        for arm, rows in result[fam].items():
            for c, r in rows.items():
                if not isinstance(r, dict):
                    continue
                if fam == "kway":
                    b = r["recall_vs_best"]
                    print(
                        f"kway trained on {arm:<16} {c:<16} recall {r['recall']:.3f} at "
                        f"{r['mean_ms']:.1f} ms vs {r['best_fixed']} {r['best_fixed_recall']:.3f} "
                        f"at {r['best_fixed_ms']:.1f}: {b['diff']:+.3f} {np.round(b['ci95'], 3)}"
                    )
                else:
                    t, f = r["prompt_tokens_vs_complex"], r["fcr_vs_complex"]
                    print(
                        f"adr  trained on {arm:<16} {c:<16} tokens {t['ratio']:.3f} "
                        f"{np.round(t['ci95'], 3)} FCR {r['fcr']:.3f} vs complex "
                        f"{r['complex_fcr']:.3f}: {f['diff']:+.3f} {np.round(f['ci95'], 3)}"
                    )
    finish(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
