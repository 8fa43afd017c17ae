"""The `r2a` command. Every user error is one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence

from r2adapter.errors import R2AError


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


def _data_validate(args: argparse.Namespace) -> int:
    from r2adapter import steps

    report = steps.validate(args.dataset)
    for check in report.checks:
        print(check.line())
    failed = sum(not c.success for c in report.checks)
    if args.report:
        _write_json(
            args.report,
            {
                "dataset": report.dataset,
                "passages": report.n_passages,
                "queries": report.n_queries,
                "complete_gold": report.n_complete,
                "expectations": len(report.checks),
                "failed": failed,
            },
        )
    print(
        f"{report.dataset}: {report.n_passages} passages, {report.n_queries} queries, "
        f"{report.n_complete} with complete gold"
    )
    if failed:
        print(f"validation failed: {failed} of {len(report.checks)} expectations", file=sys.stderr)
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


def _data_load(args: argparse.Namespace) -> int:
    from r2adapter import steps

    r = steps.load(args.dataset)
    print(
        f"{r.dataset}: passages +{r.passages_added} -{r.passages_removed}, queries "
        f"+{r.queries_added} ~{r.queries_changed} -{r.queries_removed}"
        f"{'' if r.changed else ' (already loaded, nothing changed)'}"
    )
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
