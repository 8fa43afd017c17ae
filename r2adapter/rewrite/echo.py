"""The echo baselines (issue 40): rewriters that decompose nothing, scored beside the real
one so that a score shows what decomposing adds over copying the question.

Both start from the question's first named span, found as the structural rewriter finds
names (structural.named_spans: the same parse), so the echoes and the rewriter see the
same names. `rest` is the question less that span.

- `echo1`: the question as one triplet, `[span, rest, ?]`.
- `echo2`: the question as two chained triplets, `[span, r1, <r1 of span>]`,
  `[<r1 of span>, r2, ?]`. The rest is cut in two right after the last word of the first
  half of its relation words (content words that are not names: score.py's `content` and
  `named_words`; the first half takes the odd one). The half the span sits in or next to
  is hop 1 (`r1`), the other hop 2; a span between the halves goes with the first half:
  the words just before a name usually govern it ("the territory containing X", "the
  actress who played X"). A rest with fewer than two relation words is echo1's one
  triplet.

A question with no named span gives no triplets (unparsed), as the structural rewriter
does.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from r2adapter.rewrite.parse import Triplet
from r2adapter.rewrite.score import content, named_words
from r2adapter.rewrite.structural import chain, named_spans, normalise


@lru_cache(maxsize=4096)  # echo1 and echo2 read the same parse
def first_name(question: str) -> tuple[str, tuple[str, ...], int] | None:
    """(the first named span, the rest's words, how many of them come before the span), or
    None when the question names nothing."""
    q = normalise(question)
    spans = named_spans(q) if q else []
    if not spans:
        return None
    start, end = spans[0]
    before, after = q[:start].split(), q[end:].split()
    name = q[start:end].strip("\"'“”‘’ ")
    return (name, (*before, *after), len(before)) if name else None


def echo1(question: str) -> list[Triplet]:
    found = first_name(question)
    if found is None or not found[1]:
        return []
    name, rest, _ = found
    return chain(name, [" ".join(rest)])


def echo2(question: str) -> list[Triplet]:
    found = first_name(question)
    if found is None or not found[1]:
        return []
    name, rest, before = found
    names = named_words(normalise(question))
    relational = [i for i, w in enumerate(rest) if content(w) - names]
    if len(relational) < 2:
        return chain(name, [" ".join(rest)])
    cut = relational[(len(relational) + 1) // 2 - 1] + 1  # after the first half's last
    first, second = " ".join(rest[:cut]), " ".join(rest[cut:])
    return chain(name, [second, first] if before > cut else [first, second])


BASELINES: dict[str, Callable[[str], list[Triplet]]] = {"echo1": echo1, "echo2": echo2}
