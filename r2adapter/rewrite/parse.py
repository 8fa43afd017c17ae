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
    """One `[head, relation, tail]` line per triplet; a slot holding a comma, a bracket or
    a double quote is written as a JSON string, so that every line reads as three slots
    (`[Sir William Brereton, 1St Baronet, date of death, ?]` read as four: issue 44)."""
    return "\n".join(f"[{_slot(h)}, {_slot(r)}, {_slot(t)}]" for h, r, t in triplets)


_NEEDS_QUOTES = re.compile(r'[,\[\]"]')
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
_SLOT_CUT = re.compile(r", (?![^<>]*>)")  # a `, ` outside a `<placeholder>`


def _slot(text: str) -> str:
    if _is_placeholder(text) and not re.search(r'[\[\]"<>]', text[1:-1]):
        return text  # `<the director of X, Y>`: its brackets delimit it already
    return json.dumps(text, ensure_ascii=False) if _NEEDS_QUOTES.search(text) else text


def triplet_slots(body: str) -> tuple[str, str, str] | None:
    """The three slots of a triplet line's body (between its outer brackets), quoted ones
    unquoted; a line written before slots were quoted, with more than three parts, keeps
    the extra commas in its head. None: fewer than three slots."""
    quoted: list[str] = []

    def keep(m: re.Match[str]) -> str:
        quoted.append(json.loads(m.group()))
        return f"\x00{len(quoted) - 1}\x00"

    parts = [
        re.sub(r"\x00(\d+)\x00", lambda m: quoted[int(m.group(1))], p)
        for p in _SLOT_CUT.split(_QUOTED.sub(keep, body))
    ]
    if len(parts) < 3:
        return None
    return ", ".join(parts[:-2]), parts[-2], parts[-1]


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
        slots = triplet_slots(m.group("body"))
        if slots is None:
            continue
        head, rel, _ = slots
        if head and rel and not head.startswith("<") and head != "?":
            text = f"{head} {rel.strip().lower()}"
            if text not in out:
                out.append(text)
    return out
