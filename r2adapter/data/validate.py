"""Great Expectations suites over a dataset's corpus and queries."""

from __future__ import annotations

import logging
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from r2adapter.data.data_docs import PAGE, SITE, clear, single_page, site_config
from r2adapter.data.schema import MAX_PASSAGE_CHARS, Dataset, Passage

BLANK = r"^\s*$"
NUL = r"\x00"  # Postgres' text cannot hold it: `r2a data load` would refuse the row
TABLES = ("corpus", "queries", "gold")  # a suite each, checked in this order


@dataclass(frozen=True)
class Check:
    table: str
    expectation: str
    column: str | None
    success: bool
    checked: int
    unexpected: int
    example: str

    def line(self) -> str:
        status = "PASS" if self.success else "FAIL"
        col = f"({self.column})" if self.column else ""
        tail = f" e.g. {self.example}" if self.example and not self.success else ""
        return (
            f"{status} {self.table}: {self.expectation}{col}: {self.checked} checked, "
            f"{self.unexpected} unexpected{tail}"
        )


@dataclass(frozen=True)
class Report:
    dataset: str
    checks: list[Check]
    n_passages: int
    n_queries: int
    n_complete: int

    @property
    def success(self) -> bool:
        return all(c.success for c in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.success]

    def to_report(self) -> dict[str, object]:
        """reports/validate/<dataset>.json (a DVC metric): these keys, in this order."""
        return {"dataset": self.dataset, **self._counts()}

    def metrics(self) -> dict[str, float]:
        return {k: float(v) for k, v in self._counts().items()}

    def _counts(self) -> dict[str, int]:
        return {
            "passages": self.n_passages,
            "queries": self.n_queries,
            "complete_gold": self.n_complete,
            "expectations": len(self.checks),
            "failed": len(self.failed),
        }


def corpus_problems(ds: Dataset) -> list[str]:
    """What validation fails on and a load cannot store as given: repeated passages,
    passages over MAX_PASSAGE_CHARS, an empty or blank passage or question, and a NUL
    character in a passage or a question
    (Postgres' text type cannot hold one). Plain Python (milliseconds), so that `r2a data load`
    and `r2a index` refuse the corpora `r2a data validate` fails, without running the suites."""
    problems = []
    by_id: dict[str, Passage] = {}
    copies: list[Passage] = []
    for p in ds.passages:
        if p.id in by_id:
            copies.append(p)
        else:
            by_id[p.id] = p
    if copies:
        problems.append(
            f"{len(copies)} passage(s) repeat another's title and text "
            f"(e.g. '{copies[0].title[:60]}')"
        )
    by_text: dict[str, Passage] = {}
    retitled: list[Passage] = []
    for p in by_id.values():
        if p.text in by_text:
            retitled.append(p)
        else:
            by_text[p.text] = p
    if retitled:
        problems.append(
            f"{len(retitled)} passage(s) repeat another's text under another title "
            f"(e.g. '{retitled[0].title[:60]}')"
        )
    blank = [p for p in by_id.values() if not p.title.strip() or not p.text.strip()]
    if blank:
        problems.append(
            f"{len(blank)} passage(s) have an empty or blank title or text "
            f"(e.g. {blank[0].title[:60]!r}): give each a title and a text"
        )
    blank_q = [q for q in ds.queries if not isinstance(q.question, str) or not q.question.strip()]
    if blank_q:
        problems.append(
            f"{len(blank_q)} question(s) are empty or blank (e.g. query {blank_q[0].id}): "
            "give each a question or drop it"
        )
    nul = [p for p in by_id.values() if "\x00" in p.title or "\x00" in p.text]
    if nul:
        problems.append(
            f"{len(nul)} passage(s) contain a NUL character (e.g. {nul[0].title[:60]!r}): remove it"
        )
    nul_q = [q for q in ds.queries if isinstance(q.question, str) and "\x00" in q.question]
    if nul_q:
        problems.append(
            f"{len(nul_q)} question(s) contain a NUL character (e.g. query {nul_q[0].id}): "
            "remove it"
        )
    long = [p for p in by_id.values() if len(p.text) > MAX_PASSAGE_CHARS]
    if long:
        problems.append(
            f"{len(long)} passage(s) over {MAX_PASSAGE_CHARS:,} characters (e.g. "
            f"'{long[0].title[:60]}', {len(long[0].text):,}): split them into passages"
        )
    return problems


def _frames(ds: Dataset) -> dict[str, pd.DataFrame]:
    corpus = pd.DataFrame(
        [(p.id, p.title, p.text) for p in ds.passages], columns=["id", "title", "text"]
    )
    queries = pd.DataFrame(
        [
            (
                q.id,
                q.question,
                len([a for a in q.answers if a.strip()]),
                len(q.gold_passage_ids),
                q.gold_complete,
            )
            for q in ds.queries
        ],
        columns=["id", "question", "n_answers", "n_gold", "gold_complete"],
    )
    gold = pd.DataFrame(
        [(q.id, g) for q in ds.queries for g in q.gold_passage_ids],
        columns=["query_id", "passage_id"],
    )
    return {"corpus": corpus, "queries": queries, "gold": gold}


