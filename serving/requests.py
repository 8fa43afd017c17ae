"""The service's request and response types, and request validation: every bad input is a
422 with `{"error", "field"}`.

The pydantic types give the endpoints' signatures (so /docs.json carries the constraints);
`validate_body` applies the same constraints, with one-line messages, before BentoML parses
the body (serving/middleware.py), so BentoML's own 400 is never reached.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from r2adapter.adapter import MODES
from r2adapter.retrieve.base import MAX_QUERY_CHARS, query_problem

MAX_TOP_K = 100
MAX_BATCH = 64  # queries in one /route_batch body
MAX_DEPTH = 32  # nesting of arrays and objects in a body (the endpoints need 2)


def _esc(cp: int) -> str:
    # above the BMP the character itself: Python's re, Rust's regex and ECMA's (u mode,
    # schemathesis' jsonschema_rs) share no escape for it, and every one reads it literally
    return f"\\u{cp:04X}" if cp <= 0xFFFF else chr(cp)


def visible_class() -> str:
    """A regex character class of the characters a reader can see (Unicode categories L, N,
    P, S: r2adapter.retrieve.base's rule, from the same unicodedata), as ~760 ranges that
    Python's re (schemathesis' generator), Rust's regex (pydantic) and ECMA's read alike."""
    ranges, start = [], None
    # planes 4-13 are unassigned and 15-16 private use (Python 3.11's Unicode 14): no
    # visible character there, so the scan skips them (0.2 s instead of 0.5)
    for cp in (*range(0x40000), *range(0xE0000, 0xF0000)):
        ok = cp != 0 and unicodedata.category(chr(cp))[0] in "LNPS"
        if ok and start is None:
            start = cp
        elif not ok and start is not None:
            ranges.append((start, cp - 1))
            start = None
    if start is not None:
        ranges.append((start, 0xEFFFF))
    return "[" + "".join(_esc(a) if a == b else f"{_esc(a)}-{_esc(b)}" for a, b in ranges) + "]"


# what the service accepts, said as a pattern: no NUL and a visible character (so the
# published schema's positive examples are served, issue 27: 51 schemathesis failures for
# text of only controls, zero-width or combining marks)
QUERY_PATTERN = "^[^\\x00]*" + visible_class() + "[^\\x00]*$"

Query = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        pattern=QUERY_PATTERN,
        strict=True,
        description=f"The question, 1–{MAX_QUERY_CHARS} characters with a visible one "
        "(a letter, digit, punctuation or symbol), no NUL",
    ),
]
Mode = Literal[  # r2adapter.adapter.MODES (asserted below)
    "auto",
    "dense",
    "graph",
    "catrag",
    "fusion",
    "lexical",
    "hybrid",
    "adr_simple",
    "adr_moderate",
    "adr_complex",
    "adr",
]
TopK = Annotated[int, Field(ge=1, le=MAX_TOP_K, strict=True, description="Passages to return")]
assert set(Mode.__args__) == set(MODES)  # type: ignore[attr-defined]


class BadRequest(Exception):
    """One line for the client, with the field it concerns."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"error": self.message, "field": self.field}


@dataclass(frozen=True)
class QueryRequest:
    query: str
    mode: str = "auto"
    top_k: int = 5


_STRINGS = re.compile(rb'"(?:[^"\\]++|\\.)*+"')
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")


