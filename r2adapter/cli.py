"""The `r2a` command. Every user error is one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence

from r2adapter.adr import strategies as adr_modes
from r2adapter.config import pipeline_dataset
from r2adapter.errors import R2AError
from r2adapter.evaluate.headline import HEADLINES
from r2adapter.evaluate.retrieval import VARIANTS as RETRIEVAL_VARIANTS
from r2adapter.index.openie import OPENIE_BACKENDS
from r2adapter.label.rules import RULES
from r2adapter.retrieve.strategies import ABLATIONS, STRATEGIES

adr_modes.register()  # ADR's retrieval modes join --mode's choices


class _Families:
    """argparse `choices` for `--router`: the names of r2adapter/families.py, read when a
    command line is parsed (the table imports every family: not at import time)."""

    def _names(self) -> list[str]:
        from r2adapter.families import FAMILIES

        return list(FAMILIES)

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())


ROUTER_CHOICES = _Families()


def _db(args: argparse.Namespace) -> int:
    from r2adapter.config import settings
    from r2adapter.store import embedded
    from r2adapter.store.db import database_url

    if settings().database_url and args.action in ("up", "down"):
        print(
            f"R2A_DATABASE_URL is set: the external database is managed elsewhere; "
            f"nothing to {args.action}"
        )
        return 0
    if args.action == "url":
        print(database_url())
        return 0
    if args.action == "up":
        from r2adapter.store.migrate import migrate

        st = embedded.up()
        applied = migrate()
        print(st.line())
        print(f"migrations applied: {', '.join(applied) if applied else 'none (up to date)'}")
        return 0
    st = embedded.down() if args.action == "down" else embedded.status()
    print(st.line())
    return 0


def _mlflow(args: argparse.Namespace) -> int:
    """The MLflow tracking server on the embedded Postgres (r2adapter/registry/server.py)."""
    from r2adapter.registry import server

    if args.action == "up":
        st, seconds = server.up()
        print(st.line() + (f"; /health after {seconds:.1f} s" if seconds else ""))
        print(f"select it with: export MLFLOW_TRACKING_URI={st.url}")
    elif args.action == "down":
        print(server.down().line())
    elif args.action == "status":
        st = server.status()
        print(st.line())
        return 0 if st.healthy or not st.running else 1
    if args.action == "webhook" or (args.action == "up" and args.service_url):
        if not args.service_url:
            raise R2AError("r2a mlflow webhook needs --service-url (the service's base URL)")
        target = f"{args.service_url.rstrip('/')}/webhooks/mlflow"
        uri = os.environ.get("MLFLOW_TRACKING_URI", "")
        # only a server delivers webhooks: an http(s) tracking URI, else this one's
        wid = server.register_webhook(target, uri if uri.startswith("http") else None)
        print(f"webhook {wid}: {server.ALIAS_EVENT} -> {target}")
    return 0


def _data_validate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from r2adapter import steps
    from r2adapter.data.adapters import dataset_name
    from r2adapter.data.data_docs import default_folder

    docs = Path(args.data_docs) if args.data_docs else default_folder(dataset_name(args.dataset))
    report = steps.validate(args.dataset, docs)
    for check in report.checks:
        print(check.line())
    _emit(args, report.to_report())
    print(
        f"{report.dataset}: {report.n_passages} passages, {report.n_queries} queries, "
        f"{report.n_complete} with complete gold"
    )
    if report.failed:
        which = "; ".join(
            f"{c.table} {c.expectation}{f'({c.column})' if c.column else ''}: "
            f"{c.unexpected} unexpected"
            for c in report.failed
        )
        print(
            f"validation failed: {len(report.failed)} of {len(report.checks)} expectations "
            f"({which})",
            file=sys.stderr,
        )
        return 1
    print(f"validation passed: {len(report.checks)} expectations")
    return 0


def _write_json(path: str, obj: object) -> None:
    import json
    from pathlib import Path

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2) + "\n")
    tmp.replace(out)  # never a half-written report


def _emit(args: argparse.Namespace, report: object) -> bool:
    """The one place `--report` and `--json` are handled: `--report FILE` writes a step's
    `to_report()` to FILE (indented, a DVC metric), `--json` prints it on one line (what
    DVC redirects into reports/eval/*.json). True when printed: the caller prints nothing
    else."""
    import json

    if getattr(args, "report", None):
        _write_json(args.report, report)
    if getattr(args, "json", False):
        print(json.dumps(report))
        return True
    return False


def _data_load(args: argparse.Namespace) -> int:
    from r2adapter import steps

    r = steps.load(args.dataset, replace=args.replace)
    print(
        f"{r.dataset}: passages +{r.passages_added} -{r.passages_removed}, queries "
        f"+{r.queries_added} ~{r.queries_changed} -{r.queries_removed}"
        f"{'' if r.changed else ' (already loaded, nothing changed)'}"
    )
    return 0


def _index(args: argparse.Namespace) -> int:
    from r2adapter import steps

    r = steps.index(
        args.dataset,
        args.openie,
        adr=True if args.adr else None,
        shards=args.shards,
        share=False if args.own_index else None,
        rebuild=args.rebuild,
    )
    _emit(args, r.to_report())
    if args.stamp:  # of the dataset as stored (a folder given by path: its name)
        _write_json(args.stamp, steps.index_stamp(r.dataset))
    if args.view:
        from pathlib import Path

        from r2adapter.retrieve.passage_view import write_view

        saved = write_view(r.dataset, Path(args.view))
        print(f"{r.dataset}: passage view written to {saved}")
    c = r.counts
    what = "new index version" if r.created else "index up to date, nothing rebuilt:"
    print(
        f"{r.dataset}: {what} {r.version} ({r.encoder}, openie {r.openie}): "
        f"{c.get('passages', 0)} passages, {c.get('entities', 0)} entities, "
        f"{c.get('facts', 0)} facts, {c.get('synonym_edges', 0)} synonym edges"
    )
    if r.created:
        print("timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in r.timings.items()))
    return 0


def _retrieve(args: argparse.Namespace) -> int:
    from r2adapter import steps

    t0 = time.perf_counter()
    hits = steps.retrieve(args.dataset, args.question, args.mode, args.top_k)
    ms = (time.perf_counter() - t0) * 1000
    answer = {
        "dataset": args.dataset,
        "mode": args.mode,
        "latency_ms": ms,
        "hits": [h.__dict__ for h in hits],
    }
    if _emit(args, answer):
        return 0
    for i, h in enumerate(hits, 1):
        print(f"{i:>2}. {h.score:.4f}  {h.title}: {h.text[:100]}")
    print(f"({args.mode}, {ms:.0f} ms)")
    return 0


def _evaluate_retrieval(args: argparse.Namespace) -> int:
    from r2adapter import steps
    from r2adapter.evaluate.reports import RetrievalReport

    modes, ablate = args.mode or None, args.ablate or ()
    variants = args.variant or ()
    if args.rewrite == "none" and not variants:
        figures = steps.evaluate_retrieval(args.dataset, modes, ablate, args.ppr)
    else:  # graph retrieval on the rewritten query (issue 15), or named variants
        from r2adapter.data.adapters import dataset_name
        from r2adapter.evaluate.retrieval import evaluate_retrieval

        seed = not args.no_seed_triplets
        figures = evaluate_retrieval(
            dataset_name(args.dataset),
            args.rewrite,
            seed,
            modes=modes,
            ablate=ablate,
            ppr=args.ppr,
            variants=variants,
        )
    report = RetrievalReport(figures).to_report()
    if _emit(args, report):
        return 0
    print(f"{report['dataset']}: {report['n_queries']} queries, openie {report['openie']}")
    rw = report.get("rewrite") or {}
    if rw.get("backend", "none") != "none":
        print(
            f"  rewrite {rw['backend']}: parsed {rw['parsed']:.1%}, fallbacks {rw['fallbacks']}, "
            f"p50 {rw['ms_p50']:.2f} ms, p95 {rw['ms_p95']:.2f} ms (graph only)"
        )
    width = max([6, *(len(name) for name in report["modes"])])
    for mode, m in report["modes"].items():
        hubs = (
            f"  hub mass {m['hub_mass']:.3f}  strength {m['ppr_weighted_strength']:.0f}"
            if "hub_mass" in m
            else ""
        )
        off = f"  (ablated: {', '.join(m['ablate'])})" if m.get("ablate") else ""
        aic = m.get("answer_in_context@5")
        answer = f"  answer-in-context@5 {aic:.3f}" if aic is not None else ""
        print(
            f"  {mode:<{width}} R@2 {m['recall@2']:.3f}  R@5 {m['recall@5']:.3f}  "
            f"FCR@2 {m['fcr@2']:.3f}  FCR@5 {m['fcr@5']:.3f}{answer}  "
            f"p50 {m['latency_ms_p50']:.1f} ms  p95 {m['latency_ms_p95']:.1f} ms{hubs}{off}"
        )
    return 0


def _label(args: argparse.Namespace) -> int:
    from r2adapter import steps
    from r2adapter.label.stats import format_stats

    r = steps.label(args.dataset, args.rule)
    print(format_stats(r.stats))
    print("rule comparison (oracle vs single retrievers, all labelled queries):")
    for rule, m in r.rule_comparison.items():
        print(
            f"  {rule:<11} oracle R@2 {m['oracle_recall@2']:.3f} R@5 {m['oracle_recall@5']:.3f}"
            f" (dense R@2 {m['dense_recall@2']:.3f} R@5 {m['dense_recall@5']:.3f}, graph R@5 "
            f"{m['graph_recall@5']:.3f}); graph preferred {m['graph_preference']:.0%}"
        )
    print(f"{r.dataset}: {len(r.records)} labels ({r.rule}) → {r.path} (md5 {r.md5})")
    k = r.stats.get("strategies")
    if isinstance(k, dict):
        print(f"strategies ({k['n_queries']} queries) → {k['path']} (md5 {k['md5']}):")
        for name, m in k["strategies"].items():
            print(
                f"  {name:<10} recall {m['recall']:.3f}  fcr {m['fcr']:.3f}  tokens "
                f"{m['mean_tokens']:.0f}  ms {m['mean_ms']:.1f}  suitable {m['suitable']:.0%}"
            )
    a = r.stats.get("adr")
    if isinstance(a, dict):
        skipped = a.get("skipped")
        done = f"{a.get('n_queries')} queries → {a.get('path')} (md5 {a.get('md5')})"
        print(f"adr operators: {'skipped: ' + str(skipped) if skipped else done}")
    return 0


def _train(args: argparse.Namespace) -> int:
    from r2adapter import steps
    from r2adapter.config import router_params
    from r2adapter.route.kinds import router_kind

    # --router names a family of r2adapter/families.py; without it, the two-way router of
    # --backbone (params.yaml router.backbone)
    name = args.router or router_kind(args.backbone or router_params().backbone)
    trained = steps.train(name, args.dataset, backbone=args.backbone, epochs=args.epochs)
    rep = steps.train_report(trained)
    _emit(args, rep)
    curve = getattr(trained, "curve", None)
    if args.report and curve is not None:  # the τ curve beside the report, for `dvc plots`
        _write_json(str(args.report).replace(".json", "_threshold.json"), curve)
    acc = getattr(trained, "accelerator", "")
    where = f" on {acc}" if acc else ""
    print(
        f"{name}: registered version {rep['version']} as candidate (run {rep['run_id'][:8]}), "
        f"{rep['seconds']:.0f} s{where}; {steps.train_note(rep)}"
    )
    test = {k[5:]: v for k, v in rep.items() if k.startswith("test_") and _number(v)}
    if test:
        print("test split: " + ", ".join(f"{k} {v:.3f}" for k, v in test.items()))
    return 0


def _number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _promote(args: argparse.Namespace) -> int:
    from r2adapter import steps

    r = steps.promote(args.router, args.dataset)  # one skeleton over every family
    _emit(args, r.to_report())
    verb = "promoted" if r.promoted else "kept the champion"
    before = f"v{r.champion_before}" if r.champion_before else "none"
    print(
        f"{r.kind}: {verb}: candidate v{r.candidate} vs champion {before}: " + "; ".join(r.reasons)
    )
    for name, m in (("candidate", r.candidate_metrics), ("champion", r.champion_metrics)):
        if m:  # the family's gate figures
            print(f"  {name:<9} " + "  ".join(f"{k} {v:.3f}" for k, v in m.items() if _number(v)))
    return 0


def _models(args: argparse.Namespace) -> int:
    from r2adapter.families import FAMILIES
    from r2adapter.registry.models import list_models

    rows = list_models({name: f.model for name, f in FAMILIES.items()})
    if _emit(args, rows):
        return 0
    if not rows:
        print("no registered routers: run `r2a train`")
    for m in rows:
        gate = "  ".join(f"{k} {v:.3f}" for k, v in m["gate"].items())
        print(f"{m['name']:<18} v{m['version']:<3} {','.join(m['aliases']) or '-':<20} {gate}")
    return 0


def _evaluate_plane(args: argparse.Namespace) -> int:
    from r2adapter import steps

    two_way = tuple(args.routers.split(",")) if args.routers is not None else None
    r = steps.evaluate_plane(
        args.dataset, args.protocol, args.budget, two_way=two_way, profile=args.cost_profile
    )
    if _emit(args, r):
        return 0
    print(
        f"{r['dataset']}, protocol {r['protocol']}: {r['n_queries']} queries, budget {r['budget']}"
    )
    if r.get("cost_unit"):
        print(f"  cost: {r.get('cost_profile')}, {r['cost_unit']}")
    for name, m in r["routers"].items():  # type: ignore[attr-defined]
        print(
            f"  {name:<18} recall {m['recall']:.3f}  fcr {m['fcr']:.3f}  passages "
            f"{m['mean_passages']:.2f}  tokens {m['mean_tokens']:.0f}  ms {m['mean_ms']:.1f}  "
            f"cost {m.get('mean_cost', float('nan')):.4g}  "
            f"graph {m.get('graph_usage', float('nan')):.2f}  routing p50 "
            f"{m.get('latency_ms_p50', float('nan')):.2f} ms"
        )
    for f in r["frontier"]:  # type: ignore[attr-defined]
        vs = f.get("vs_hull")
        hull = f"hull {f['hull_recall']:.3f}, diff {vs['diff']:+.3f} {vs['ci95']}" if vs else ""
        print(
            f"  budget {f['budget']:.1f}: recall {f['recall']:.3f} at {f['mean_ms']:.1f} ms, "
            f"{f['mean_passages']:.2f} passages; {hull}"
        )
    for k, v in r["paired"].items():  # type: ignore[attr-defined]
        print(f"  {k}: {v}")
    for note in r["notes"]:  # type: ignore[attr-defined]
        print(f"  note: {note}")
    print(f"  saved: {r.get('saved')}")
    return 0


def _evaluate_corpora(args: argparse.Namespace) -> int:
    """`r2a evaluate corpora`: every strategy and router on every corpus (issue 24)."""
    from r2adapter.reports.corpora import evaluate_corpora, table_lines

    r = evaluate_corpora(args.dataset or None, args.budget)
    if _emit(args, r):
        return 0
    for line in table_lines(r):
        print(line)
    print(f"  saved: {r.get('saved')}")
    return 0


def _evaluate_decomposition(args: argparse.Namespace) -> int:
    """`r2a evaluate decomposition`: the structural rewriter against the echo baselines on
    each corpus's gold chains, no index needed (issue 40)."""
    from r2adapter.evaluate.decomposition import evaluate_decompositions, table_lines

    r = evaluate_decompositions(args.dataset or None)
    if _emit(args, r):
        return 0
    for line in table_lines(r):
        print(line)
    if args.report:
        print(f"  saved: {args.report}")
    return 0


def _evaluate_answers(args: argparse.Namespace) -> int:
    """`r2a evaluate answers`: a reader answers from each strategy's passages (issue 40)."""
    from r2adapter.kway.answers import answers_report, router_rows

    names = (
        [n.strip() for n in args.strategies.split(",") if n.strip()] if args.strategies else None
    )
    extra = router_rows(args.dataset, args.router_report) if args.router_report else None
    r = answers_report(
        args.dataset,
        names,
        args.reader,
        args.limit,
        extra=extra,
        max_tokens=args.max_tokens,
        timeout=args.timeout,
        workers=args.workers,
    )
    if _emit(args, r):
        return 0
    print(f"{r['dataset']}: {r['n_queries']} queries, reader {r['reader']['llm']}")
    for name, m in r["strategies"].items():
        pb = m["paired_best"]
        print(
            f"  {name:<14} EM {m['em']:.3f}  F1 {m['f1']:.3f}  (F1 {pb['f1_diff']:+.3f} "
            f"[{pb['f1_ci95'][0]:+.3f}, {pb['f1_ci95'][1]:+.3f}] vs {pb['best']})  "
            f"answer-in-context {m['answer_in_context']:.3f}  prompt tokens "
            f"{m['prompt_tokens']:.0f}  reader {m['reader_ms']:.0f} ms"
        )
    print(f"  saved: {r.get('saved')}")
    return 0


def _evaluate_sweep(args: argparse.Namespace) -> int:
    """`r2a evaluate sweep --name NAME`: one quality sweep of params.yaml `sweeps:`, saved to
    its result file (r2adapter/evaluate/sweeps.py)."""
    from r2adapter.config import settings
    from r2adapter.evaluate.sweeps import run_sweep
    from r2adapter.steps import champion_router

    # the quality kind runs this command, from this checkout, in a subprocess per step
    run = run_sweep(args.name, [sys.executable, "-m", "r2adapter.cli"], champion_router)
    if _emit(args, run.result):
        return 0
    for line in run.lines:
        print(line)
    root = settings().root
    saved = [p.relative_to(root) if p.is_relative_to(root) else p for p in run.saved]
    print(f"  saved: {', '.join(str(p) for p in saved)}")
    return 0


def _evaluate_report(args: argparse.Namespace) -> int:
    """`r2a evaluate report`: the tables and plots of reports/eval/*.json as one page."""
    from pathlib import Path

    from r2adapter.config import settings
    from r2adapter.evaluate.report_page import write_page

    root = settings().root
    out = write_page(root / "reports/eval", Path(args.out) if args.out else None, args.embed)
    print(f"saved: {out.relative_to(root) if out.is_relative_to(root) else out}")
    return 0


def _headline(args: argparse.Namespace) -> int:
    """`r2a headline STAGE [ITEM]`: the stage's few numbers from its full reports."""
    from r2adapter.config import settings
    from r2adapter.evaluate.headline import write_headline

    path, figures = write_headline(settings().root, args.stage, args.item)
    print(f"{path}: " + ", ".join(f"{k} {v}" for k, v in figures.items()))
    return 0


def _evaluate_routing(args: argparse.Namespace) -> int:
    from r2adapter import steps
    from r2adapter.evaluate.reports import RoutingReport

    if args.protocol is not None:
        return _evaluate_plane(args)
    if args.budget is not None:
        raise R2AError("--budget applies to --protocol cv5|test|all (the k-way report)")
    if args.cost_profile is not None:
        raise R2AError("--cost-profile applies to --protocol loco (the k-way report)")
    r = RoutingReport(
        steps.evaluate_routing(args.dataset, args.split, args.rule, args.calibrate_usage)
    ).to_report()
    if _emit(args, r):
        return 0
    print(f"{r['dataset']} {r['split']} split: {r['n_queries']} queries ({r['rule']} labels)")
    for name, m in r["routers"].items():
        print(
            f"  {name:<13} R@5 {m['recall@5']:.3f}  usage {m['graph_usage']:.2f}  F1g "
            f"{m['f1_graph']:.3f}  recall_g {m['recall_graph']:.3f}  p50 "
            f"{m['latency_ms_p50']:.2f} ms"
        )
    for k, v in r["pgr"].items():
        print(f"  PGR {k}: {'n/a' if v is None else f'{v:.2f}'}")
    for note in r["notes"]:
        print(f"  note: {note}")
    return 0


def _catrag(args: argparse.Namespace) -> int:
    """`r2a catrag train-tiers`: fit catrag's learned tier source on the training split."""
    from r2adapter.config import graph_params
    from r2adapter.retrieve.catrag import similarity_retriever
    from r2adapter.retrieve.catrag_tiers import FEATURES, training_queries
    from r2adapter.retrieve.catrag_train import train_tiers
    from r2adapter.store.graph_store import require_version

    training_queries(args.dataset)  # one line before the encoder loads: no labels,
    require_version(args.dataset)  # or no index
    retriever = similarity_retriever(args.dataset, graph_params())
    model, path = train_tiers(retriever, progress=not args.json)
    r = {"dataset": args.dataset, "path": str(path), **model.to_json()}
    if _emit(args, r):
        return 0
    m = model.meta
    print(
        f"{args.dataset}: learned tiers from {m['queries']} training queries, "
        f"{m['transitions']} transitions ({m['positive_rate']:.1%} on a gold passage) -> {path}"
    )
    print("  coef " + ", ".join(f"{f} {c:+.2f}" for f, c in zip(FEATURES, model.coef, strict=True)))
    print("  probability bands (direct, high, weak): " + ", ".join(f"{b:.3f}" for b in model.bands))
    return 0


def _adr(args: argparse.Namespace) -> int:
    """`r2a adr label|retrieve` (r2adapter/adr, docs/adr.md)."""
    if args.adr_command == "label":
        from r2adapter.adr.labels import write_labels

        r = write_labels(args.dataset)
        if _emit(args, r):
            return 0
        print(f"{r['dataset']}: {r['n_queries']} queries labelled -> {r['path']}")
        for op, m in r["operators"].items():
            print(
                f"  {op:<9} R@5 {m['recall']:.3f}  FCR@5 {m['fcr']:.3f}  passages "
                f"{m['mean_passages']:.1f}  tokens {m['mean_tokens']:.0f}  ms {m['mean_ms']:.1f}"
            )
        print("  classes: " + ", ".join(f"{k} {v:.2f}" for k, v in r["classes"].items()))
        return 0
    from r2adapter.adr.service import answer

    r = answer(args.dataset, args.question, args.operator)
    if _emit(args, r):
        return 0
    print(f"{r['operator']} ({r['decision']}): {r['tokens']} tokens, {r['ms']:.1f} ms")
    for fact in r["facts"]:
        print(f"  fact: {fact}")
    for story in r["insights"]:
        print(f"  insight: {story}")
    for h in r["passages"]:
        print(f"  {h['score']:.3f}  {h['title']}")
    return 0


def _serve(args: argparse.Namespace) -> int:
    """Replace this process with `bentoml serve` (signals reach the server directly), run
    through serving/launch.py so that this server's metrics live in a folder of its own."""
    import importlib.util
    from pathlib import Path

    if importlib.util.find_spec("bentoml_cli") is None:
        raise R2AError("bentoml is not installed: run `make install`")
    os.chdir(Path(__file__).resolve().parents[1])  # the checkout holding serving/
    os.environ.setdefault("BENTOML_DO_NOT_TRACK", "true")
    cmd = [
        sys.executable,
        "-m",
        "serving.launch",
        "serve",
        "serving.service:R2AService",
        "--port",
        str(args.port),
        "--host",
        args.host,
    ]
    os.execv(sys.executable, cmd)
    return 0  # not reached


def _demo(args: argparse.Namespace) -> int:
    from pathlib import Path

    from r2adapter.config import settings
    from r2adapter.demo import demo
    from r2adapter.evaluate.retrieval import stored_queries

    dataset = args.dataset or pipeline_dataset()
    questions = [q.question for q in stored_queries(dataset, complete_only=False)]
    if not questions:
        raise R2AError(f"dataset '{dataset}' has no queries: run `r2a data load` first")
    log = Path(settings().root) / "reports" / "demo-serve.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    return demo(dataset, questions, log)


def _retrain(args: argparse.Namespace) -> int:
    """The scheduled loop on this machine (r2adapter/loop.py: validate → index, only what
    changed → label → train and promote each router → evaluate); a running service is told
    to reload when a champion moved."""
    from r2adapter.loop import LoopResult, run_loop

    def reload(result: LoopResult) -> None:
        if not (args.service_url and result.promoted):
            return
        import httpx

        try:
            info = httpx.post(f"{args.service_url.rstrip('/')}/reload", json={}, timeout=120).json()
            print(f"service: now serving {info.get('router')} v{info.get('router_version')}")
        except httpx.HTTPError as e:
            raise R2AError(
                f"champion moved but the service at {args.service_url} did not "
                f"answer /reload ({type(e).__name__}); it polls the alias anyway"
            ) from None

    dataset = args.dataset or pipeline_dataset()
    run_loop(dataset, args.openie, args.router, after_promote=reload)
    return 0


def _state(args: argparse.Namespace) -> int:
    """What this machine's database and registry hold for the pipeline; exit 1 when the
    pipeline's machine-local results are missing (DVC tracks files, not the database or
    the MLflow store, so a fresh machine must force the stages that write them: `make run`).
    Checked: the served dataset's index and every family's champion. The development
    corpora's indexes are not: their labels and passage views are files, which DVC restores
    from its remote (r2adapter/retrieve/passage_view.py)."""
    from r2adapter.config import adr_params
    from r2adapter.families import FAMILIES
    from r2adapter.registry.models import version_by_alias
    from r2adapter.store.graph_store import latest_version
    from r2adapter.store.migrate import migrate

    dataset = args.dataset or pipeline_dataset()
    migrate()  # a database never set up holds nothing: the tables, empty
    missing = []
    v = latest_version(dataset)
    print(f"index {dataset}: {f'version {v.id} ({v.openie})' if v else 'missing'}")
    if v is None:
        missing.append(f"index of {dataset}")
    for kind, fam in FAMILIES.items():
        if kind == "adr" and not adr_params().enabled:
            continue  # the loop trains no ADR head
        champ = version_by_alias(fam.model, "champion")
        print(f"champion {kind}: {f'v{champ.version}' if champ else 'missing'}")
        if champ is None:
            missing.append(f"{kind} champion")
    if missing:
        print(f"missing on this machine: {', '.join(missing)}")
        return 1
    return 0


def _run(args: argparse.Namespace) -> int:
    """The main job on embedded defaults."""
    from r2adapter import steps
    from r2adapter.config import settings
    from r2adapter.store import embedded
    from r2adapter.store.migrate import migrate

    t0 = time.perf_counter()
    if not settings().database_url:
        print(f"database: {embedded.up().line()}")
    migrate()
    rows = []
    for name in steps.SHIPPED_DATASETS:
        report = steps.validate(name)
        if not report.success:
            raise R2AError(f"{name}: validation failed; run `r2a data validate --dataset {name}`")
        loaded = steps.load(name)
        rows.append(
            (
                name,
                report.n_passages,
                report.n_queries,
                report.n_complete,
                len(report.checks),
                "yes" if loaded.changed else "unchanged",
            )
        )
    print(f"\n{'dataset':<18}{'passages':>9}{'queries':>9}{'complete':>10}{'checks':>8}  loaded")
    for name, n_p, n_q, n_c, n_chk, changed in rows:
        print(f"{name:<18}{n_p:>9}{n_q:>9}{n_c:>10}{n_chk:>8}  {changed}")
    print(f"main job done in {time.perf_counter() - t0:.1f} s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="r2a", description="R²Adapter platform")
    sub = p.add_subparsers(dest="command", required=True)

    db = sub.add_parser("db", help="the embedded Postgres (or the R2A_DATABASE_URL one)")
    db.add_argument("action", choices=["up", "down", "status", "url"])
    db.set_defaults(func=_db)

    mf = sub.add_parser("mlflow", help="the MLflow tracking server on the embedded Postgres")
    mf.add_argument("action", choices=["up", "down", "status", "webhook"])
    mf.add_argument(
        "--service-url",
        default=None,
        help="webhook (or up): subscribe this service's /webhooks/mlflow to alias changes",
    )
    mf.set_defaults(func=_mlflow)

    data = sub.add_parser("data", help="dataset validation and loading")
    dsub = data.add_subparsers(dest="data_command", required=True)
    for name, func, help_ in (
        ("validate", _data_validate, "Great Expectations suites"),
        ("load", _data_load, "write into Postgres"),
    ):
        c = dsub.add_parser(name, help=help_)
        c.add_argument(
            "--dataset",
            required=True,
            help="a shipped name (musique) or a folder with <name>.json and <name>_corpus.json",
        )
        c.set_defaults(func=func)
        if name == "validate":
            c.add_argument("--report", help="also write the figures as JSON (a DVC metric)")
            c.add_argument(
                "--data-docs",
                metavar="DIR",
                help="where the checkpoint writes its Data Docs site (index.html) and one page "
                "of every result (validation.html); default reports/data_docs/<dataset>/",
            )
        else:
            c.add_argument(
                "--replace",
                action="store_true",
                help="replace a dataset of the same name stored from another folder",
            )

    idx = sub.add_parser("index", help="embed passages, run OpenIE, build the graph")
    idx.add_argument("--dataset", required=True)
    idx.add_argument("--openie", default="spacy", choices=list(OPENIE_BACKENDS))
    idx.add_argument("--report", help="also write counts and timings as JSON")
    idx.add_argument(
        "--stamp",
        help="also write the index's identity as JSON (its build signature, encoder and "
        "OpenIE: what stages downstream depend on; the same on every machine)",
    )
    idx.add_argument(
        "--view",
        help="also save the passage view (embeddings and titles) the routers' features read, "
        "e.g. labels/<dataset>.passages.npz (r2adapter/retrieve/passage_view.py)",
    )
    idx.add_argument(
        "--adr",
        action="store_true",
        help="build ADR's dual hypergraph too (default: params.yaml adr.enabled)",
    )
    idx.add_argument(
        "--shards",
        type=int,
        default=1,
        help="embed and extract in N local processes, then merge into one version (default 1)",
    )
    idx.add_argument(
        "--rebuild",
        action="store_true",
        help="write a new index version even when the latest has the same build signature "
        "(the embedding and OpenIE caches still serve)",
    )
    idx.add_argument(
        "--own-index",
        action="store_true",
        help="build this dataset an index of its own even when an indexed dataset holds the "
        "same passages (by default a query set over them is served from that index)",
    )
    idx.set_defaults(func=_index)

    ret = sub.add_parser("retrieve", help="top-k passages for a question")
    ret.add_argument("--dataset", required=True)
    ret.add_argument("--mode", default="dense", choices=list(STRATEGIES))
    ret.add_argument("--top-k", type=int, default=5)
    ret.add_argument("--json", action="store_true")
    ret.add_argument("question")
    ret.set_defaults(func=_retrieve)

    ev = sub.add_parser("evaluate", help="evaluation reports")
    esub = ev.add_subparsers(dest="evaluate_command", required=True)
    er = esub.add_parser(
        "retrieval",
        help=f"{', '.join(STRATEGIES)} side by side: Recall@2/5, FCR@2/5, hub mass, latency",
    )
    er.add_argument("--dataset", required=True)
    er.add_argument(
        "--mode",
        action="append",
        choices=list(STRATEGIES),
        help="evaluate only this strategy (repeat for several; default: all)",
    )
    er.add_argument(
        "--ablate",
        action="append",
        choices=list(ABLATIONS),
        help="turn this catrag component off (repeat for several)",
    )
    er.add_argument("--json", action="store_true", help="one JSON object on stdout")
    er.add_argument(
        "--rewrite",
        choices=["none", "structural", "llm"],
        default="none",
        help="graph retrieval on q' from this rewriter backend, for every query it parses",
    )
    er.add_argument(
        "--no-seed-triplets",
        action="store_true",
        help="q' alone: its triplets do not seed the graph search as fact queries of their own",
    )
    er.add_argument(
        "--ppr",
        choices=["local", "exact"],
        default=None,
        help="force the PPR solver of graph strategies (default: graph.ppr_solver in params.yaml)",
    )
    er.add_argument(
        "--variant",
        action="append",
        choices=["all", *RETRIEVAL_VARIANTS],
        help="a named retriever variant instead of --mode (GraphParams overrides, catrag "
        "ablations, tier sources: r2adapter/evaluate/retrieval.py VARIANTS; repeat for "
        "several; all: the default ones)",
    )
    er.set_defaults(func=_evaluate_retrieval)
    eo = esub.add_parser("routing", help="routers side by side on a labelled split")
    eo.add_argument("--dataset", required=True)
    eo.add_argument("--split", default="test", choices=["train", "val", "test", "all"])
    eo.add_argument("--rule", default=None, choices=sorted(RULES))
    eo.add_argument(
        "--calibrate-usage",
        type=float,
        default=None,
        metavar="U",
        help="set the trained routers' τ so that this share of the corpus's questions goes "
        "to graph (label-free; for a corpus they were not trained on)",
    )
    eo.add_argument(
        "--protocol",
        choices=["cv5", "test", "all", "loco"],
        default=None,
        help="the k-way report: every router and strategy on the quality-cost plane, 5-fold "
        "out of fold (cv5), on the frozen test split, on all queries of a corpus the "
        "routers were not trained on (label-free calibration), or leave-one-corpus-out "
        "(loco: trained on the other labelled corpora, transferred label-free; kway is the "
        "quality point, kway.quality_route, and kway_served the served one, kway.route)",
    )
    eo.add_argument(
        "--budget",
        type=float,
        default=None,
        help="k-way cost budget in [0, 1] (default: kway.budget in params.yaml; with "
        "--protocol loco the served point's, kway_served)",
    )
    eo.add_argument(
        "--cost-profile",
        default=None,
        metavar="NAME",
        help="with --protocol loco: the cost profile the routers train and are judged under "
        "(retrieval, tokens, gpu, local; default params.yaml cost.profile); every report "
        "gives the cost under each profile too",
    )
    eo.add_argument(
        "--routers",
        default=None,
        metavar="LIST",
        help="the two-way routers trained per fold beside kway (comma-separated; default: "
        "all of them; '' for none)",
    )
    eo.add_argument("--json", action="store_true")
    eo.set_defaults(func=_evaluate_routing)
    ec = esub.add_parser(
        "corpora",
        help="every strategy and router on every labelled corpus, paired against each "
        "corpus's best fixed strategy (kway left-one-corpus-out); table and plot",
    )
    ec.add_argument(
        "--dataset", action="append", help="a corpus (repeat; default: every labelled one)"
    )
    ec.add_argument("--budget", type=float, default=None, help="k-way cost budget in [0, 1]")
    ec.add_argument("--json", action="store_true")
    ec.set_defaults(func=_evaluate_corpora)

    ed = esub.add_parser(
        "decomposition",
        help="the structural rewriter against the echo baselines (the question as one or two "
        "triplets) on each corpus's gold chains; needs no index",
    )
    ed.add_argument(
        "--dataset",
        action="append",
        help="a corpus with gold chains (repeat; default: every shipped one that has them)",
    )
    ed.add_argument("--json", action="store_true")
    ed.add_argument("--report", help="also write the figures as JSON to this file")
    ed.set_defaults(func=_evaluate_decomposition)

    ea = esub.add_parser(
        "answers",
        help="a reader answers from each strategy's passages: EM and F1 (HotpotQA's), "
        "paired against the best fixed strategy; prompt tokens and reader ms",
    )
    ea.add_argument("--dataset", required=True)
    ea.add_argument(
        "--strategies", default=None, metavar="S,...", help="default: every strategy labelled"
    )
    ea.add_argument(
        "--reader",
        default="local",
        metavar="local|URL",
        help="the in-process local LLM, or an OpenAI-compatible server's base URL (…/v1; "
        "model: R2A_LLM_MODEL, else the first it lists)",
    )
    ea.add_argument("--limit", type=int, default=None, help="a stable sample of N queries")
    ea.add_argument(
        "--router-report",
        default=None,
        metavar="JSON",
        help="a leave-one-out routing report (reports/routing/kway_<D>_loco.json): its routers'"
        " per-query choices answer as rows of their own (kway, kway_served)",
    )
    ea.add_argument("--max-tokens", type=int, default=None, help="answer tokens at most (32)")
    ea.add_argument("--timeout", type=float, default=None, help="seconds per answer")
    ea.add_argument("--workers", type=int, default=1, help="answers in flight (a server)")
    ea.add_argument("--json", action="store_true")
    ea.set_defaults(func=_evaluate_answers)

    esw = esub.add_parser(
        "sweep",
        help="a quality sweep of params.yaml sweeps: (retrieval per dataset × OpenIE backend, "
        "routers on held-out corpora), saved to its result file under benchmarks/results/",
    )
    esw.add_argument("--name", required=True, help="a sweep named in params.yaml sweeps:")
    esw.add_argument("--json", action="store_true", help="the result file's object on stdout")
    esw.set_defaults(func=_evaluate_sweep)

    ep = esub.add_parser(
        "report",
        help="the page of reports/eval/*.json: retrieval, routing and corpora tables with their "
        "plots (reports/eval/report.md, reports/eval/routing.png)",
    )
    ep.add_argument("--out", default=None, help="write the page here instead")
    ep.add_argument(
        "--embed", action="store_true", help="the plots inside the page (base64), not linked"
    )
    ep.set_defaults(func=_evaluate_report)

    hl = sub.add_parser(
        "headline",
        help="a DVC stage's few headline numbers from its full reports: reports/metrics/",
    )
    hl.add_argument("stage", choices=list(HEADLINES))
    hl.add_argument(
        "item",
        nargs="?",
        default=None,
        help="a per-item stage's item (corpora, train, promote); the others read params.yaml "
        "pipeline.dataset's reports",
    )
    hl.set_defaults(func=_headline)

    cat = sub.add_parser("catrag", help="CatRAG: train its learned tier source")
    csub = cat.add_subparsers(dest="catrag_command", required=True)
    ct = csub.add_parser("train-tiers", help="fit the learned tier source on the training split")
    ct.add_argument("--dataset", required=True)
    ct.add_argument("--json", action="store_true")
    ct.set_defaults(func=_catrag)

    adr = sub.add_parser("adr", help="ADR: the hypergraph operators and their labels")
    asub = adr.add_subparsers(dest="adr_command", required=True)
    al = asub.add_parser("label", help="every operator on every complete-gold query")
    al.add_argument("--dataset", required=True)
    al.add_argument("--json", action="store_true")
    al.set_defaults(func=_adr)
    aq = asub.add_parser("retrieve", help="one question through an operator or the router")
    aq.add_argument("--dataset", required=True)
    aq.add_argument("--operator", default="route", help="simple | moderate | complex | route")
    aq.add_argument("--json", action="store_true")
    aq.add_argument("question")
    aq.set_defaults(func=_adr)

    lab = sub.add_parser("label", help="annotate the router's training corpus")
    lab.add_argument("--dataset", required=True)
    lab.add_argument("--rule", default=None, choices=sorted(RULES))
    lab.set_defaults(func=_label)

    tr = sub.add_parser("train", help="train a router and register it as candidate")
    tr.add_argument("--dataset", required=True)
    tr.add_argument(
        "--backbone",
        default=None,
        help="minilm (default), embedding, or a transformers model name/path",
    )
    tr.add_argument("--epochs", type=int, default=None)
    tr.add_argument(
        "--router",
        default=None,
        choices=ROUTER_CHOICES,
        help="a family of r2adapter/families.py (r2a, r2a_embed, kway: the cost-aware router "
        "over every strategy, adr: ADR's intent classifier; default: the two-way router of "
        "--backbone)",
    )
    tr.add_argument("--report", help="also write the figures as JSON (and the τ curve)")
    tr.set_defaults(func=_train)

    pr = sub.add_parser("promote", help="move champion to the candidate if the gate holds")
    pr.add_argument("--router", default="r2a", choices=ROUTER_CHOICES)
    pr.add_argument("--dataset", default=None)
    pr.add_argument("--report", help="also write the decision as JSON")
    pr.set_defaults(func=_promote)

    md = sub.add_parser("models", help="registered routers, aliases and gate metrics")
    md.add_argument("--json", action="store_true")
    md.set_defaults(func=_models)

    sv = sub.add_parser("serve", help="start the BentoML service")
    sv.add_argument("--port", type=int, default=3000)
    sv.add_argument("--host", default="127.0.0.1")
    sv.set_defaults(func=_serve)

    rt = sub.add_parser("retrain", help="the whole loop on the current data version")
    rt.add_argument("--dataset", default=None, help="default: params.yaml pipeline.dataset")
    rt.add_argument("--openie", default="spacy", choices=list(OPENIE_BACKENDS))
    rt.add_argument(
        "--router",
        action="append",
        choices=ROUTER_CHOICES,
        help="train and promote only this family (repeatable; default: every family of the "
        "table, r2adapter/families.py)",
    )
    rt.add_argument("--service-url", default=None, help="a running service to reload")
    rt.set_defaults(func=_retrain)

    dm = sub.add_parser("demo", help="serve, show one query per route, stop")
    dm.add_argument("--dataset", default=None, help="default: params.yaml pipeline.dataset")
    dm.set_defaults(func=_demo)

    st = sub.add_parser(
        "state", help="the index and champions this machine holds (exit 1 if missing)"
    )
    st.add_argument("--dataset", default=None, help="default: params.yaml pipeline.dataset")
    st.set_defaults(func=_state)

    run = sub.add_parser("run", help="the main job end to end on embedded defaults")
    run.set_defaults(func=_run)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except R2AError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug, not a user error: still one line unless asked
        if os.environ.get("R2A_DEBUG"):
            raise
        print(
            f"internal error: {type(e).__name__}: {e} (set R2A_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
