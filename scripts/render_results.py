#!/usr/bin/env python
"""Render docs/results.md from the saved reports: every table names the JSON file its
figures come from, so no figure in the docs can drift from its file.

    .venv/bin/python scripts/render_results.py            # writes docs/results.md
    .venv/bin/python scripts/render_results.py --out x.md # elsewhere
    .venv/bin/python scripts/render_results.py --root R   # read reports/ etc. under R

Sources: `reports/` (what `make run` / `dvc repro` writes: validation, index, labels,
training, promotion, evaluation, corpora) and `benchmarks/results/*.json` (what the
benchmarks saved). A file that is missing is said so in the page, "(not measured: <file>
missing)", and the rest still renders. Reads only JSON and params.yaml: it imports nothing
from the project, so it runs whatever state the library is in (`make results`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
OUT = Path("docs") / "results.md"
MISSING = "(not measured: {} missing)"


# ------------------------------------------------------------------------------ format
def num(x: Any, digits: int = 3) -> str:
    """A float with `digits` decimals (0.789), an int as is, None/NaN as an em dash."""
    if x is None or isinstance(x, bool):
        return "—" if x is None else ("yes" if x else "no")
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "—"
        return f"{x:.{digits}f}"
    return str(x)


def param(x: Any) -> str:
    """A params.yaml value as written there: 1e-05, 0.5, a list joined."""
    if isinstance(x, list):
        return ", ".join(str(v) for v in x)
    if isinstance(x, float):
        return f"{x:g}"
    return num(x)


def ms(x: Any) -> str:
    return num(x, 1)


def pct(x: Any) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def signed(x: Any, digits: int = 3) -> str:
    return "—" if x is None else f"{x:+.{digits}f}"


def ci(pair: Sequence[float] | None, digits: int = 3) -> str:
    if not pair:
        return "—"
    return f"[{pair[0]:+.{digits}f}, {pair[1]:+.{digits}f}]"


def diff_ci(d: dict[str, Any] | None, digits: int = 3) -> str:
    """A paired difference {diff, ci95} as `+0.074 [+0.060, +0.088]`."""
    if not d:
        return "—"
    return f"{signed(d.get('diff'), digits)} {ci(d.get('ci95'), digits)}"


def paired_cell(v: dict[str, Any]) -> str:
    """A paired comparison: `diff [ci]`, or the gap to the hull where no interval was kept."""
    if "diff" in v or "paired" in v:
        return diff_ci(v.get("paired", v))
    if "gap" in v:
        kway, hull = num(v.get("kway_recall")), num(v.get("hull_recall"))
        return f"{signed(v['gap'])} (kway {kway}, hull {hull})"
    return "—"


def pick(d: Any, spec: str) -> list[str]:
    """Cells from `d` by a spec of space-separated `key:digits` (a key with `/` goes down:
    `op_latency/p50_ms:1`); each formatted by `num` with that many decimals."""
    cells = []
    for item in spec.split():
        key, _, digits = item.rpartition(":")
        cells.append(num(get(d, *key.split("/")), int(digits)))
    return cells


def pairs(d: dict[str, Any] | None) -> str:
    """A small dict as `key value, key value` (floats to 3 decimals)."""
    return ", ".join(f"{k} {num(v)}" for k, v in (d or {}).items()) or "—"


def get(d: Any, *path: Any, default: Any = None) -> Any:
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return default
        d = d[p]
    return d


# ------------------------------------------------------------------------------ page
class Page:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.lines: list[str] = []

    def load(self, rel: str) -> Any:
        path = self.root / rel
        if not path.is_file():
            return None
        return json.loads(path.read_text(encoding="utf-8"))

    def h(self, level: int, title: str) -> None:
        self.lines += [f"{'#' * level} {title}", ""]

    def para(self, text: str) -> None:
        self.lines += [text, ""]

    def source(self, *rels: str) -> None:
        names = ", ".join(f"`{r}`" for r in rels)
        self.lines += [f"Source: {names}", ""]

    def missing(self, rel: str) -> None:
        self.lines += [MISSING.format(f"`{rel}`"), ""]

    def table(self, headers: str | Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """A markdown table; `headers` a list or one string "a | b | c"."""
        if isinstance(headers, str):
            headers = headers.split(" | ")
        rows = [[str(c) for c in r] for r in rows]
        if not rows:
            self.lines += ["(no rows)", ""]
            return
        self.lines.append("| " + " | ".join(headers) + " |")
        self.lines.append("|" + "---|" * len(headers))
        for r in rows:
            self.lines.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
        self.lines.append("")

    def section(self, level: int, title: str, rel: str, body: Callable[[Any], None]) -> None:
        """A heading, the source line and the table(s) `body` renders from the file."""
        self.h(level, title)
        self.source(rel)
        data = self.load(rel)
        if data is None:
            self.missing(rel)
            return
        if isinstance(data, dict) and data.get("timestamp"):
            self.lines[-2] += f" ({data['timestamp']})"
        body(data)

    def text(self) -> str:
        while self.lines and self.lines[-1] == "":
            self.lines.pop()
        return "\n".join(self.lines) + "\n"


# ------------------------------------------------------------------------------ reports/
def first_run(page: Page) -> None:
    """A fresh clone's `make run`, by stage (benchmarks/bench_first_run.py)."""
    rel = "benchmarks/results/first_run.json"

    def body(d: dict[str, Any]) -> None:
        page.para(
            f"Commit `{str(get(d, 'machine', 'commit', default=''))[:12]}`, "
            f"exit {d.get('exit_code')}: "
            f"**{num(d.get('total_s'), 0)} s** in all ({num(d.get('run_s'), 0)} s `make run` "
            "after `make install`)."
        )
        stages = sorted((d.get("stages") or {}).items(), key=lambda kv: -kv[1])
        page.table("stage | s | share", [[k, num(v, 0), pct(v / d["total_s"])] for k, v in stages])
        steps = d.get("index_steps") or {}
        names = sorted({k for v in steps.values() for k in v if k != "shares_index_of"})
        page.table(
            ["index", *names],
            [
                [ds, *(num(v.get(n), 0) if n in v else "" for n in names)]
                for ds, v in steps.items()
                if not v.get("shares_index_of")
            ],
        )

    page.section(3, "The first run (fresh clone, `make run`)", rel, body)


