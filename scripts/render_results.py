#!/usr/bin/env python
"""Render docs/results.md, and its recall-against-cost figures, from the saved reports: every
table names the JSON file its figures come from, so no figure in the docs can drift from it.

    .venv/bin/python scripts/render_results.py            # docs/results.md, docs/figures/*.png
    .venv/bin/python scripts/render_results.py --out x.md # elsewhere (figures beside it)
    .venv/bin/python scripts/render_results.py --root R   # read reports/ etc. under R

Sources: `reports/` (what `make run` / `dvc repro` writes) and `benchmarks/results/*.json`
(what the benchmarks saved). A file that carries its own `tables` (a list of {title, columns,
rows}) is rendered as it says; the others through `SPECS`, one line of columns a table. A
missing file is said so in the page, and the rest still renders. Reads only JSON and
params.yaml: it imports nothing from the project (`make results`).
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
NOT_YET = "(not yet produced: {}; `make run` writes it)"
FIGURES = "figures"  # beside the page


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


# ------------------------------------------------------------------------------ generic
def cell(v: Any, fmt: str) -> str:
    """One value by a format: digits (`3`), `ci` (a paired {diff, ci95}), `pct`, `s` (as is),
    `keys` (a dict's keys or a list, joined)."""
    if fmt == "ci":
        return paired_cell(v) if isinstance(v, dict) else "—"
    if fmt == "pct":
        return pct(v)
    if fmt == "keys":
        return ", ".join(map(str, v)) if isinstance(v, dict | list) else num(v)
    if fmt == "s":
        return "—" if v is None else str(v)
    return num(v, int(fmt))


def columns_table(page: Page, rows: Any, spec: str) -> None:
    """A table from a dict of rows (the key is `@`) or a list of them, by a spec of
    `header=path:fmt` joined with ` | ` (a path goes down with `/`)."""
    cols = [c.split("=", 1) for c in spec.split(" | ")]
    items = rows.items() if isinstance(rows, dict) else ((None, r) for r in rows or [])
    out = []
    for key, r in items:
        row = []
        for _, ref in cols:
            path, _, fmt = ref.rpartition(":") if ref != "@" else ("@", "", "s")
            value = r if not path else get(r, *path.split("/"))
            row.append(str(key) if path == "@" else cell(value, fmt))
        out.append(row)
    page.table([h for h, _ in cols], out)


def own_tables(page: Page, d: dict[str, Any]) -> None:
    """A result file's own `tables`: [{title, columns, rows}], rendered as written."""
    for t in d.get("tables", []):
        if t.get("title"):
            page.para(f"**{t['title']}**")
        page.table(
            t["columns"],
            [[cell(v, "3") if isinstance(v, float) else v for v in r] for r in t["rows"]],
        )


# One table a paragraph: `level title`, then `file @ where the rows are` (no `@`: the file is
# one row; a `*` or `,` in the file: each file one row), then the columns, `header=path:fmt`
# joined by ` | ` (fmt: digits, ci, pct, s, keys; path `@`: the row's key; `/` goes down).
SPECS = """
3 Validation (Great Expectations)
reports/validate/*.json
dataset=dataset:s | passages=passages:0 | queries=queries:0 | complete gold=complete_gold:0
| expectations=expectations:0 | failed=failed:0

3 The 2Wiki index
reports/index/2wikimultihopqa.json
encoder=encoder:s | OpenIE=openie:s | passages=passages:0 | entities=entities:0 | facts=facts:0
| synonym edges=synonym_edges:0 | ADR hyperedges=adr_hyperedges:0 | load s=seconds_load:1
| passage embeddings s=seconds_passage_embeddings:1 | OpenIE s=seconds_openie:1
| entity embeddings s=seconds_entity_embeddings:1 | fact embeddings s=seconds_fact_embeddings:1
| synonyms s=seconds_synonyms:1 | ADR s=seconds_adr:1 | total s=seconds_total:1

3 Labels (`r2a label`: the paper's Table 1 and the rules' oracles)
reports/labels/*.json
dataset=dataset:s | rule=rule:s | queries=table1/total:0
| graph preferred %=table1/preference_graph_pct:1 | both suitable %=table1/both_suitable_pct:1
| recall_first: graph share=rule_comparison/recall_first/graph_preference:3
| oracle R@5=rule_comparison/recall_first/oracle_recall@5:3

3 Retrieval (`r2a evaluate retrieval`)
reports/eval/retrieval.json @ modes
mode=@ | R@2=recall@2:3 | R@5=recall@5:3 | FCR@2=fcr@2:3 | FCR@5=fcr@5:3
| answer in context@5=answer_in_context@5:3 | hub mass=hub_mass:3 | p50 ms=latency_ms_p50:1
| p95 ms=latency_ms_p95:1

3 Training (`r2a train`), the frozen test split
reports/train/minilm.json,reports/train/embedding.json
router=router:s | version=version:s | τ*=tau:2 | best step=best_step:0 | steps=steps:0
| test R@5=test_recall@5:3 | test R@2=test_recall@2:3 | graph F1=test_f1_graph:3
| graph usage=test_graph_usage:3 | train s=seconds:1

3 The k-way router's training
reports/train/kway.json,reports/train/adr.json
router=router:s | version=version:s | thresholds=thresholds:keys | test recall=test_recall:3
| test FCR=test_fcr:3 | mean ms=test_mean_ms:1 | train s=seconds:1

3 Promotion (`r2a promote`: the gate)
reports/promote/*.json
router=router:s | candidate=candidate:s | champion before=champion_before:s
| promoted=promoted:s | reasons=reasons:keys

3 Routing (`r2a evaluate routing`)
reports/eval/routing.json @ routers
router=@ | hybrid R@5=recall@5:3 | hybrid R@2=recall@2:3 | graph usage=graph_usage:3
| graph precision=precision_graph:3 | graph recall=recall_graph:3 | graph F1=f1_graph:3
| routing p50 ms=latency_ms_p50:2

3 The quality point's margin rule (`docs/settings.md`)
benchmarks/results/margin_rule.json @ swap_summary
rule=@ | met=met:0 | checks=checks:0 | mean gap=mean_gap:4 | worst gap=worst_gap:4
| mean ms ratio=mean_ms_ratio:2

3 Dense retrieval (`benchmarks.perf.bench_dense`)
benchmarks/results/dense.json @ datasets
dataset=@ | passages=passages:0 | encode query p50 ms=encode_query/p50_ms:1
| 1 thread=encode_query_1_thread/p50_ms:1 | top-k p50 ms=dense_topk/p50_ms:2

3 PPR (`benchmarks.perf.bench_ppr`)
benchmarks/results/ppr.json @ graphs
graph=@ | nodes=nodes:0 | edges=edges:0 | ours p50 ms=ours/p50_ms:2
| prpack p50 ms=igraph_prpack/p50_ms:2 | speed-up=speedup_p50:2 | max abs diff=max_abs_diff:9

3 Scaling (`benchmarks.perf.bench_scale`; plan: `docs/scaling.md`)
benchmarks/results/scale.json @ sizes
passages=passages:0 | nodes=nodes:0 | edges=edges:0 | graph search p50 ms=graph_search_p50_ms:1
| p95 ms=graph_search_p95_ms:1 | seeding p50 ms=seed_p50_ms:1
| local PPR p50 ms=ppr_local_p50_ms:1 | exact PPR p50 ms=ppr_exact_p50_ms:1
| top-5 local vs exact=top5_agreement:3 | CSR MB=csr_mb:1 | graph load s=graph_load_s:1

3 Graph memory at load (`benchmarks.perf.bench_graph_memory`)
benchmarks/results/graph_memory.json @ datasets
dataset=@ | nodes=nodes:0 | edges=edges:0 | peak MB at load=peak_mb:1
| estimate MB=estimate_mb:1 | estimate / peak=estimate_over_peak:2 | load s=load_s:1

3 Indexing throughput (`benchmarks.perf.bench_index`)
benchmarks/results/index_throughput.json @ runs
run=@ | passages=passages:0 | cold s=cold/wall_s:1 | warm s=warm/wall_s:1
| rebuild s=rebuild/wall_s:1 | projected 2Wiki cold s=projected_2wiki_cold_s:0

3 /route at 8 clients (`benchmarks.perf.bench_load`)
benchmarks/results/load_route.json @ phases
phase=@ | requests=requests:0 | errors=errors:0 | req/s=throughput_rps:1 | p50 ms=p50_ms:1
| p95 ms=p95_ms:1 | p99 ms=p99_ms:1

3 The LLM path against a real server (`benchmarks.perf.bench_llm_server`)
benchmarks/results/llm_server.json @ runtimes
runtime=runtime:s | start-up s=startup_s:2 | decode probe tok/s=probe/tokens_per_s:1

3 Reliability probes (`benchmarks.perf.bench_reliability`)
benchmarks/results/reliability.json @ targets
goal=@ | met=:s

3 Routers side by side (`r2a evaluate sweep --name routing`)
benchmarks/results/routing.json @ sets/2wikimultihopqa:test/routers
router=@ | hybrid R@5=recall@5:3 | graph usage=graph_usage:3 | graph F1=f1_graph:3
| routing p50 ms=latency_ms_p50:2
"""


def specs() -> list[tuple[int, str, str, str, str]]:
    out = []
    for block in SPECS.strip().split("\n\n"):
        head, where, *cols = block.splitlines()
        level, title = head.split(" ", 1)
        rel, _, at = where.partition(" @ ")
        out.append((int(level), title, rel, at, " ".join(cols)))
    return out


def spec_section(page: Page, level: int, title: str, rel: str, at: str, cols: str) -> None:
    """One table by its spec; a file with its own `tables` gets those too."""
    if "*" in rel or "," in rel:  # every file one row
        page.h(level, title)
        files = (
            sorted(page.root.glob(rel)) if "*" in rel else [page.root / r for r in rel.split(",")]
        )
        page.source(rel.replace(",", "`, `"))
        rows = [json.loads(f.read_text(encoding="utf-8")) for f in files if f.is_file()]
        for f in files:
            if not f.is_file():
                page.missing(f.relative_to(page.root).as_posix())
        if rows or "*" not in rel:
            columns_table(page, rows, cols)
        else:
            page.missing(rel)
        return

    def body(d: dict[str, Any]) -> None:
        own_tables(page, d)
        columns_table(page, get(d, *at.split("/")) if at else [d], cols)

    page.section(level, title, rel, body)


# ------------------------------------------------------------------------------ headlines
FIXED = "always_"  # a fixed strategy's row in a routing report
ROUTERS = ("kway", "oracle", "adr")  # the routers' rows: every name that starts so


def cost_rows(rows: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every fixed strategy and the routers, cheapest first."""
    keep = [(k, v) for k, v in rows.items() if k.startswith((FIXED, *ROUTERS))]
    return sorted(keep, key=lambda kv: (kv[1].get("mean_ms") or 0.0, kv[0]))


def figure_link(page: Page, name: str, what: str) -> None:
    page.para(f"![{what}]({FIGURES}/{name}.png)")


def loco(page: Page) -> None:
    page.h(3, "Left one corpus out (`r2a evaluate routing --protocol loco`)")
    files = sorted((page.root / "reports" / "routing").glob("*_loco.json"))
    page.source("reports/routing/*_loco.json")
    if not files:
        page.para(NOT_YET.format("`reports/routing/*_loco.json`"))
        return
    for f in files:
        d = json.loads(f.read_text(encoding="utf-8"))
        ds = d.get("dataset", f.stem)
        page.h(4, f"{ds} held out")
        page.source(f"reports/routing/{f.name}")
        page.para(
            f"{d.get('n_queries')} queries, trained on {pairs(d.get('trained_on'))}; point "
            f"`{d.get('point')}`, budget {d.get('budget')}."
        )
        columns_table(page, dict(cost_rows(d.get("routers", {}))), COST_COLS)
        page.table(
            "comparison | recall difference [95%]",
            [[k, paired_cell(v)] for k, v in d.get("paired", {}).items() if isinstance(v, dict)],
        )
        figure_link(page, f"loco_{ds}", f"recall against ms, {ds} held out")


COST_COLS = (
    "strategy or router=@ | recall=recall:3 | FCR=fcr:3 | mean ms=mean_ms:1"
    " | mean passages=mean_passages:1"
)


def corpora_all(page: Page) -> None:
    rel = "reports/corpora/all.json"
    page.h(3, "Every corpus, each held out (`r2a evaluate corpora`)")
    page.source(rel)
    d = page.load(rel)
    if d is None:
        page.para(NOT_YET.format(f"`{rel}`"))
        return
    for ds, c in d.get("corpora", {}).items():
        page.h(4, ds)
        page.para(
            f"{c.get('n_queries')} queries, trained on {pairs(c.get('trained_on'))}; best fixed "
            f"strategy `{c.get('best_fixed')}`; cost in {c.get('cost_unit')}."
        )
        columns_table(
            page,
            dict(cost_rows(c.get("rows", {}))),
            COST_COLS + " | mean cost=mean_cost:1 | vs best fixed [95%]=vs_best:ci",
        )
        figure_link(page, f"corpora_{ds}", f"recall against ms, {ds}")


def rewriter_corpora(page: Page) -> None:
    def body(d: dict[str, Any]) -> None:
        chosen = d.get("chosen", "")
        page.para(
            f"Split `{d.get('split')}`; rule: {d.get('rule')}. Chosen: `{chosen}`, "
            f"worst gain {signed(d.get('worst_gain'), 4)}."
        )
        page.table(
            "setting | worst gain",
            [[k, signed(v, 4)] for k, v in (d.get("worst_gain_by_setting") or {}).items()],
        )
        rows = {
            k: {"n": v.get("n"), "graph": v.get("graph"), "rw": v.get(chosen)}
            for k, v in d.get("corpora", {}).items()
        }
        columns_table(
            page,
            rows,
            "corpus=@ | queries=n:0 | graph R@5=graph/recall@5:3"
            " | graph FCR@5=graph/fcr@5:3 | with the rewrite R@5=rw/recall@5:3"
            " | FCR@5=rw/fcr@5:3 | R@5 gain=rw/r5_gain:ci | FCR@5 gain=rw/fcr5_gain:ci",
        )

    page.section(
        3,
        "The rewrite gate, chosen on every corpus's train split",
        "benchmarks/results/rewriter_corpora.json",
        body,
    )


def kway_cv5(page: Page) -> None:
    for title, rel in (
        ("The k-way router, 2Wiki out of fold", "reports/routing/kway_2wikimultihopqa_cv5.json"),
        (
            "The k-way router, 2Wiki's frozen test split",
            "reports/routing/kway_2wikimultihopqa_test.json",
        ),
    ):

        def body(d: dict[str, Any]) -> None:
            page.para(
                f"{d.get('n_queries')} queries, protocol `{d.get('protocol')}`, budget "
                f"{d.get('budget')}; routes among {', '.join(d.get('strategies', []))}."
            )
            kway_routers(page, d.get("routers", {}), KWAY_ROWS)
            page.table(
                "comparison | difference [95%]",
                [
                    [k, paired_cell(v)]
                    for k, v in d.get("paired", {}).items()
                    if isinstance(v, dict)
                ],
            )

        page.section(3, title, rel, body)


KWAY_ROWS = tuple(
    "kway r2a r2a_embed ner adr oracle oracle_routed always_dense@5 always_graph@5 "
    "always_catrag@5 always_graph+rw@5 always_fusion@5 always_catrag+rw@5".split()
)


# ------------------------------------------------------------------------------ figures
def plot(rows: dict[str, Any], title: str, path: Path) -> None:
    """Recall against mean ms: every fixed strategy (grey, named) and the routers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    for name, r in cost_rows(rows):
        x, y = r.get("mean_ms"), r.get("recall")
        if x is None or y is None:
            continue
        fixed = name.startswith(FIXED)
        ax.scatter(
            x,
            y,
            s=18 if fixed else 60,
            marker="o" if fixed else "*",
            color="0.55" if fixed else None,
            zorder=2 if fixed else 3,
            label=None if fixed else name,
        )
        ax.annotate(
            name.removeprefix(FIXED),
            (x, y),
            fontsize=6,
            xytext=(3, 2),
            textcoords="offset points",
            color="0.35" if fixed else "black",
        )
    ax.set(xlabel="mean ms a query", ylabel="Recall@k", title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None}, bbox_inches="tight")
    plt.close(fig)


def figures(root: Path, folder: Path) -> list[Path]:
    """The page's PNGs, from the loco and corpora reports present under `root`."""
    done = []
    for f in sorted((root / "reports" / "routing").glob("*_loco.json")):
        d = json.loads(f.read_text(encoding="utf-8"))
        ds = d.get("dataset", f.stem)
        done.append(folder / f"loco_{ds}.png")
        plot(d.get("routers", {}), f"{ds} held out ({f.name})", done[-1])
    all_ = root / "reports" / "corpora" / "all.json"
    if all_.is_file():
        for ds, c in json.loads(all_.read_text(encoding="utf-8")).get("corpora", {}).items():
            done.append(folder / f"corpora_{ds}.png")
            plot(c.get("rows", {}), f"{ds} (reports/corpora/all.json)", done[-1])
    return done


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
        "machine named in the file. Finished studies keep one line each in "
        "`benchmarks/studies.md`."
    )
    page.h(2, "Headlines: routing on corpora it never saw")
    loco(page)
    corpora_all(page)
    spec_section(page, *next(spec for spec in specs() if "margin rule" in spec[1]))
    rewriter_corpora(page)
    page.h(2, "The loop on this checkout (`reports/`)")
    first_run(page)
    for spec in specs():
        if spec[2].startswith("reports/"):
            spec_section(page, *spec)
        if spec[1].startswith("Training"):
            router_params(page)
    kway_cv5(page)
    page.h(2, "Benchmarks (`benchmarks/perf/`, the sweeps of `params.yaml` `sweeps:`)")
    for spec in specs():
        if spec[2].startswith("benchmarks/") and "margin rule" not in spec[1]:
            spec_section(page, *spec)
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
    pngs = figures(args.root, out.parent / FIGURES)
    print(f"wrote {out} ({text.count(chr(10))} lines) and {len(pngs)} figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
