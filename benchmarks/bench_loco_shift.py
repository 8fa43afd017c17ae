"""Leave-one-corpus-out under covariate shift (issue 24): two label-free corrections of the
k-way transfer, against the plug-in search `r2a evaluate routing --protocol loco` uses.

- `weighted`: a domain classifier (logistic regression on the router's own features) tells
  the training corpora's queries from the held-out corpus's, with no label of the latter;
  the thresholds are searched on the training corpora's *labelled* validation queries,
  resampled by the importance weight p(held out | x) / p(train | x), at the held-out
  corpus's own strategy ms (timed without gold). Standard importance weighting: the
  thresholds fit the training queries that look like the new corpus.
- `guard`: the plug-in router, except that a query the domain classifier finds unlike every
  training query (p(held out | x) above the `guard_quantile` of the training queries' own
  out-of-fold p) takes the fallback: abstain where the heads have seen nothing similar.

Both points (served: kway.route at kway.budget; quality: kway.quality_route at
kway.quality_budget), every corpus held out in turn, paired against the best fixed
strategy. Nothing is chosen on the held-out corpus: the guard quantile is one fixed value
(0.9, stated before the run). Saves benchmarks/results/loco_shift.json.

    .venv/bin/python benchmarks/bench_loco_shift.py
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

if not __package__:  # `python benchmarks/...py`: put the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import finish, new_result, require_db  # noqa: E402
from r2adapter.config import kway_params  # noqa: E402
from r2adapter.evaluate.routing_report import columns  # noqa: E402
from r2adapter.evaluate.stats import paired_bootstrap  # noqa: E402
from r2adapter.kway.cascade import Costs, choose, cost_cap, tune_thresholds  # noqa: E402
from r2adapter.reports.loco import (  # noqa: E402
    _best_fixed,
    _choice,
    _train,
    _transfer,
    nested_margin,
    read_corpora,
)

CORPORA = ("2wikimultihopqa", "hotpotqa_dev", "musique_dev")
GUARD_QUANTILE = 0.9
RESAMPLE = 4000
FEW, DRAWS = (10, 25, 50, 100), 20
OUT = Path(__file__).parent / "results" / "loco_shift.json"


def domain_probs(x_src: np.ndarray, x_tgt: np.ndarray, seed: int = 0):
    """p(held out | x) for the training queries (out of fold, 5 folds) and the held-out
    ones (a model on everything), balanced classes; and the classifier's out-of-fold AUC."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold

    x = np.vstack([x_src, x_tgt])
    y = np.r_[np.zeros(len(x_src)), np.ones(len(x_tgt))]
    mu, sd = x.mean(0), x.std(0) + 1e-6
    z = (x - mu) / sd
    oof = np.zeros(len(x))
    for tr, te in StratifiedKFold(5, shuffle=True, random_state=seed).split(z, y):
        clf = LogisticRegression(C=0.1, max_iter=2000, class_weight="balanced")
        clf.fit(z[tr], y[tr])
        oof[te] = clf.predict_proba(z[te])[:, 1]
    return oof[: len(x_src)], oof[len(x_src) :], float(roc_auc_score(y, oof))


def weighted_thresholds(kr, router, src, p_src, ms_t, ps_t, p, seed=0):
    """τ searched on the training corpora's val queries, resampled by p/(1-p)."""
    va = np.where(src["splits"] == "val")[0]
    w = np.clip(p_src[va] / np.clip(1 - p_src[va], 1e-6, None), 0, None)
    w = np.minimum(w, np.quantile(w, 0.99))  # one query may not carry the search
    ess = float(w.sum() ** 2 / (w**2).sum())
    idx = np.random.default_rng(seed).choice(va, size=RESAMPLE, p=w / w.sum())
    probs = router.probs(src["x"][idx])
    c = Costs(src["m"]["recall"][idx], np.tile(ms_t, (RESAMPLE, 1)), np.tile(ps_t, (RESAMPLE, 1)))
    tau, _, ok = tune_thresholds(probs, c, kr.order, kr.fallback_ix, cost_cap(ms_t, p.budget), p)
    return (tau if ok else kr.tau), ess, ok


