"""`r2a evaluate answers`: the fixed strategies' passages from the strategy labels
(`labels/<dataset>.strategies.jsonl`), answered by a reader (r2adapter/evaluate/answers.py).

A router's per-query choice joins as another row through `extra` (row name → query id →
passage ids), paired against the best fixed strategy like the others.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from r2adapter.config import kway_params
from r2adapter.data.adapters import dataset_name
from r2adapter.errors import R2AError
from r2adapter.evaluate.answers import MAX_TOKENS, Reader, evaluate_answers, sample
from r2adapter.kway.labels import read_strategy_labels
from r2adapter.kway.strategies import strategy_table
from r2adapter.llm.base import LLM, LLMSettings

LOCAL = "local"  # --reader local: the in-process local LLM (r2adapter/llm/local.py)


def strategy_rows(
    dataset: str, names: Sequence[str] | None = None
) -> dict[str, dict[str, list[str]]]:
    """Strategy name → query id → the passages it hands the reader, from the strategy
    labels (every strategy of the table by default)."""
    p = kway_params()
    known = [s.name for s in strategy_table(p.strategies)]
    chosen = list(dict.fromkeys(names)) if names else known
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise R2AError(
            f"unknown strategy {unknown[0]!r}: the table (kway.strategies in params.yaml) has "
            f"{', '.join(known)}"
        )
    labels = read_strategy_labels(dataset, p)
    return {n: {lab.query_id: list(lab.outcomes[n].passages) for lab in labels} for n in chosen}


def open_reader(spec: str, timeout: float | None = None) -> LLM:
    """`local`, or the base URL of an OpenAI-compatible server (…/v1); its model is
    R2A_LLM_MODEL, else the first the server lists. A server that does not answer: one line."""
    cfg = LLMSettings.from_env()
    if timeout is not None:
        if timeout <= 0:
            raise R2AError(f"--timeout must be positive, not {timeout:g}")
        cfg = dataclasses.replace(cfg, timeout=timeout)
    if spec == LOCAL:
        from r2adapter.llm import local

        return local.from_settings(cfg)
    if not spec.startswith(("http://", "https://")):
        raise R2AError(f"--reader {spec!r}: give `local` or an http(s) URL ending in /v1")
    from r2adapter.llm.openai_compat import OpenAICompatibleLLM, served_model

    model = cfg.model or served_model(spec, cfg.timeout, cfg.api_key)
    return OpenAICompatibleLLM(
        spec, model, cfg.api_key, timeout=cfg.timeout, max_attempts=cfg.max_attempts
    )


def answers_report(
    dataset: str,
    strategies: Sequence[str] | None = None,
    reader: str = LOCAL,
    limit: int | None = None,
    *,
    extra: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
    max_tokens: int | None = None,
    timeout: float | None = None,
    workers: int = 1,
    progress: bool = True,
    save: bool = True,
) -> dict[str, Any]:
    """`r2a evaluate answers`: the named strategies (default: every one in the table) and
    the `extra` rows (e.g. `{"router": {query id: passage ids}}`), each on the stored queries
    that carry gold answers and strategy labels (`limit`: a stable sample of them)."""
    from r2adapter.store.graph_store import require_version
    from r2adapter.store.queries import stored_queries

    name = dataset_name(dataset)
    require_version(name)  # not indexed: one line naming `r2a index`
    rows: dict[str, Mapping[str, Sequence[str]]] = dict(strategy_rows(name, strategies))
    fixed = list(rows)
    for row, per_query in (extra or {}).items():
        if row in rows:
            raise R2AError(f"extra row {row!r} has a strategy's name: give it another")
        rows[row] = per_query
    labelled = set(rows[fixed[0]])
    queries = sample([q for q in stored_queries(name) if q.id in labelled], limit)
    if not queries:
        raise R2AError(
            f"no labelled query of {name} carries a gold answer: nothing to answer "
            f"(`r2a label --dataset {name}` labels the stored queries)"
        )
    max_tokens = MAX_TOKENS if max_tokens is None else max_tokens
    if max_tokens < 1:
        raise R2AError(f"--max-tokens must be at least 1, not {max_tokens}")
    llm = open_reader(reader, timeout)
    try:
        return evaluate_answers(
            name,
            queries,
            rows,
            fixed,
            Reader(llm, max_tokens=max_tokens, timeout=timeout),
            workers=workers,
            progress=progress,
            save_report=save,
        )
    finally:
        if reader != LOCAL:
            llm.close()


def router_rows(dataset: str, report_path: str) -> dict[str, dict[str, list[str]]]:
    """The routers of a leave-one-out report (`choices`: row → query id → strategy) as
    answer rows: each query's passages from the strategy labels of the strategy chosen."""
    import json
    from pathlib import Path

    from r2adapter.kway.labels import read_strategy_labels

    path = Path(report_path)
    try:
        report = json.loads(path.read_text())
        choices = report["choices"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise R2AError(
            f"{path}: not a routing report with per-query choices ({type(e).__name__}): run "
            f"`r2a evaluate routing --dataset {dataset} --protocol loco`"
        ) from None
    if report.get("dataset") != dataset_name(dataset):
        raise R2AError(f"{path} is the report of {report.get('dataset')!r}, not of {dataset!r}")
    labels = {
        lab.query_id: lab for lab in read_strategy_labels(dataset_name(dataset), reader=False)
    }
    return {
        row: {q: list(labels[q].outcomes[s].passages) for q, s in per.items() if q in labels}
        for row, per in choices.items()
    }
