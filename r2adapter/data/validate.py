"""Great Expectations suites over a dataset's corpus and queries."""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass

import pandas as pd

from r2adapter.data.schema import Dataset

BLANK = r"^\s*$"


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


def _suites(ds: Dataset) -> dict[str, list[object]]:
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
            e.ExpectColumnValuesToBeUnique(column="text"),
        ],
        "queries": [
            e.ExpectTableRowCountToBeBetween(min_value=1),
            e.ExpectColumnValuesToBeUnique(column="id"),
            e.ExpectColumnValuesToNotMatchRegex(column="question", regex=BLANK),
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


def validate(ds: Dataset) -> Report:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        ctx = gx.get_context(mode="ephemeral")
        ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
        source = ctx.data_sources.add_pandas(f"r2a-{ds.name}")
        frames, suites = _frames(ds), _suites(ds)
        checks: list[Check] = []
        for table, expectations in suites.items():
            batch = (
                source.add_dataframe_asset(table)
                .add_batch_definition_whole_dataframe("all")
                .get_batch(batch_parameters={"dataframe": frames[table]})
            )
            suite = gx.ExpectationSuite(name=f"{ds.name}-{table}", expectations=expectations)
            for r in batch.validate(suite).results:
                res = r.result or {}
                checked = res.get("element_count", res.get("observed_value", len(frames[table])))
                examples = res.get("partial_unexpected_list") or []
                checks.append(
                    Check(
                        table,
                        r.expectation_config.type,
                        r.expectation_config.kwargs.get("column"),
                        bool(r.success),
                        int(checked),
                        int(res.get("unexpected_count") or 0),
                        str(examples[0])[:60] if examples else "",
                    )
                )
    return Report(ds.name, checks, len(ds.passages), len(ds.queries), ds.n_complete)
