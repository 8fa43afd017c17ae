"""Read a rewriter reply into `[head, relation, tail]` triplets, or say why it is unusable,
and build the rewritten query q' = q + the triplets (R²Adapter eq. 6, a concatenation).

A well-formed reply is a JSON list of 1..MAX_TRIPLETS triplets (bare, or under a "triplets"
key), each a list of three non-empty strings; `?` marks the entity the question asks for and
must stand as the head or tail of at least one triplet; `<...>` names an intermediate entity
the question does not name. Given the query, every other head or tail must be grounded in it
(each of its words occurs in the query, ignoring case and punctuation), so that a model that
answers instead of decomposing, or invents a name, is not let into the rewritten query.
Prose or code fences around the JSON are ignored. One near-miss is repaired rather than
refused, because the small local model writes it often: a four-part path
`[head, relation1, relation2, "?"]` is read as the chain it means,
`[head, relation1, <relation1 of head>]`, `[<relation1 of head>, relation2, ?]`.
"""

from __future__ import annotations

import json
import re
from typing import Any

Triplet = tuple[str, str, str]

MAX_TRIPLETS = 6
TARGET = "?"


class MalformedRewrite(ValueError):
    """The reply is not a usable decomposition; the message says why."""


def parse_triplets(
    text: str, max_triplets: int = MAX_TRIPLETS, query: str | None = None
) -> list[Triplet]:
    """The triplets in a reply, in order, exact repeats dropped; MalformedRewrite if they do
    not fit the rules above (the grounding rule only when `query` is given)."""
    raw = _first_json(text)
    if raw is None:
        raise MalformedRewrite("no complete JSON list in the reply")
    if isinstance(raw, dict):
        raw = raw.get("triplets")
    if not isinstance(raw, list):
        raise MalformedRewrite("the reply's JSON is not a list of triplets")
    if raw and all(isinstance(x, str) for x in raw):
        raw = [raw]  # a single triplet written without the outer list
    if not raw:
        raise MalformedRewrite("no triplets")
    out: list[Triplet] = []
    raw = [t for item in raw for t in _expand_path(item)]
    for i, item in enumerate(raw, 1):
        if not isinstance(item, list) or len(item) != 3:
            raise MalformedRewrite(f"triplet {i} is not a list of three items")
        if not all(isinstance(x, str) for x in item):
            raise MalformedRewrite(f"triplet {i} has a part that is not a string")
        head, rel, tail = (" ".join(x.split()) for x in item)
        if not head or not rel or not tail:
            raise MalformedRewrite(f"triplet {i} has an empty part")
        if rel == TARGET:
            raise MalformedRewrite(f"triplet {i} asks for a relation, not an entity")
        if head == tail:
            raise MalformedRewrite(f"triplet {i} links '{head}' to itself")
        triplet = (head, rel, tail)
        if triplet not in out:
            out.append(triplet)
    if len(out) > max_triplets:
        raise MalformedRewrite(f"{len(out)} triplets, more than {max_triplets}")
    if not any(TARGET in (h, t) for h, _, t in out):
        raise MalformedRewrite(f"no triplet has '{TARGET}' for the entity asked for")
    if query is not None:
        known = set(_words(query))
        for h, _, t in out:
            for ent in (h, t):
                if not _is_placeholder(ent) and not set(_words(ent)) <= known:
                    raise MalformedRewrite(f"'{ent}' is not named in the query")
    return out


def _expand_path(item: Any) -> list[Any]:
    """`[head, r1, r2, "?"]` (two relations, no middle entity) → the two-hop chain; any
    other item unchanged."""
    if not (isinstance(item, list) and len(item) == 4 and all(isinstance(x, str) for x in item)):
        return [item]
    head, r1, r2, tail = (" ".join(x.split()) for x in item)
    if tail != TARGET or not head or _is_placeholder(head):
        return [item]
    if not r1 or not r2 or any(_is_placeholder(r) or r == TARGET for r in (r1, r2)):
        return [item]
    middle = f"<{r1} of {head}>"
    return [[head, r1, middle], [middle, r2, TARGET]]


def _is_placeholder(entity: str) -> bool:
    return entity == TARGET or (entity.startswith("<") and entity.endswith(">"))


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())


def format_triplets(triplets: list[Triplet]) -> str:
    """One `[head, relation, tail]` line per triplet."""
    return "\n".join(f"[{h}, {r}, {t}]" for h, r, t in triplets)


def rewritten_query(query: str, triplets: list[Triplet]) -> str:
    """q' = concat(q, q_r): the query, then the triplets as text lines."""
    return f"{query}\n{format_triplets(triplets)}" if triplets else query


def _first_json(text: str) -> Any:
    """The JSON value that starts at the first `[` or `{` in `text`, or None.

    Only the first bracket is tried, so a list cut off by the token limit is rejected
    rather than read as the first triplet inside it.
    """
    starts = [i for i in (text.find("["), text.find("{")) if i != -1]
    if not starts:
        return None
    try:
        obj, _ = json.JSONDecoder().raw_decode(text, min(starts))
    except ValueError:
        return None
    return obj


_TRIPLET_LINE = re.compile(r"\[(?P<body>.+)\]")


def triplet_queries(query: str) -> list[str]:
    """The fact queries of a rewritten query q′ = q + one `[head, relation, tail]` line per
    triplet (this module's format): "head relation" (the start of a fact's text,
    r2adapter/data/schema.py:fact_text) for each triplet whose head is named, not a
    `<placeholder>` or `?`. A query without triplet lines gives none."""
    out: list[str] = []
    for line in query.splitlines()[1:]:
        m = _TRIPLET_LINE.fullmatch(line.strip())
        if m is None:
            continue
        body = m.group("body")
        # the tail is `?`, a `<placeholder>` (either may hold commas) or the last part
        cut = body.rfind(", <") if body.endswith(">") else body.rfind(", ")
        head_rel = body[:cut] if cut > 0 else ""
        head, _, rel = head_rel.rpartition(", ")
        if head and rel and not head.startswith("<") and head != "?":
            text = f"{head} {rel.strip().lower()}"
            if text not in out:
                out.append(text)
    return out
