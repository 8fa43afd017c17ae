#!/usr/bin/env python
"""Derive data/musique_mixed from data/musique: MuSiQue's train sample (100 questions) as mixed
traffic, built as ../shared's musique_dev_mixed was, with the single-hop steps people wrote
only (type `1hop`); the Wikidata steps ("X >> relation") are left out. It is the kind of set
issue 40 says the project is judged on (a corpus never seen, lookups written by people), so
no router, label set or setting is ever made on it: it is held out of pipeline.corpora,
kway.train_corpora and adr.train_corpora (docs/corpora.md "The unseen-corpus proxy").

    .venv/bin/python scripts/derive_musique_mixed.py   # writes data/musique_mixed/

Records: each multi-hop question as it stands, type `<n>hop` (n its decomposition's steps);
then each of its people-written steps, id `<question id>__step<i>`, "#k" replaced by step
k's answer, gold the paragraph its `paragraph_support_idx` names (`is_supporting` set on
that paragraph only); a step whose text is asked already (case-folded) is kept once. The
corpus is musique's own 1,890 passages, byte for byte.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "data" / "musique"
TARGET = ROOT / "data" / "musique_mixed"
STEP_REF = re.compile(r"#(\d+)")


def _fill(text: str, answers: dict[int, str]) -> str:
    """A step's text with "#k" replaced by step k's answer (a reference to a later step
    stays, and the step is then left out)."""
    return STEP_REF.sub(lambda m: answers.get(int(m.group(1)), m.group(0)), text).strip()


def mixed_records(questions: list[dict]) -> list[dict]:
    rows: list[dict] = []
    seen: set[str] = set()
    for q in questions:
        steps = q["question_decomposition"]
        rows.append({**q, "type": f"{len(steps)}hop"})
        answers: dict[int, str] = {}
        for i, step in enumerate(steps, 1):
            answers[i] = step["answer"]
            if ">>" in step["question"]:  # a Wikidata relation, not a question people wrote
                continue
            text = _fill(step["question"], answers)
            if "#" in text or text.lower() in seen:
                continue
            seen.add(text.lower())
            gold = step["paragraph_support_idx"]
            rows.append(
                {
                    "id": f"{q['id']}__step{i}",
                    "question": text,
                    "answer": step["answer"],
                    "answer_aliases": [],
                    "paragraphs": [
                        {**p, "is_supporting": p["idx"] == gold} for p in q["paragraphs"]
                    ],
                    "type": "1hop",
                }
            )
    return rows


def main() -> None:
    source = SOURCE / "musique.json"
    if not source.is_file():
        raise SystemExit(f"{source}: not found; run `make data` (dvc pull) first")
    questions = json.loads(source.read_text())
    rows = mixed_records(questions)
    TARGET.mkdir(exist_ok=True)
    (TARGET / "musique_mixed.json").write_text(json.dumps(rows, ensure_ascii=False))
    (TARGET / "musique_mixed_corpus.json").write_bytes(
        (SOURCE / "musique_corpus.json").read_bytes()
    )
    singles = sum(r["type"] == "1hop" for r in rows)
    print(f"{TARGET}: {len(rows)} queries ({len(rows) - singles} multi-hop, {singles} lookups)")


if __name__ == "__main__":
    main()