def encoder_int8(page: Page) -> None:
    """The index encoder in int8 against fp32 (benchmarks/bench_encoder_int8.py)."""
    rel = "benchmarks/results/encoder_int8.json"

    def body(d: dict[str, Any]) -> None:
        rows = []
        for name, r in (d.get("corpora") or {}).items():
            rows.append(
                [
                    name,
                    num(get(r, "throughput", "onnx", "passages_per_s"), 0),
                    num(get(r, "throughput", "onnx-int8", "passages_per_s"), 0),
                    num(get(r, "speedup", "corpus"), 2),
                    num(get(r, "cosine", "min"), 3),
                    num(get(r, "dense_recall@5", "onnx")),
                    num(get(r, "dense_recall@5", "onnx-int8")),
                    diff_ci(r.get("paired_int8_minus_fp32")),
                    r.get("within_bar"),
                ]
            )
        page.table(
            "corpus | fp32 passages/s | int8 passages/s | corpus speed-up | min cosine | "
            "dense R@5 fp32 | int8 | int8 − fp32 [95% CI] | within −.005",
            rows,
        )

    page.section(3, "The index encoder in int8", rel, body)


def validation(page: Page) -> None:
    page.h(3, "Validation (Great Expectations)")
    files = sorted((page.root / "reports" / "validate").glob("*.json"))
    page.source("reports/validate/*.json")
    if not files:
        page.missing("reports/validate/*.json")
        return
    rows = []
    for f in files:
        d = json.loads(f.read_text(encoding="utf-8"))
        rows.append(
            [
                d.get("dataset"),
                *pick(d, "passages:0 queries:0 complete_gold:0 expectations:0 failed:0"),
            ]
        )
    page.table("dataset | passages | queries | complete gold | expectations | failed", rows)


def index(page: Page) -> None:
    rel = "reports/index/2wikimultihopqa.json"

    def body(d: dict[str, Any]) -> None:
        counts = [
            "passages",
            "entities",
            "facts",
            "passage_entity_edges",
            "synonym_edges",
            "passages_without_facts",
            "adr_hyperedges",
            "adr_insight_edges",
        ]
        page.table(
            ["encoder", "OpenIE", *counts],
            [[d.get("encoder"), d.get("openie"), *(num(d.get(k)) for k in counts)]],
        )
        stages = [k for k in d if k.startswith("seconds_")]
        page.table(
            [k.removeprefix("seconds_") + " s" for k in stages],
            [[num(d[k], 1) for k in stages]],
        )

    page.section(3, "The 2Wiki index", rel, body)


def labels(page: Page) -> None:
    page.h(3, "Labels (`r2a label`: the paper's Table 1 and the rules' oracles)")
    files = sorted((page.root / "reports" / "labels").glob("*.json"))
    page.source("reports/labels/<dataset>.json")
    if not files:
        page.missing("reports/labels/*.json")
        return
    rows = []
    for f in files:
        d = json.loads(f.read_text(encoding="utf-8"))
        t1 = d.get("table1", {})
        rules = d.get("rule_comparison", {})
        row = [
            d.get("dataset"),
            d.get("rule"),
            num(t1.get("total")),
            num(t1.get("preference_graph_pct"), 1),
            num(t1.get("both_suitable_pct"), 1),
        ]
        for rule in ("avg_rank", "topk_first", "recall_first"):
            r = rules.get(rule)
            row.append(
                "—" if r is None else f"{num(r['graph_preference'])} / {num(r['oracle_recall@5'])}"
            )
        rows.append(row)
    page.table(
        (
            "dataset | rule | queries | graph preferred % | both suitable %"
            " | avg_rank: graph share / oracle R@5 | topk_first | recall_first"
        ),
        rows,
    )


def retrieval_modes(page: Page, modes: dict[str, Any]) -> None:
    keys = ["recall@2", "recall@5", "fcr@2", "fcr@5", "answer_in_context@5"]
    rows = []
    for mode, m in modes.items():
        more = "hub_mass:3 ppr_weighted_strength:1 latency_ms_p50:1 latency_ms_p95:1"
        rows.append([mode, *(num(m.get(k)) for k in keys), *pick(m, more)])
    page.table(
        (
            "mode | R@2 | R@5 | FCR@2 | FCR@5 | answer in context@5 | hub mass"
            " | PPR-weighted strength | p50 ms | p95 ms"
        ),
        rows,
    )


def retrieval(page: Page) -> None:
    rel = "reports/eval/retrieval.json"

    def body(d: dict[str, Any]) -> None:
        page.para(
            f"{d.get('dataset')}, {d.get('n_queries')} complete-gold queries, index version "
            f"{d.get('index_version')}, OpenIE `{d.get('openie')}`, PPR solver "
            f"`{get(d, 'ppr', 'solver')}`; rewrite `{get(d, 'rewrite', 'backend')}`."
        )
        retrieval_modes(page, d.get("modes", {}))

    page.section(3, "Retrieval (`r2a evaluate retrieval`)", rel, body)


def router_params(page: Page) -> None:
    page.h(3, "What the two-way routers are trained with")
    page.source("params.yaml")
    path = page.root / "params.yaml"
    if not path.is_file():
        page.missing("params.yaml")
        return
    p = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    shared = p.get("router", {})
    keys = "alpha gamma weight_decay lr head_lr epochs max_graph_usage usage_margin features"
    rows = []
    for router, section in (("r2a", "router_minilm"), ("r2a_embed", "router_embedding")):
        merged = {**shared, **(p.get(section) or {})}
        rows.append([router, f"`{section}`", *(param(merged.get(k)) for k in keys.split())])
    page.para(
        "`router:` merged with the backbone's own section (the backbone's wins). α and γ "
        "are the focal BCE's (R²Adapter eq. 2; γ 0 is α-balanced BCE); a key absent from "
        "params.yaml takes `RouterParams`' default in r2adapter/config.py."
    )
    page.table(
        (
            "router | section | α | γ | weight decay | lr | head lr | epochs"
            " | max graph usage | usage margin | features"
        ),
        rows,
    )


def training(page: Page) -> None:
    page.h(3, "Training (`r2a train`), the frozen test split")
    rels = ["reports/train/minilm.json", "reports/train/embedding.json"]
    page.source(*rels)
    rows = []
    for rel in rels:
        d = page.load(rel)
        if d is None:
            page.missing(rel)
            continue
        steps = f"{d.get('best_step')} / {d.get('steps')}"
        test = "test_recall@5:3 test_recall@2:3 test_f1_graph:3 test_graph_usage:3 seconds:1"
        rows.append(
            [d.get("router"), d.get("version"), num(d.get("tau"), 2), steps, *pick(d, test)]
        )
    page.table(
        (
            "router | version | τ* | best step / steps | test R@5 | test R@2 | graph F1"
            " | graph usage | train s"
        ),
        rows,
    )
    rel = "reports/train/kway.json"
    d = page.load(rel)
    page.source(rel)
    if d is None:
        page.missing(rel)
        return
    thresholds = ", ".join(f"{k} {v}" for k, v in (d.get("thresholds") or {}).items())
    page.table(
        (
            "router | version | thresholds | fallback | test recall | test FCR | mean ms"
            " | mean passages | train s"
        ),
        [
            [
                d.get("router"),
                d.get("version"),
                thresholds,
                d.get("fallback"),
                *pick(d, "test_recall:3 test_fcr:3 test_mean_ms:1 test_mean_passages:1 seconds:1"),
            ]
        ],
    )
    known = {"minilm", "embedding", "kway"}
    others = [
        f
        for f in sorted((page.root / "reports" / "train").glob("*.json"))
        if f.stem not in known and not f.stem.endswith("_threshold")
    ]
    for f in others:
        d = json.loads(f.read_text(encoding="utf-8"))
        page.source(f"reports/train/{f.name}")
        scalars = {k: v for k, v in d.items() if isinstance(v, int | float) and k != "version"}
        page.table(
            "router | version | figures",
            [[d.get("router", f.stem), d.get("version"), pairs(scalars)]],
        )