def _suites(ds: Dataset) -> dict[str, list[Any]]:
    import great_expectations as gx

    e = gx.expectations
    corpus_ids = [p.id for p in ds.passages]
    return {
        "corpus": [
            e.ExpectTableRowCountToBeBetween(min_value=1),
            e.ExpectColumnValuesToNotBeNull(column="id"),
            e.ExpectColumnValuesToBeUnique(column="id"),
            e.ExpectColumnValuesToNotMatchRegex(column="title", regex=BLANK),
            e.ExpectColumnValuesToNotMatchRegex(column="text", regex=BLANK),
            e.ExpectColumnValuesToNotMatchRegex(column="title", regex=NUL),
            e.ExpectColumnValuesToNotMatchRegex(column="text", regex=NUL),
            e.ExpectColumnValuesToBeUnique(column="text"),
            e.ExpectColumnValueLengthsToBeBetween(column="text", max_value=MAX_PASSAGE_CHARS),
        ],
        "queries": [
            e.ExpectTableRowCountToBeBetween(min_value=1),
            e.ExpectColumnValuesToBeUnique(column="id"),
            e.ExpectColumnValuesToNotMatchRegex(column="question", regex=BLANK),
            e.ExpectColumnValuesToNotMatchRegex(column="question", regex=NUL),
            e.ExpectColumnValuesToBeBetween(column="n_answers", min_value=1),
            # A query marked complete must name its gold passages.
            e.ExpectColumnValuesToBeBetween(
                column="n_gold",
                min_value=1,
                row_condition="gold_complete==True",
                condition_parser="pandas",
            ),
        ],
        "gold": [
            e.ExpectColumnValuesToBeInSet(column="passage_id", value_set=corpus_ids),
        ],
    }


def validate(ds: Dataset, data_docs: Path | None = None) -> Report:
    """The suites as one Great Expectations checkpoint: a validation definition per table.
    With `data_docs`, its UpdateDataDocsAction writes the Data Docs site there (index.html)
    and one page of every result beside it (r2adapter/data/data_docs.py)."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    with warnings.catch_warnings(), tempfile.TemporaryDirectory() as tmp:
        warnings.simplefilter("ignore")
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        ctx = gx.get_context(mode="ephemeral")
        ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
        actions: list[Any] = []
        if data_docs is not None:
            data_docs.mkdir(parents=True, exist_ok=True)
            clear(data_docs)
            ctx.add_data_docs_site(SITE, site_config(data_docs))  # type: ignore[arg-type]
            actions.append(gx.checkpoint.UpdateDataDocsAction(name="data_docs", site_names=[SITE]))
        frames = _frames(ds)
        definitions = _definitions(ctx, ds.name, frames, _suites(ds), Path(tmp))
        checkpoint = ctx.checkpoints.add(
            gx.Checkpoint(
                name=f"r2a-{ds.name}", validation_definitions=definitions, actions=actions
            )
        )
        by_suite = {r.suite_name: r for r in checkpoint.run().run_results.values()}
        results = [by_suite[f"{ds.name}-{table}"] for table in TABLES]
        if data_docs is not None:
            (data_docs / PAGE).write_text(single_page(f"{ds.name}: validation", results))
    checks = [
        _check(table, r, len(frames[table]))
        for table, result in zip(TABLES, results, strict=True)
        for r in result.results
        if r.expectation_config is not None  # a result always carries its expectation
    ]
    return Report(ds.name, checks, len(ds.passages), len(ds.queries), ds.n_complete)


def _definitions(
    ctx: Any, name: str, frames: dict[str, pd.DataFrame], suites: dict[str, list[Any]], tmp: Path
) -> list[Any]:
    """One validation definition per table, its suite named `<dataset>-<table>`. The frames
    go through pickle files: a checkpoint hands every definition the same batch parameters,
    so a dataframe asset (its frame given at run time) could validate only one table."""
    import great_expectations as gx

    source = ctx.data_sources.add_pandas(f"r2a-{name}")
    out = []
    for table in TABLES:
        path = tmp / f"{table}.pkl"
        frames[table].to_pickle(path)
        batch = source.add_pickle_asset(table, filepath_or_buffer=path)
        suite = ctx.suites.add(
            gx.ExpectationSuite(name=f"{name}-{table}", expectations=suites[table])
        )
        definition = gx.ValidationDefinition(
            name=f"{name}-{table}",
            data=batch.add_batch_definition_whole_dataframe("all"),
            suite=suite,
        )
        out.append(ctx.validation_definitions.add(definition))
    return out


def _check(table: str, r: Any, rows: int) -> Check:
    """One expectation's result (of a table of `rows` rows) as a line of `r2a data validate`."""
    res, cfg = r.result or {}, r.expectation_config
    checked = res.get("element_count", res.get("observed_value", rows))
    examples = res.get("partial_unexpected_list") or []
    return Check(
        table,
        cfg.type,
        cfg.kwargs.get("column"),
        bool(r.success),
        int(checked),
        int(res.get("unexpected_count") or 0),
        str(examples[0])[:60] if examples else "",
    )