def too_deep(body: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON in `body` nests arrays and objects deeper than `limit`, checked
    before `json.loads` (whose recursion a 2 KB body nested 1,000 deep exhausts): the
    brackets outside strings, their running depth a cumulative sum in numpy (≈ 5 ms on a
    1 MiB body of brackets; repeated pair removal took 0.5 s there)."""
    if body.count(b"[") + body.count(b"{") <= limit:  # every real body: two counts, done
        return False
    import numpy as np

    rest = _STRINGS.sub(b"", body).translate(None, _NOT_BRACKETS)
    if len(rest) <= limit:
        return False
    b = np.frombuffer(rest, dtype=np.uint8)
    step = (b == ord("[")).astype(np.int32) + (b == ord("{"))
    step -= (b == ord("]")).astype(np.int32) + (b == ord("}"))
    return bool(np.cumsum(step).max() > limit)


def parse_query(query: Any, field: str = "query", item: bool = False) -> str:
    """The query text stripped, or BadRequest naming `field`; `item`: one of a list, where
    a null is a value sent, not a field left out."""
    if query is None:
        msg = f"{field} is null: each item must be a string" if item else f"{field} is required"
        raise BadRequest(field, msg)
    if not isinstance(query, str):
        raise BadRequest(field, f"{field} must be a string, not {type(query).__name__}")
    if not query.strip():
        raise BadRequest(field, f"{field} is empty or whitespace")
    if len(query) > MAX_QUERY_CHARS:
        raise BadRequest(
            field, f"{field} has {len(query)} characters; the limit is {MAX_QUERY_CHARS}"
        )
    if problem := query_problem(query):  # NUL, nothing visible: the library's own rule
        raise BadRequest(field, problem.replace("the query", field, 1))
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as e:  # JSON's "\ud800" alone: a string no UTF-8 can carry
        bad = f"U+{ord(query[e.start]):04X}"
        raise BadRequest(field, f"{field} contains a lone surrogate ({bad}): not text") from None
    return query.strip()


def parse_request(query: Any, mode: Any = None, top_k: Any = None) -> QueryRequest:
    text = parse_query(query)
    mode = "auto" if mode is None else mode
    if not isinstance(mode, str) or mode not in MODES:
        raise BadRequest("mode", f"mode must be one of {', '.join(MODES)}")
    top_k = 5 if top_k is None else top_k
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise BadRequest("top_k", f"top_k must be an integer, not {type(top_k).__name__}")
    if not 1 <= top_k <= MAX_TOP_K:
        raise BadRequest("top_k", f"top_k must be between 1 and {MAX_TOP_K}, not {top_k}")
    return QueryRequest(text, mode, top_k)


def parse_batch(queries: Any) -> list[str]:
    if not isinstance(queries, list):
        raise BadRequest("queries", "queries must be a list of strings")
    if not 1 <= len(queries) <= MAX_BATCH:
        raise BadRequest(
            "queries", f"queries has {len(queries)} items; send 1 to {MAX_BATCH} per request"
        )
    return [parse_query(q, f"queries[{i}]", item=True) for i, q in enumerate(queries)]


# what each endpoint's body may hold, validated and normalised (defaults filled, query
# stripped) before BentoML sees it
def validate_body(endpoint: str, body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest("body", f"the body must be a JSON object, not {_json_type(body)}")
    if endpoint in ("route", "retrieve", "answer"):
        for name in ("mode", "top_k"):  # absent means the default; null is not a value
            if name in body and body[name] is None:
                raise BadRequest(name, f"{name} is null: leave it out for the default")
        req = parse_request(body.get("query"), body.get("mode"), body.get("top_k"))
        return {"query": req.query, "mode": req.mode, "top_k": req.top_k}
    if endpoint == "rewrite":
        return {"query": parse_query(body.get("query"))}
    if endpoint == "route_batch":
        return {"queries": parse_batch(body.get("queries"))}
    return {}  # reload, info: no fields


def _json_type(v: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(v), "a number")


# -- responses -----------------------------------------------------------------------------


class Out(BaseModel):
    # fields added later (a new decision record, timings) pass through instead of being
    # dropped by the response model
    model_config = ConfigDict(extra="allow")


class RouteOut(Out):
    query: str | None = None
    decision: Literal["dense", "graph"]
    p_dense: float
    p_graph: float
    rewrite: bool
    tau: float
    epsilon: float
    router_version: str
    router: str | None = None  # "kway" when the cost-aware router decided
    strategy: str | None = None  # the k-way router's choice, e.g. "graph@5"
    retriever: str | None = None
    k: int | None = None
    fallback: bool | None = None  # no head confident: the best single strategy
    scores: dict[str, float] | None = None  # each strategy head's suitability


class Passage(Out):
    id: int | str
    score: float
    title: str
    text: str


class RetrieveOut(Out):
    query: str
    mode: Mode
    decision: str
    p_dense: float | None = None
    p_graph: float | None = None
    rewritten: bool
    rewritten_query: str | None = None
    rewrite_fallback: str | None = None
    passages: list[Passage]
    timings_ms: dict[str, float]
    answer: str | None = None
    router: str
    router_version: str | None = None
    dataset: str
    champion_error: str | None = None
    strategy: str | None = None  # auto routed by the k-way router: its strategy and k
    k: int | None = None
    routing: str | None = None
    kway_version: str | None = None
    kway_note: str | None = None
    adr_version: str | None = None  # the `adr` mode's champion
    adr_note: str | None = None


class RewriteOut(Out):
    query: str
    rewritten: str
    triplets: list[list[str]]
    ok: bool
    fallback: str | None = None
    ms: float


class InfoOut(Out):
    router: str
    router_version: str | None = None
    dataset: str
    champion_error: str | None = None
    routing: str | None = None  # "kway" when the cost-aware router routes auto
    kway_version: str | None = None
    kway_note: str | None = None  # why the two-way champion routes instead
    adr_version: str | None = None  # the champion the `adr` mode reads
    adr_note: str | None = None  # why it has none, or why the last good one serves
    # router family → the version that failed to load: {version, attempts, retry_in_s}
    failed_versions: dict[str, dict[str, Any]] | None = None
    ready: bool | None = None
    answer_ready: bool | None = None