def weighted_router_choice(router, kr, src_list, x_tgt, ms_t, ps_t, p, cols, margin=0.0):
    """Choices on x_tgt of `kr` with thresholds searched on the importance-resampled
    labelled val queries of the corpora in `src_list`, raised by `margin`."""
    x_src = np.vstack([c.x for c in src_list])
    p_src, _, _ = domain_probs(x_src, x_tgt)
    src = {
        "x": x_src,
        "splits": np.concatenate([c.splits for c in src_list]),
        "m": {
            k: np.concatenate([columns(c.m, cols)[k] for c in src_list])
            for k in ("recall", "ms", "passages")
        },
    }
    tau, _, _ = weighted_thresholds(kr, router, src, p_src, ms_t, ps_t, p)
    tau = np.clip(tau + margin, 0.0, 1.0)
    return np.array([cols[c] for c in choose(kr.probs(x_tgt), tau, kr.order, kr.fallback_ix)])


def nested_method(train_on, data, cols, tk, p, margins):
    """(method, margin) chosen on the nested transfers between the training corpora: per
    method the smallest margin that met the target on every nested pair; between methods,
    the one with the lower mean nested ms ratio. None when no pair of them met it."""
    met: dict = {}
    for a in train_on:
        router, _, _ = _train([data[a]], cols, tk, p, a)
        for b in train_on:
            if b == a:
                continue
            d = data[b]
            kr = _transfer(router, d, cols, p, [])
            mk = columns(d.m, cols)
            ms_t, ps_t = mk["ms"].mean(0), mk["passages"].mean(0)
            j = _best_fixed(d.m, 5.0)
            for delta in margins:
                for method in ("plugin", "weighted"):
                    if method == "plugin":
                        ch = _choice(kr, d.x, float(delta), cols)
                    else:
                        ch = weighted_router_choice(
                            router, kr, [data[a]], d.x, ms_t, ps_t, p, cols, float(delta)
                        )
                    s = score(ch, j, d.m)
                    met.setdefault((method, float(delta)), []).append((s["met"], s["ms_ratio"]))
    best = None
    for method in ("plugin", "weighted"):
        for delta in sorted(margins):
            rows = met.get((method, float(delta)), [])
            if rows and all(m for m, _ in rows):
                cost = float(np.mean([r for _, r in rows]))
                if best is None or cost < best[2]:
                    best = (method, float(delta), cost)
                break
    return best, {f"{k[0]}@{k[1]}": v for k, v in met.items()}


def few_labels(kr, d, cols, p, j, ks=FEW, draws=DRAWS, seed=0):
    """The thresholds searched on k labelled questions of the held-out corpus (the heads
    stay the training corpora's), scored on its other questions against the best fixed
    strategy on those same questions; `draws` random draws per k."""
    rng = np.random.default_rng(seed)
    mk = columns(d.m, cols)
    ms_t = mk["ms"].mean(0)
    probs = kr.probs(d.x)
    n = len(d.labels)
    rows = {}
    for k in ks:
        if k >= n:
            continue
        diffs, ratios, met = [], [], []
        for _ in range(draws):
            lab = rng.choice(n, size=k, replace=False)
            rest = np.setdiff1d(np.arange(n), lab)
            c = Costs(mk["recall"][lab], mk["ms"][lab], mk["passages"][lab])
            tau, _, _ = tune_thresholds(
                probs[lab], c, kr.order, kr.fallback_ix, cost_cap(ms_t, p.budget), p
            )
            ch = np.array([cols[i] for i in choose(probs[rest], tau, kr.order, kr.fallback_ix)])
            sub = {key: v[rest] for key, v in d.m.items() if len(v) == n}
            r = score(ch, j, sub, paired=False)
            diffs.append(r["diff"])
            ratios.append(r["ms_ratio"])
            met.append(r["met"])
        rows[str(k)] = {
            "diff_mean": float(np.mean(diffs)),
            "diff_p10": float(np.quantile(diffs, 0.1)),
            "ms_ratio_mean": float(np.mean(ratios)),
            "met_share": float(np.mean(met)),
        }
    return rows


def score(choice, j_best, m, paired=True, tol=0.005):
    rr = np.arange(len(choice))
    rec, ms = m["recall"][rr, choice], m["ms"][rr, choice]
    best_rec, best_ms = m["recall"][:, j_best], m["ms"][:, j_best]
    b = paired_bootstrap(rec, best_rec) if paired else {"ci95": None}
    return {
        "recall": float(rec.mean()),
        "mean_ms": float(ms.mean()),
        "diff": float(rec.mean() - best_rec.mean()),
        "ci95": b["ci95"],
        "ms_ratio": float(ms.mean() / best_ms.mean()),
        "met": bool(rec.mean() >= best_rec.mean() - tol and ms.mean() <= best_ms.mean()),
    }