def promotion(page: Page) -> None:
    page.h(3, "Promotion (`r2a promote`: the gate)")
    files = sorted((page.root / "reports" / "promote").glob("*.json"))
    page.source("reports/promote/<router>.json")
    if not files:
        page.missing("reports/promote/*.json")
        return
    rows = []
    for f in files:
        d = json.loads(f.read_text(encoding="utf-8"))
        rows.append(
            [
                d.get("router"),
                num(d.get("candidate")),
                num(d.get("champion_before")),
                num(d.get("promoted")),
                "; ".join(d.get("reasons") or []),
            ]
        )
    page.table("router | candidate | champion before | promoted | reasons", rows)


def two_way_routers(page: Page, routers: dict[str, Any]) -> None:
    rows = []
    for name, r in routers.items():
        spec = (
            "recall@5:3 recall@2:3 graph_usage:3 precision_graph:3 recall_graph:3 "
            "f1_graph:3 latency_ms_p50:2"
        )
        rows.append([name, *pick(r, spec)])
    page.table(
        (
            "router | hybrid R@5 | hybrid R@2 | graph usage | graph precision"
            " | graph recall | graph F1 | routing p50 ms"
        ),
        rows,
    )


def routing_eval(page: Page) -> None:
    rel = "reports/eval/routing.json"

    def body(d: dict[str, Any]) -> None:
        page.para(
            f"{d.get('dataset')}, split `{d.get('split')}`, {d.get('n_queries')} queries, "
            f"labels `{d.get('rule')}`; champion versions {pairs(d.get('champion_versions'))}."
        )
        two_way_routers(page, d.get("routers", {}))

    page.section(3, "Routing (`r2a evaluate routing`)", rel, body)


KWAY_DEFAULT_ROWS = tuple(
    "kway r2a r2a_rw r2a_embed r2a_embed_rw ner adr oracle oracle_routed always_dense@5 "
    "always_graph@5 always_catrag@5 always_graph+rw@5 always_fusion@5 always_catrag+rw@5".split()
)


def kway_routers(page: Page, routers: dict[str, Any], names: Sequence[str] | None) -> None:
    rows = []
    for name in names or routers:
        r = routers.get(name)
        if r is None:
            continue
        share = r.get("share") or {}
        share_s = (
            ", ".join(f"{k} {v:.2f}" for k, v in share.items())
            if len(share) <= 4
            else (f"{len(share)} strategies")
        )
        spec = "recall:3 fcr:3 mean_ms:1 mean_passages:2 mean_tokens:0 latency_ms_p50:2"
        rows.append([name, *pick(r, spec), share_s])
    page.table(
        ("router | recall | FCR | mean ms | mean passages | mean tokens | routing p50 ms | share"),
        rows,
    )


def corpora(page: Page) -> None:
    page.h(3, "A corpus the routers never saw: musique_dev (`docs/corpora.md`)")
    rows = []
    rels = [
        "reports/corpora/musique_dev.retrieval_none.json",
        "reports/corpora/musique_dev.retrieval_structural.json",
    ]
    page.source(*rels)
    for rel in rels:
        d = page.load(rel)
        if d is None:
            page.missing(rel)
            continue
        g = get(d, "modes", "graph", default={})
        rw = d.get("rewrite", {})
        rows.append(
            [
                rw.get("backend"),
                num(d.get("n_queries")),
                *pick(g, "recall@5:3 fcr@5:3 answer_in_context@5:3"),
                *pick(rw, "parsed:3 first_hop_accuracy:3 chain_precision:3 chain_recall:3"),
                ms(g.get("latency_ms_p50")),
            ]
        )
    page.table(
        (
            "rewrite | queries | graph R@5 | FCR@5 | answer in context@5 | parsed"
            " | first-hop head | chain precision | chain recall | p50 ms"
        ),
        rows,
    )
    rel = "reports/corpora/musique_dev.loco.json"
    page.source(rel)
    d = page.load(rel)
    if d is None:
        page.missing(rel)
        return
    page.para(
        f"The k-way router trained on {pairs(d.get('trained_on'))} queries, routing "
        f"{d.get('n_queries')} musique_dev queries (protocol `{d.get('protocol')}`, "
        f"budget {d.get('budget')})."
    )
    kway_routers(page, d.get("routers", {}), KWAY_DEFAULT_ROWS)
    paired = d.get("paired", {})
    page.table(
        "comparison | recall difference [95%]",
        [[k, diff_ci(v)] for k, v in paired.items() if isinstance(v, dict) and "diff" in v],
    )


