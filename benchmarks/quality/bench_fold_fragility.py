"""Study: how much does the leave-one-out fold's chosen point move when one training corpus
is taken away?

`r2a evaluate corpora` once trained every fold on musique_mixed too (a bug, since fixed) and
two folds' points collapsed (hotpotqa_dev .813 → .734, every question sent to dense@5). This
study asks whether that was one unlucky draw or how the rule behaves: each corpus held out
as `--protocol loco --cost-profile tokens` does, trained on the served union less one more
corpus (with every query set over that corpus's passages), against the held-out set's best
fixed strategy. Nothing is chosen on the figures; the rule and its candidates are
params.yaml's.

    .venv/bin/python -m benchmarks.quality.bench_fold_fragility
"""

from __future__ import annotations

import json
from pathlib import Path

from r2adapter.config import kway_params
from r2adapter.kway.transfer import training_corpora
from r2adapter.label.corpora import corpus_key, served_union
from r2adapter.reports.loco import loco_report

HELD_OUT = ("hotpotqa_dev", "musique_dev_mixed", "2wiki_mixed", "musique_mixed")
OUT = Path("benchmarks/results/fold_fragility.json")


def groups(names: list[str]) -> dict[str, list[str]]:
    """Training corpora grouped by their passages (a mixed set goes with its corpus)."""
    out: dict[str, list[str]] = {}
    for c in names:
        out.setdefault(corpus_key(c) or c, []).append(c)
    return out


def row(rep: dict) -> dict:
    k = rep["routers"]["kway"]
    pb = k["paired_best_fixed"]
    note = next((n for n in rep["notes"] if "chosen in the fold" in n), "")
    return {
        "recall": k["recall"],
        "best_fixed": pb["strategy"],
        "best_fixed_recall": pb["recall"],
        "diff": pb["diff"],
        "ci95": pb["ci95"],
        "cost_ratio": pb["cost_ratio"]["ratio"],
        "share": k["share"],
        "point": note.split(";")[0],
    }


def main() -> None:
    union = served_union(kway_params().train_corpora)
    res: dict = {"profile": "tokens", "held_out": {}}
    for d in HELD_OUT:
        base = training_corpora(d, union)
        runs = {"all": row(loco_report(d, corpora=base, profile="tokens"))}
        for key, members in groups(base).items():
            kept = [c for c in base if c not in members]
            if not kept:
                continue
            runs[f"without {'+'.join(members)}"] = row(
                loco_report(d, corpora=kept, profile="tokens")
            )
            del key
        res["held_out"][d] = runs
        for name, r in runs.items():
            print(
                f"{d:18s} {name:42s} kway {r['recall']:.3f} vs {r['best_fixed']} "
                f"{r['best_fixed_recall']:.3f}: {r['diff']:+.3f} "
                f"[{r['ci95'][0]:+.3f}, {r['ci95'][1]:+.3f}] at {r['cost_ratio']:.3f}x"
            )
        OUT.write_text(json.dumps(res, indent=1) + "\n")
    print(f"→ {OUT}")


if __name__ == "__main__":
    main()