def main() -> int:
    require_db()
    every = kway_params()
    t0 = time.perf_counter()
    names, table, data = read_corpora(CORPORA, every)
    print(f"read {len(CORPORA)} corpora in {time.perf_counter() - t0:.0f} s", flush=True)
    quality = replace(every, route=every.quality_route, budget=every.quality_budget)
    out: dict = {
        **new_result("loco_shift", False),
        "guard_quantile": GUARD_QUANTILE,
        "resample": RESAMPLE,
        "few_label_draws": DRAWS,
        "note": (
            "ms ratios are the chosen strategies' labelled ms against the best fixed "
            "strategy's, without the router's own time (~0.3 ms); few_labels: thresholds "
            "searched on k labelled held-out questions, scored on the rest"
        ),
        "held_out": {},
    }
    for held in CORPORA:
        train_on = [c for c in CORPORA if c != held]
        d = data[held]
        x_src = np.vstack([data[c].x for c in train_on])
        p_src, p_tgt, auc = domain_probs(x_src, d.x)
        src = {
            "x": x_src,
            "splits": np.concatenate([data[c].splits for c in train_on]),
            "m": {},
        }
        rows: dict = {"domain_auc": auc}
        for row, pp, margins in (
            ("kway", every, (0.0,)),
            ("kway_quality", quality, every.quality_margins),
        ):
            p = pp.routed()
            cols = [names.index(s) for s in p.strategies]
            tk = [table[j] for j in cols]
            src["m"] = {
                k: np.concatenate([columns(data[c].m, cols)[k] for c in train_on])
                for k in ("recall", "ms", "passages")
            }
            router, _, _ = _train([data[c] for c in train_on], cols, tk, p, "+".join(train_on))
            mk = columns(d.m, cols)
            ms_t, ps_t = mk["ms"].mean(0), mk["passages"].mean(0)
            kr = _transfer(router, d, cols, p, [])
            j = _best_fixed(d.m, 5.0)
            res: dict = {"best_fixed": names[j]}
            res["plugin"] = score(_choice(kr, d.x, 0.0, cols), j, d.m)
            if len(margins) > 1:
                margin, _ = nested_margin(train_on, margins, data, cols, tk, p)
                res["plugin_nested_margin"] = {
                    "margin": margin,
                    **score(_choice(kr, d.x, margin, cols), j, d.m),
                }
            tau, ess, ok = weighted_thresholds(kr, router, src, p_src, ms_t, ps_t, p)
            ch = np.array([cols[c] for c in choose(kr.probs(d.x), tau, kr.order, kr.fallback_ix)])
            res["weighted"] = {"ess": ess, "found": ok, **score(ch, j, d.m)}
            line = float(np.quantile(p_src, GUARD_QUANTILE))
            odd = p_tgt > line
            base = _choice(kr, d.x, 0.0, cols)
            guarded = np.where(odd, cols[kr.fallback_ix], base)
            res["guard"] = {"abstained": float(odd.mean()), **score(guarded, j, d.m)}
            if len(margins) > 1:
                pick, nested = nested_method(train_on, data, cols, tk, p, margins)
                if pick is None:
                    ch = _choice(kr, d.x, 0.0, cols)
                elif pick[0] == "plugin":
                    ch = _choice(kr, d.x, pick[1], cols)
                else:
                    ch = weighted_router_choice(
                        router, kr, [data[c] for c in train_on], d.x, ms_t, ps_t, p, cols, pick[1]
                    )
                res["nested_method"] = {
                    "pick": list(pick) if pick else None,
                    "nested": nested,
                    **score(ch, j, d.m),
                }
            res["few_labels"] = few_labels(kr, d, cols, p, j)
            for k, v in res["few_labels"].items():
                print(
                    f"{held:16s} {row:12s} {k:>3s} labels  diff {v['diff_mean']:+.3f} "
                    f"(p10 {v['diff_p10']:+.3f}) ms x{v['ms_ratio_mean']:.2f} "
                    f"met {v['met_share']:.0%}",
                    flush=True,
                )
            rows[row] = res
            for k in ("plugin", "plugin_nested_margin", "weighted", "guard", "nested_method"):
                if k in res:
                    r = res[k]
                    print(
                        f"{held:16s} {row:12s} {k:21s} recall {r['recall']:.3f} "
                        f"({r['diff']:+.3f}) ms x{r['ms_ratio']:.2f} met {r['met']}",
                        flush=True,
                    )
        print(f"{held}: domain AUC {auc:.3f}", flush=True)
        out["held_out"][held] = rows
    finish(out, OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