# ------------------------------------------------------------------------------ benchmarks
def dense(page: Page) -> None:
    rel = "benchmarks/results/dense.json"

    def body(d: dict[str, Any]) -> None:
        enc = d.get("encoder", {})
        rows = []
        for name, ds in d.get("datasets", {}).items():
            recall = get(ds, "hnsw", "recall@10", default={})
            spec = "passages:0 encode_query/p50_ms:1 encode_query_1_thread/p50_ms:1 "
            spec += "dense_topk/p50_ms:2"
            by_ef = ", ".join(f"{k} {v:.3f}" for k, v in recall.items()) or "—"
            rows.append([name, *pick(ds, spec), by_ef])
        page.para(
            f"Encoder {enc.get('name')} ({enc.get('dim')}-d), torch "
            f"{get(d, 'machine', 'torch', default='?')} "
            f"({get(d, 'machine', 'torch_threads', default='?')} threads unless said); "
            "top-k is the pgvector query given the query embedding."
        )
        page.table(
            (
                "dataset | passages | encode query p50 ms | 1 thread | top-k p50 ms"
                " | HNSW recall@10 by ef_search"
            ),
            rows,
        )
        skipped = d.get("skipped") or {}
        if skipped:
            page.para("Skipped: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()))

    page.section(2, "Dense retrieval (`benchmarks/bench_dense.py`)", rel, body)


def catrag_variants(page: Page, d: dict[str, Any]) -> None:
    for ds in d.get("datasets", []):
        page.para(f"**{ds.get('dataset')}** ({ds.get('queries')} queries)")
        rows = []
        for name, v in ds.get("variants", {}).items():
            wl = v.get("fcr@5_wins_losses")
            vs = v.get("fcr@5_vs_graph")
            vs_s = "—" if vs is None else f"{signed(vs)} {ci(v.get('fcr@5_vs_graph_ci95'))}"
            wl_s = "—" if not wl else f"{wl[0]}/{wl[1]}"
            rest = "answer_in_context@5:3 hub_mass:3 ppr_weighted_strength:1 latency_ms_p50:1"
            rows.append(
                [
                    name,
                    *pick(v, "recall@5:3 fcr@5:3"),
                    vs_s,
                    wl_s,
                    *pick(v, rest),
                    num(v.get("edit_ms_p50"), 1),
                ]
            )
        page.table(
            (
                "variant | R@5 | FCR@5 | FCR@5 vs graph [95%] | wins/losses | AIC@5 | hub mass"
                " | PPR-weighted strength | p50 ms | edit p50 ms"
            ),
            rows,
        )


def catrag_union(page: Page, d: dict[str, Any]) -> None:
    """The default chosen on the union's folds, held out per corpus, then every variant."""
    u = d.get("union_fold_choice") or {}
    if u:
        page.para(
            f"Rule: {u.get('rule')}. Chosen per fold: {', '.join(u.get('per_fold', []))}; "
            f"on all folds (the default): **{u.get('all_folds')}**."
        )
        rows = []
        for ds, h in u.get("held_out", {}).items():
            f, r = h.get("fcr@5_vs_graph", {}), h.get("recall@5_vs_graph", {})
            rows.append(
                [
                    ds,
                    num(h.get("fcr@5"), 3),
                    f"{signed(f.get('diff'))} {ci(f.get('ci95'))}",
                    num(h.get("recall@5"), 3),
                    f"{signed(r.get('diff'))} {ci(r.get('ci95'))}",
                ]
            )
        page.table("held out | FCR@5 | vs graph [95%] | R@5 | vs graph [95%]", rows)
    catrag_variants(page, d)


def catrag(page: Page) -> None:
    page.h(2, "CatRAG (`benchmarks/bench_catrag.py`)")
    page.para(
        "Every figure `fact_filter: none`; paired bootstrap 95% intervals against `graph`; "
        "wins/losses: queries whose full chain only the variant (wins) or only graph recovers."
    )
    for title, rel in (
        ("Variants and ablations", "benchmarks/results/catrag.json"),
        ("Tiers read off the answer key (the ceiling)", "benchmarks/results/catrag_oracle.json"),
        (
            "The LLM judge and fact filter, local SmolLM2-135M",
            "benchmarks/results/catrag_llm_local.json",
        ),
    ):
        page.section(3, title, rel, lambda d: catrag_variants(page, d))
    page.section(
        3,
        "The default, chosen on the folds of three corpora",
        "benchmarks/results/catrag_union.json",
        lambda d: catrag_union(page, d),
    )
    page.section(
        3,
        "Why tiered edges and key-fact cancel",
        "benchmarks/results/catrag_interaction.json",
        lambda d: catrag_interaction(page, d),
    )


def catrag_interaction(page: Page, d: dict[str, Any]) -> None:
    page.para(
        f"**{d.get('dataset')}** ({d.get('queries')} queries): on the columns key-fact edits, "
        "the step's probability into each set, static → edited, per arm (anchoring on)."
    )
    rows = []
    for arm, f in d.get("arms", {}).items():
        rows.append(
            [arm, num(f.get("columns"), 1)]
            + [
                f"{num(f.get('static_' + k), 3)} → {num(f.get(k), 3)}"
                for k in ("passage_share", "keyfact_share", "gold_share")
            ]
        )
    page.table("arm | edited columns | any passage | key-fact passages | gold passages", rows)


def ppr_local(page: Page) -> None:
    page.h(2, "Local PPR (`benchmarks/bench_ppr_local.py`)")
    for title, rel in (
        ("Graph search", "benchmarks/results/ppr_local_graph.json"),
        ("CatRAG's edited operator", "benchmarks/results/ppr_local_catrag.json"),
    ):

        def body(d: dict[str, Any]) -> None:
            rows = []
            for mode, variants in d.get("modes", {}).items():
                for name, v in variants.items():
                    delta = {"diff": v.get("fcr@5_delta"), "ci95": v.get("fcr@5_delta_ci95")}
                    rows.append(
                        [
                            mode,
                            name,
                            *pick(v, "recall@5:3 fcr@5:3 top5_agreement:3"),
                            diff_ci(delta) if "fcr@5_delta" in v else "—",
                            *pick(v, "search_p50_ms:1 ppr_p50_ms:1"),
                        ]
                    )
            page.table(
                (
                    "mode | solver | R@5 | FCR@5 | top-5 equal to exact | FCR@5 vs exact [95%]"
                    " | search p50 ms | PPR p50 ms"
                ),
                rows,
            )

        page.section(3, title, rel, body)


def scale(page: Page) -> None:
    rel = "benchmarks/results/scale.json"

    def body(d: dict[str, Any]) -> None:
        page.para(
            f"A synthetic graph of the 2Wiki index's shape; graph search = the library's "
            f"GraphRetriever (seeding scores every fact and passage in memory; top-"
            f"{d.get('passage_seeds')} passages seeded; local PPR, r_max "
            f"{d.get('r_max')}). Graph search p50 at the largest size over the smallest: "
            f"**{num(d.get('graph_search_growth'), 2)}×**."
        )
        spec = (
            "passages:0 nodes:0 edges:0 graph_search_p50_ms:1 graph_search_p95_ms:1 "
            "seed_p50_ms:1 ppr_local_p50_ms:1 ppr_exact_p50_ms:1 "
            "top5_agreement:3 csr_mb:1 rss_mb:1 graph_load_s:1"
        )
        rows = [pick(s, spec) for s in d.get("sizes", {}).values()]
        page.table(
            (
                "passages | nodes | edges | graph search p50 ms | p95 ms | seeding p50 ms"
                " | local PPR p50 ms | exact PPR p50 ms | top-5 local = exact"
                " | CSR MB | RSS MB | graph load s"
            ),
            rows,
        )

    page.section(2, "Scaling (`benchmarks/bench_scale.py`; plan: `docs/scaling.md`)", rel, body)


def synonyms(page: Page) -> None:
    page.h(2, "Synonym edges: all pairs against pgvector HNSW (`benchmarks/bench_synonyms.py`)")
    rels = [
        "benchmarks/results/synonyms_hnsw.json",
        "benchmarks/results/synonyms_growth.json",
        "benchmarks/results/synonyms_growth_160k.json",
    ]
    page.source(*rels)
    rows = []
    for rel in rels:
        d = page.load(rel)
        if d is None:
            page.missing(rel)
            continue
        sizes = d.get("sizes") or {str(d.get("entities")): d}
        for size, s in sizes.items():
            ratio = s.get("hnsw_over_all_pairs")
            if ratio is None and s.get("all_pairs_s"):
                ratio = s["hnsw_s"] / s["all_pairs_s"]
            spec = "edges/all_pairs:0 recall:4 all_pairs_s:1 hnsw_s:1"
            rows.append([Path(rel).name, size, *pick(s, spec), num(ratio, 2)])
    page.table(
        (
            "file | entities | all-pairs edges | HNSW recall | all pairs s | HNSW s"
            " | HNSW / all pairs"
        ),
        rows,
    )


def graph_memory(page: Page) -> None:
    rel = "benchmarks/results/graph_memory.json"

    def body(d: dict[str, Any]) -> None:
        spec = "nodes:0 edges:0 peak_mb:1 estimate_mb:1 estimate_over_peak:2 load_s:1"
        rows = [[name, *pick(s, spec)] for name, s in d.get("datasets", {}).items()]
        page.table(
            ("dataset | nodes | edges | peak MB at load | estimate MB | estimate / peak | load s"),
            rows,
        )

    page.section(2, "Graph memory at load (`benchmarks/bench_graph_memory.py`)", rel, body)


def rewriter(page: Page) -> None:
    page.h(2, "The structural rewriter (`benchmarks/bench_rewriter.py`)")
    rel = "benchmarks/results/rewriter_all_queries.json"

    def body(d: dict[str, Any]) -> None:
        rows = []
        for ds in d.get("datasets", []):
            st = ds.get("structural", {})
            wo, w, ws = ds.get("without", {}), st.get("with", {}), st.get("with_seeding", {})
            rows.append(
                [
                    ds.get("dataset"),
                    num(ds.get("queries")),
                    pct(st.get("parsed")),
                    f"{num(wo.get('recall@5'))} / {num(wo.get('fcr@5'))}",
                    f"{num(ws.get('recall@5'))} / {num(ws.get('fcr@5'))}",
                    f"{signed(ws.get('recall@5_gain'))} {ci(ws.get('recall@5_gain_ci95'))}",
                    f"{signed(ws.get('fcr@5_gain'))} {ci(ws.get('fcr@5_gain_ci95'))}",
                    f"{signed(w.get('fcr@5_gain'))} {ci(w.get('fcr@5_gain_ci95'))}",
                    num(st.get("ms_p50"), 2),
                ]
            )
        page.table(
            (
                "corpus | queries | parsed | graph@5 R@5 / FCR@5"
                " | graph+rw@5 (seeding) R@5 / FCR@5 | R@5 gain [95%] | FCR@5 gain [95%]"
                " | q′ appended only: FCR@5 gain | rewrite p50 ms"
            ),
            rows,
        )

    page.section(3, "Every complete-gold query, with and without the triplets' seeding", rel, body)
    rel = "benchmarks/results/rewriter_epsilon_structural.json"

    def eps(d: dict[str, Any]) -> None:
        page.para(
            f"{get(d, 'config', 'dataset')}, the queries router `{get(d, 'config', 'router')}` "
            f"sends to graph ({get(d, 'routing', 'routed_to_graph')}); eq. 7's ε."
        )
        spec = "rewritten:0 recall@5_without:3 recall@5_with:3 rewrite_ms_p50:2"
        rows = [[e, *pick(v, spec)] for e, v in d.get("per_epsilon", {}).items()]
        page.table("ε | rewritten | R@5 without | R@5 with | rewrite p50 ms", rows)

    page.section(3, "ε for the structural rewriter", rel, eps)
    rel = "benchmarks/results/rewriter_corpora_musique_dev.json"

    def gate(d: dict[str, Any]) -> None:
        for name, c in d.get("corpora", {}).items():
            page.para(
                f"{name}, split `{d.get('split')}` ({c.get('n')} queries): graph@5 R@5 "
                f"{num(get(c, 'graph', 'recall@5'))}, FCR@5 {num(get(c, 'graph', 'fcr@5'))}"
            )
            rows = [
                [
                    k,
                    *pick(v, "parsed:3 recall@5:3 fcr@5:3"),
                    diff_ci(v.get("r5_gain")),
                    diff_ci(v.get("fcr5_gain")),
                ]
                for k, v in c.items()
                if isinstance(v, dict) and "r5_gain" in v
            ]
            page.table(
                (
                    "min confidence, link heads | parsed | R@5 | FCR@5 | R@5 gain [95%]"
                    " | FCR@5 gain [95%]"
                ),
                rows,
            )

    page.section(3, "The confidence gate, chosen on musique_dev's train split", rel, gate)


def routing_bench(page: Page) -> None:
    page.h(2, "Two-way routers (`benchmarks/bench_routing.py`, `bench_router_ceiling.py`)")
    rel = "benchmarks/results/routing.json"

    def body(d: dict[str, Any]) -> None:
        for name, s in d.get("sets", {}).items():
            page.para(
                f"**{name}** ({s.get('n_queries')} queries, held out: {num(s.get('held_out'))})"
            )
            two_way_routers(page, s.get("routers", {}))
        lat = d.get("latency", {})
        rows = [
            [k, ms(v.get("p50_ms")), ms(v.get("p95_ms"))]
            for k, v in lat.items()
            if isinstance(v, dict)
        ]
        page.para(f"Routing latency per query (r2a runtime `{lat.get('r2a_runtime')}`):")
        page.table("what | p50 ms | p95 ms", rows)

    page.section(3, "Side by side", rel, body)
    rel = "benchmarks/results/router_ceiling.json"

    def ceiling(d: dict[str, Any]) -> None:
        ref = d.get("reference", {})
        page.para(
            f"{d.get('dataset')} {d.get('split')}, {d.get('n_queries')} queries, "
            f"{d.get('folds')}-fold logistic probes: always dense "
            f"{num(ref.get('always_dense'))}, always graph {num(ref.get('always_graph'))}, "
            f"oracle {num(ref.get('oracle'))} (graph usage {num(ref.get('oracle_graph_usage'))})."
        )
        spec = "auc:3 recall@5_at_usage_0.4:3 recall@5_at_usage_0.5:3"
        rows = [[k, *pick(v, spec)] for k, v in d.get("models", {}).items()]
        page.table("probe | ROC AUC | R@5 at usage 0.4 | R@5 at usage 0.5", rows)

    page.section(3, "The router ceiling", rel, ceiling)


def kway(page: Page) -> None:
    page.h(2, "The k-way cost-aware router (`r2a evaluate routing`)")
    rel = "reports/routing/kway_2wikimultihopqa_cv5.json"

    def cv5(d: dict[str, Any]) -> None:
        page.para(
            f"{d.get('dataset')}, protocol `{d.get('protocol')}` ({d.get('n_queries')} "
            f"queries, out of fold), budget {d.get('budget')}, max passages "
            f"{d.get('max_passages')}; routes among {', '.join(d.get('strategies', []))}."
        )
        kway_routers(page, d.get("routers", {}), KWAY_DEFAULT_ROWS)
        page.para("Paired bootstrap (recall):")
        page.table(
            "comparison | difference [95%]",
            [[k, paired_cell(v)] for k, v in d.get("paired", {}).items()],
        )
        page.para("The recall–cost frontier against the fixed strategies' best mix (hull):")
        page.table(
            "budget | recall | FCR | mean ms | graph usage | hull recall | vs hull [95%]",
            [
                [
                    *pick(f, "budget:1 recall:3 fcr:3 mean_ms:1 graph_usage:3 hull_recall:3"),
                    diff_ci(f.get("vs_hull")),
                ]
                for f in d.get("frontier", [])
            ],
        )
        abl = d.get("ablation", {})
        rows = [
            [k, num(v.get("recall")), num(v.get("fcr")), ms(v.get("mean_ms"))]
            for k, v in abl.items()
            if isinstance(v, dict) and "recall" in v
        ]
        page.para("Ablation at the default budget:")
        page.table("variant | recall | FCR | mean ms", rows)
        at_cost = abl.get("frontier_at_two_way_cost", {})
        rows = []
        for k, v in at_cost.items():
            row = [k, ms(v.get("router_ms")), num(v.get("router_recall"))]
            for side in ("within", "above"):
                w = v.get(side) or {}
                row += [
                    f"{num(w.get('budget'), 1)}: {num(w.get('kway_recall'))} at "
                    f"{ms(w.get('kway_ms'))} ms",
                    diff_ci(w.get("paired")),
                ]
            rows.append(row)
        if rows:
            page.para(
                "kway at each two-way router's own ms (`frontier_at_two_way_cost`: the "
                "largest budget within it, the smallest above it):"
            )
            page.table(
                (
                    "router | router ms | router recall | kway within (budget) | vs router [95%]"
                    " | kway above (budget) | vs router [95%]"
                ),
                rows,
            )
        moon = abl.get("moonshot")
        if isinstance(moon, dict):
            page.para(
                f"Moonshot (`ablation.moonshot`, target {pairs(moon.get('target'))}): kway over "
                f"every strategy {num(get(moon, 'kway_every_strategy', 'recall'))}, the "
                f"fixed strategies' best mix {num(moon.get('hull_recall'))}, a per-query "
                f"oracle within the same means {num(moon.get('budgeted_oracle_recall'))}."
            )

    page.section(3, "2Wiki, out of fold", rel, cv5)
    for title, rel in (
        ("2Wiki, the frozen test split", "reports/routing/kway_2wikimultihopqa_test.json"),
        ("MuSiQue, a corpus it never saw", "reports/routing/kway_musique_all.json"),
        ("HotpotQA, a corpus it never saw", "reports/routing/kway_hotpotqa_all.json"),
    ):

        def body(d: dict[str, Any]) -> None:
            page.para(
                f"{d.get('n_queries')} queries, protocol `{d.get('protocol')}`, "
                f"budget {d.get('budget')}."
            )
            kway_routers(page, d.get("routers", {}), KWAY_DEFAULT_ROWS)
            page.table(
                "comparison | recall difference [95%]",
                [
                    [k, paired_cell(v)]
                    for k, v in d.get("paired", {}).items()
                    if isinstance(v, dict)
                ],
            )

        page.section(3, title, rel, body)

    def choice(d: dict[str, Any]) -> None:
        cfg = d.get("config", {})
        page.para(
            f"{len(d.get('candidates', {}))} candidates (route set × budget), each trained "
            f"and scored out of fold on {', '.join(cfg.get('corpora', []))} together "
            f"({pairs(cfg.get('n_queries'))} queries). Chosen per operating point:"
        )
        page.table(
            "point | route | budget | worst recall gain | worst ms ratio | rule",
            [
                [
                    point,
                    ", ".join(c.get("route", [])),
                    num(c.get("budget"), 1),
                    num(c.get("worst_recall_gain"), 4),
                    num(c.get("worst_ms_ratio"), 3),
                    c.get("rule"),
                ]
                for point, c in d.get("choice", {}).items()
            ],
        )
        rows = []
        for point, c in d.get("choice", {}).items():
            cand = d.get("candidates", {}).get(c.get("candidate"), {})
            for corpus, v in cand.get("corpora", {}).items():
                rows.append(
                    [
                        point,
                        corpus,
                        num(v.get("recall")),
                        ms(v.get("mean_ms")),
                        diff_ci(v.get("vs_reference")),
                        num(v.get("ms_vs_reference"), 2),
                        f"{v.get('best_fixed')} {num(v.get('best_fixed_recall'))}",
                        diff_ci(v.get("vs_best_fixed")),
                        num(v.get("ms_ratio"), 2),
                    ]
                )
        page.table(
            "point | corpus | recall | mean ms | vs always-graph@5 [95%] | ms ratio | best "
            "fixed | vs best fixed [95%] | ms ratio",
            rows,
        )

    page.section(
        3,
        "The route set and budget, chosen on three corpora's folds",
        "benchmarks/results/route_choice.json",
        choice,
    )

    def shift(d: dict[str, Any]) -> None:
        page.para(
            "Each corpus held out in turn, the k-way router trained on the other two; "
            "recall and ms ratio against the best fixed strategy on the held-out corpus "
            "(`benchmarks/bench_loco_shift.py`, `docs/corpora.md`). " + str(d.get("note", ""))
        )
        rows = []
        for held, r in d.get("held_out", {}).items():
            for point in ("kway", "kway_quality"):
                for method, v in (r.get(point) or {}).items():
                    if not isinstance(v, dict) or "recall" not in v:
                        continue
                    rows.append(
                        [
                            held,
                            point,
                            method,
                            num(v.get("recall")),
                            signed(v.get("diff")),
                            ci(v.get("ci95")),
                            num(v.get("ms_ratio"), 2),
                            "yes" if v.get("met") else "no",
                        ]
                    )
        page.table(
            "held out | point | transfer | recall | vs best fixed | [95%] | ms ratio | met",
            rows,
        )
        few = []
        for held, r in d.get("held_out", {}).items():
            for point in ("kway", "kway_quality"):
                for k, v in get(r, point, "few_labels", default={}).items():
                    few.append(
                        [
                            held,
                            point,
                            k,
                            signed(v.get("diff_mean")),
                            signed(v.get("diff_p10")),
                            num(v.get("ms_ratio_mean"), 2),
                            pct(v.get("met_share")),
                        ]
                    )
        page.table(
            "held out | point | labelled questions | mean diff | 10th percentile | ms ratio "
            "| draws meeting the target",
            few,
        )

    def load_runs(d: dict[str, Any]) -> None:
        m = d.get("machine", {})
        page.para(
            f"{d.get('dataset')} labelled twice: quiet (load {get(d, 'loadavg_before', 'quiet')}, "
            f"{get(d, 'label_seconds', 'quiet')} s) and with {m.get('hogs')} "
            f"{m.get('load', 'steady')} hogs (load {get(d, 'loadavg_before', 'loaded')}, "
            f"{get(d, 'label_seconds', 'loaded')} s); the k-way router trained on each, "
            f"{d.get('n_test')} test queries (`benchmarks/bench_label_load.py`, "
            "`docs/routing.md`)."
        )
        rows = []
        for mode, v in d.get("modes", {}).items():
            rows.append(
                [
                    mode,
                    pct(v.get("agreement")),
                    "yes" if v.get("met") else "no",
                    num(get(v, "quiet", "test_recall")),
                    num(get(v, "loaded", "test_recall")),
                    diff_ci(v.get("recall_paired")),
                    ms(get(v, "quiet", "test_mean_ms")),
                    ms(get(v, "loaded", "test_mean_ms")),
                ]
            )
        page.table(
            "`kway.cost` | test choices alike | ≥ 95% | recall quiet | loaded | loaded − quiet "
            "[95%] | mean ms quiet | loaded",
            rows,
        )

    for rel, title in (
        ("benchmarks/results/label_load.json", "Costs under a steady load"),
        ("benchmarks/results/label_load_bursts.json", "Costs under a bursty load"),
        (
            "benchmarks/results/label_load_steady2.json",
            "Costs under a steady load, a second run (one thread set by OMP_NUM_THREADS=1)",
        ),
        ("benchmarks/results/label_load_hotpotqa_dev.json", "Costs under load: hotpotqa_dev alone"),
        ("benchmarks/results/label_load_musique_dev.json", "Costs under load: musique_dev alone"),
        (
            "benchmarks/results/label_load_union.json",
            "Costs under load: the union of the three corpora (as served)",
        ),
    ):
        page.section(3, title, rel, load_runs)

    def jitter(d: dict[str, Any]) -> None:
        b = d.get("base", {})
        page.para(
            f"{d.get('dataset')}: the k-way router trained on the committed labels (thresholds "
            f"{b.get('thresholds')}, test recall {num(b.get('recall'))}), then again with "
            + (
                "each step's price of a corpus times one log-normal factor, priced cpu_median"
                if d.get("noise") == "step"
                else "every query's measured ms times a log-normal factor"
            )
            + ", no load (`benchmarks/bench_label_jitter.py`, `docs/routing.md`)."
        )
        rows = []
        for sigma, v in d.get("sigmas", {}).items():
            rec = [t.get("recall") for t in v.get("trials", [])]
            rows.append(
                [
                    sigma,
                    num(len(rec)),
                    pct(v.get("share_at_least_95")),
                    pct(v.get("agreement_mean")),
                    num(v.get("distinct_thresholds")),
                    f"{num(min(rec))}–{num(max(rec))}" if rec else "—",
                ]
            )
        page.table(
            "σ | trials | trials ≥ 95% alike | mean agreement | threshold settings | test recall",
            rows,
        )

    page.section(
        3, "Costs under timing noise alone", "benchmarks/results/label_jitter.json", jitter
    )
    for tag in ("2wikimultihopqa", "hotpotqa_dev", "musique_dev", "union"):
        page.section(
            3,
            f"Costs under per-step price noise: {tag}",
            f"benchmarks/results/label_jitter_step_{tag}.json",
            jitter,
        )

    page.section(
        3,
        "Left one corpus out: label-free corrections and a few labels",
        "benchmarks/results/loco_shift.json",
        shift,
    )


def adr(page: Page) -> None:
    rel = "benchmarks/results/adr.json"

    def body(d: dict[str, Any]) -> None:
        page.para(
            f"{d.get('dataset')}, {d.get('n_queries')} queries, out of fold; γ "
            f"{get(d, 'adr', 'gamma')}."
        )
        spec = "recall:3 fcr:3 mean_tokens:0 mean_ms:1 mean_passages:2"
        rows = [[k, *pick(v, spec)] for k, v in d.get("plane", {}).items()]
        page.table("retriever | R@5 | FCR@5 | context tokens | mean ms | mean passages", rows)
        t = d.get("targets", {})
        page.table(
            "tokens cut vs always-complex | ms cut | FCR@5 gain | targets met",
            [
                [
                    pct(t.get("tokens_cut")),
                    pct(t.get("ms_cut")),
                    signed(t.get("fcr_diff")),
                    num(t.get("met")),
                ]
            ],
        )
        fb = get(d, "adr", "fallback_by_gamma", default={})
        if fb:
            page.table(["γ", *fb.keys()], [["fallback share", *(num(v, 2) for v in fb.values())]])

    page.section(2, "ADR (`benchmarks/bench_adr.py`; design: `docs/adr.md`)", rel, body)


def load(page: Page) -> None:
    page.h(2, "The service under load")
    rel = "benchmarks/results/hardening2_mixed.json"

    def mixed(d: dict[str, Any]) -> None:
        page.para(str(d.get("what", "")))
        rows = []
        for side, s in d.get("sides", {}).items():
            row = [side, num(s.get("requests"))]
            for ep in ("route", "retrieve", "route_batch"):
                e = s.get(ep, {})
                errs = sum((e.get("errors") or {}).values())
                row += [ms(e.get("p50_ms")), ms(e.get("p95_ms")), num(errs)]
            row += [
                num(s.get("tracebacks")),
                num(s.get("log_lines_beyond_access_per_1000_requests"), 1),
            ]
            rows.append(row)
        page.table(
            (
                "service | requests | /route p50 | p95 | errors | /retrieve p50 | p95 | errors"
                " | /route_batch p50 | p95 | errors | tracebacks"
                " | log lines beyond access / 1,000"
            ),
            rows,
        )
        page.para(
            f"/route p50 speed-up: {num(d.get('route_p50_speedup'), 2)}×; targets met: "
            f"{num(d.get('met'))}."
        )

    page.section(3, "Mixed clients (`benchmarks/bench_mixed.py`)", rel, mixed)

    def container(d: dict[str, Any]) -> None:
        page.para(str(d.get("what", "")))
        spec = "requests_ok:0 errors:0 p50_ms:1 p95_ms:1"
        rows = [
            [side, *pick(s, spec), ", ".join(ms(v) for v in s.get("rounds_p50_ms", []))]
            for side, s in d.get("sides", {}).items()
        ]
        page.table("side | requests | errors | p50 ms | p95 ms | round p50s", rows)
        page.para(
            f"inside / outside at p50: {num(d.get('p50_ratio_inside_over_outside'), 2)}"
            f" (target ≤ {num(d.get('target_ratio'), 1)}); met: {num(d.get('met'))}."
        )

    page.section(
        3,
        "/route in the serving container against outside it (`benchmarks/bench_container.py`)",
        "benchmarks/results/container_route.json",
        container,
    )
    for title, rel in (
        ("/route at 8 clients (`benchmarks/bench_load.py`)", "benchmarks/results/load_route.json"),
        ("/route before issue 27's batching", "benchmarks/results/load_route_before.json"),
    ):

        def phases(d: dict[str, Any]) -> None:
            spec = "requests:0 errors:0 throughput_rps:1 p50_ms:1 p95_ms:1 p99_ms:1"
            rows = [[name, *pick(p, spec)] for name, p in d.get("phases", {}).items()]
            page.table("phase | requests | errors | req/s | p50 ms | p95 ms | p99 ms", rows)

        page.section(3, title, rel, phases)
    rel = "benchmarks/results/hardening.json"

    def hardening(d: dict[str, Any]) -> None:
        rows = [
            [
                k,
                json.dumps(v.get("value"))
                if isinstance(v.get("value"), dict)
                else num(v.get("value")),
                v.get("target"),
                num(v.get("met")),
            ]
            for k, v in d.get("targets", {}).items()
        ]
        page.table("check | value | target | met", rows)

    page.section(3, "Fuzzing, a database outage, /answer overload", rel, hardening)


def llm_server(page: Page) -> None:
    rel = "benchmarks/results/llm_server.json"

    def body(d: dict[str, Any]) -> None:
        cfg = d.get("config", {})
        page.para(
            f"The first {cfg.get('questions')} {cfg.get('dataset')} questions, "
            f"{cfg.get('threads')} thread; per path: tokens/s, p50 / p95 ms an operation, fallback "
            "rates by reason."
        )
        runtimes = d.get("runtimes", [])
        paths: list[str] = []
        for r in runtimes:
            for p in r.get("paths", []):
                if p["path"] not in paths:
                    paths.append(p["path"])
        rows = [
            ["start-up s", *(num(r.get("startup_s"), 2) for r in runtimes)],
            ["decode probe tok/s", *(num(get(r, "probe", "tokens_per_s"), 1) for r in runtimes)],
        ]
        for path in paths:
            row = [path]
            for r in runtimes:
                p = next((p for p in r.get("paths", []) if p["path"] == path), None)
                if p is None:
                    row.append("—")
                    continue
                by_reason = (p.get("fallback_rate_by_reason") or {}).items()
                rates = ", ".join(f"{k} {v:.2f}" for k, v in by_reason) or "none"
                cell = (
                    f"{num(p.get('tokens_per_s'), 1)} tok/s, "
                    f"{ms(get(p, 'op_latency', 'p50_ms'))} / "
                    f"{ms(get(p, 'op_latency', 'p95_ms'))} ms; {rates}"
                )
                if "names_gold_answer" in p:
                    cell += f"; {p['names_gold_answer']}/{p.get('operations')} name the answer"
                row.append(cell)
            rows.append(row)
        page.table(["path", *(r.get("runtime", "?") for r in runtimes)], rows)

    page.section(
        2, "The LLM path against a real server (`benchmarks/bench_llm_server.py`)", rel, body
    )


def index_shards(page: Page) -> None:
    page.h(2, "Sharded indexing (`r2a index --shards N`; `docs/scaling.md`)")
    rels = [
        "benchmarks/results/index_shards.json",
        "benchmarks/results/index_shards_idle.json",
        "benchmarks/results/index_shards_load6.json",
    ]
    page.source(*rels)
    rows = []
    for rel in rels:
        d = page.load(rel)
        if d is None:
            page.missing(rel)
            continue
        runs = d.get("runs", {})
        for n, sp in (d.get("speedup") or {}).items():
            rows.append(
                [
                    Path(rel).name,
                    d.get("dataset"),
                    n,
                    ms(get(runs, "1", "wall_s")),
                    ms(get(runs, n, "wall_s")),
                    num(sp, 2),
                    num(get(d, "equal_to_baseline", n, "all_equal")),
                ]
            )
    page.table("file | dataset | shards | 1 shard s | N shards s | speed-up | same index", rows)


# ------------------------------------------------------------------------------ render
def render(root: Path = ROOT) -> str:
    page = Page(root)
    page.h(1, "Results")
    page.para(
        "Generated by `scripts/render_results.py` (`make results`) from the saved reports; "
        "do not edit by hand: `tests/test_results_page.py` fails when this page and the "
        "files differ. Each table names the file it comes from: `reports/` is what the "
        "loop (`make run`, `dvc repro`) wrote on the machine that last ran it; "
        "`benchmarks/results/` is what each benchmark saved when it last ran (machine, load "
        "and time stamp are in the file). Recall is Recall@k over the gold passages, FCR "
        "the full-chain rate (every gold passage in the top k); ms are wall-clock on the "
        "machine named in the file."
    )
    page.h(2, "The loop on this checkout (`reports/`)")
    for part in (
        first_run,
        validation,
        index,
        labels,
        retrieval,
        router_params,
        training,
        promotion,
        routing_eval,
        corpora,
    ):
        part(page)
    for part in (
        encoder_int8,
        dense,
        catrag,
        ppr_local,
        rewriter,
        routing_bench,
        kway,
        adr,
        scale,
        synonyms,
        graph_memory,
        index_shards,
        load,
        llm_server,
    ):
        part(page)
    return page.text()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=ROOT, help="read reports/ etc. under it")
    ap.add_argument("--out", type=Path, default=None, help=f"default: <root>/{OUT}")
    ap.add_argument("--check", action="store_true", help="exit 1 if the page is out of date")
    args = ap.parse_args(argv)
    text = render(args.root)
    out = args.out or (args.root / OUT)
    if args.check:
        current = out.read_text(encoding="utf-8") if out.is_file() else ""
        if current != text:
            print(f"{out} is out of date: run `make results`", file=sys.stderr)
            return 1
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
