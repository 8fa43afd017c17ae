"""Score decompositions, not parses (issues 24 and 40): a rewriter's triplet chain against a
gold chain of hops.

A gold hop is what the question's chain asks at that step: the entity it starts from (a
name, or a reference to an earlier hop's answer) and the relation asked. Three sources:

- MuSiQue's `question_decomposition`: "Van Hook Township >> located in the administrative
  territorial entity" (a Wikidata head and property) or a sub-question in words ("who
  played susan walker in miracle on 34th street", "#1 >> sibling"); `#k` is hop k's answer;
- 2WikiMultihopQA's `evidence`: `[subject, property, object]` triples; a subject that is an
  earlier triple's object is an earlier hop's answer;
- hand-checked triplets (r2adapter/rewrite/gold/hotpotqa_dev_triplets.json),
  `[head, relation, tail]`
  with `<...>` for an entity the question does not name and `?` for the one it asks; a
  relation may list alternatives with `|` ("director|directed").

**The gold relation words** of a hop are only the words that say what it asks: for a
Wikidata hop the property and the words questions use for it (`ALIASES`); for a
hand-checked triplet its relation and `|` alternatives; for a sub-question in words, its
words less its entity (the `#k` reference, and the words that are names: capitalised in the
sub-question or in the question past their first word) and less question and stop words
(`STOP`). So "who played susan walker in miracle on 34th street" asks "played street", not
"susan walker".

A predicted triplet matches a gold hop when

- its relation shares a content word with the hop's relation words (a crude stem: the first
  five letters; a predicted relation that is a listed property label also brings its
  `ALIASES`),
- its relation is not an echo of the question (`echoes`): it holds more than `COPY_SHARE` of
  the question's relation words (its content words less the names) and some of those are not
  the hop's own relation words. A relation that copies the question holds every hop's words,
  so a stem shared with any hop is no evidence that it decomposes anything; a relation that
  holds only its own hop's words ("place of birth" in "What is the place of birth of the
  director of X?") is not an echo however much of a short question it covers,
- and its head is right: a name for a named hop (its content words found in the hop's
  entity, or for a sub-question in words, in the sub-question), a placeholder for a hop that
  starts from an earlier answer.

Predicted and gold chains are aligned in order (the longest common subsequence of
matches), so

- `chain_precision`: matched predicted triplets / predicted triplets (parsed questions),
- `chain_recall`: matched gold hops / gold hops (every question: an unparsed one recalls
  nothing),
- `first_hop_accuracy`: the share of questions whose first triplet with a named head matches
  a first gold hop, relation included (an unparsed question counts as wrong);
  `first_head_accuracy` is the head alone (issue 24's first-hop figure, which a rewriter
  that only finds the first name scores as well as one that decomposes),
- `parse_rate`: the share of questions with any triplet.

The scorer is deliberately lenient about wording and strict about structure: which entity
the chain starts from, which hop asks what, and that a hop asks one thing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from r2adapter.rewrite.parse import TARGET, Triplet

STOP = frozenset(
    """a an the of in on at to for from by with and or is was were are be been being which
    what who whom whose where when how that this these those did does do has have had as its
    it his her their name named one same s into than then also there other why""".split()
)
# Wikidata property labels (MuSiQue's "X >> property") and the words questions use for them
ALIASES: dict[str, tuple[str, ...]] = {
    "located in the administrative territorial entity": ("located", "county", "state", "where",
                                                         "province", "region", "city", "in"),
    "country": ("country", "nation", "located"),
    "capital": ("capital", "seat"),
    "capital of": ("capital", "seat"),
    "country of citizenship": ("nationality", "citizen", "country"),
    "place of birth": ("born", "birthplace", "birth"),
    "date of birth": ("born", "birth"),
    "place of death": ("died", "death"),
    "date of death": ("died", "death"),
    "spouse": ("wife", "husband", "spouse", "married"),
    "sibling": ("brother", "sister", "sibling"),
    "performer": ("performer", "singer", "sang", "sings", "artist", "band", "performed"),
    "author": ("author", "wrote", "writer", "written"),
    "creator": ("creator", "created", "made"),
    "producer": ("producer", "produced"),
    "record label": ("label", "record"),
    "headquarters location": ("headquarters", "headquartered", "based"),
    "location": ("location", "located", "where", "venue", "place", "held"),
    "part of": ("part", "member"),
    "member of": ("member", "part", "belonged"),
    "employer": ("employer", "worked", "works"),
    "educated at": ("educated", "studied", "attended", "school", "university", "college"),
    "father": ("father", "dad"),
    "mother": ("mother", "mom"),
    "child": ("child", "son", "daughter"),
    "director": ("director", "directed"),
    "composer": ("composer", "composed"),
    "cast member": ("cast", "actor", "actress", "starred", "played"),
    "located on terrain feature": ("island", "located", "terrain", "mountain"),
    # the other properties of MuSiQue's and 2Wiki's gold hops, by their meaning
    "publication date": ("released", "release", "published", "premiered"),
    "country of origin": ("country", "origin", "nationality"),
    "place of burial": ("buried", "burial", "grave"),
    "inception": ("founded", "established", "formed", "created"),
    "award received": ("award", "awarded", "won", "prize"),
    "cause of death": ("died", "death", "cause"),
    "founded by": ("founder", "founded"),
    "publisher": ("publisher", "published"),
    "place of detention": ("imprisoned", "detained", "prison"),
    "editor": ("editor", "edited"),
    "shares border with": ("border", "borders", "bordering", "adjacent", "neighbouring",
                           "neighboring"),
    "owned by": ("owner", "owns", "owned"),
    "member of sports team": ("team", "played", "plays", "club"),
    "member of political party": ("party", "member"),
    "named after": ("namesake", "honor", "honour"),
    "work location": ("worked", "works", "work"),
    "screenwriter": ("screenwriter", "wrote", "writer", "screenplay"),
    "manufacturer": ("manufacturer", "made", "manufactured", "maker"),
    "position held": ("position", "office", "held"),
    "followed by": ("followed", "succeeded", "next"),
    "crosses": ("crosses", "crossed", "spans"),
    "location of formation": ("formed", "founded", "origin"),
    "contains administrative territorial entity": ("contains", "includes"),
    "licensed to broadcast to": ("licensed", "broadcast", "serves"),
}  # fmt: skip
# A relation holding more than this share of the question's relation words, some of them
# not its hop's, echoes the question (`echoes`). In a chain of two or more hops one hop's
# relation holds about half of them or fewer; a relation past half of them carries words of
# another hop, so it asks more than one thing.
COPY_SHARE = 0.5
_REF = re.compile(r"#\d+")
_OPENERS = "\"'“‘(["


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.casefold().replace("'s", "").replace("’s", ""))


def content(text: str) -> set[str]:
    return {w for w in words(text) if w not in STOP}


def stems(ws: Iterable[str]) -> set[str]:
    return {w[:5] for w in ws}


def named_words(text: str) -> set[str]:
    """The words of a text's names: of every token past the first that starts with a capital
    or a digit ("Who played Susan Walker in Miracle on 34th street" → susan, walker, miracle,
    34th)."""
    out: set[str] = set()
    for tok in _REF.sub(" ", text).split()[1:]:
        tok = tok.lstrip(_OPENERS)
        if tok[:1].isupper() or tok[:1].isdigit():
            out.update(words(tok))
    return out


def _placeholder(entity: str) -> bool:
    return entity.startswith("<") or entity == TARGET


@dataclass(frozen=True)
class GoldHop:
    """One hop of a gold chain: `entity` its named head ("" when it starts from an earlier
    hop's answer, and for a sub-question in words); `relation` the words of the relation
    asked (alternatives joined by `|`); `text`: a sub-question in words (MuSiQue), where the
    head is read; `names`: the words of a sub-question in words that name things."""

    entity: str
    relation: str
    text: str = ""
    names: frozenset[str] = frozenset()

    @property
    def named(self) -> bool:
        return bool(self.entity or (self.text and not _REF.search(self.text)))

    def relation_words(self) -> set[str]:
        out: set[str] = set()
        for alt in self.relation.split("|"):
            alt = alt.strip().casefold()
            out |= content(alt)
            out |= set(ALIASES.get(alt, ()))
        return out


@dataclass(frozen=True)
class GoldChain:
    """A question and its gold hops. `names`: the words of the question's names (its
    capitalised words and every gold entity's); `asked`: the stems of the question's
    relation words, its content words less the names (what an echo copies)."""

    question: str
    hops: tuple[GoldHop, ...]

    @cached_property
    def names(self) -> set[str]:
        out = named_words(self.question)
        for h in self.hops:
            out |= set(words(h.entity)) | h.names
        return out

    @cached_property
    def asked(self) -> set[str]:
        return stems(content(self.question) - self.names)

    def echoes(self, relation: str, hop: GoldHop) -> bool:
        """The relation holds more than COPY_SHARE of the question's relation words, and
        some of them are not the hop's own."""
        held = stems(content(relation)) & self.asked
        return len(held) > COPY_SHARE * len(self.asked) and not held <= stems(hop.relation_words())


def musique_hops(decomposition: Sequence[Mapping[str, object]], question: str = "") -> GoldChain:
    """MuSiQue's `question_decomposition` as a gold chain; a sub-question in words keeps as
    its relation its words less its entity (the `#k` reference and the words that are names
    in it or in the `question`) and less question and stop words."""
    q_names = named_words(question)
    hops = []
    for step in decomposition:
        q = str(step.get("question", ""))
        if ">>" in q:
            head, _, rel = q.partition(">>")
            head = head.strip()
            hops.append(GoldHop("" if _REF.fullmatch(head) else head, rel.strip()))
        else:
            text = _REF.sub(" ", q)
            names = named_words(text) | (set(words(text)) & q_names)
            rel = " ".join(w for w in words(text) if w not in names and w not in STOP)
            hops.append(GoldHop("", rel, q, frozenset(names)))
    return GoldChain(question, tuple(hops))


def triplet_hops(triplets: Sequence[Sequence[str]], question: str = "") -> GoldChain:
    """Hand-checked `[head, relation, tail]` triplets as a gold chain."""
    hops = tuple(GoldHop("" if _placeholder(h) else h, r) for h, r, _ in triplets)
    return GoldChain(question, hops)


def evidence_hops(evidence: Sequence[Sequence[str]], question: str = "") -> GoldChain:
    """2WikiMultihopQA's `evidence` triples as a gold chain: a triple whose subject is an
    earlier triple's object starts from that hop's answer."""
    answers: set[str] = set()
    hops = []
    for subject, prop, obj in evidence:
        hops.append(GoldHop("" if subject.casefold() in answers else subject, prop))
        answers.add(obj.casefold())
    return GoldChain(question, tuple(hops))


def head_matches(head: str, hop: GoldHop) -> bool:
    """The predicted head names the hop's entity (a placeholder: the hop starts from an
    earlier answer)."""
    if _placeholder(head):
        return not hop.named
    if not hop.named:
        return False
    got = content(head)
    if not got:
        return False
    if hop.entity:
        want = content(hop.entity)
        inter = len(got & want)
        return inter >= 0.5 * len(got) and inter >= 0.5 * len(want)
    return got <= content(hop.text)  # a sub-question in words: the head is named in it


def relation_matches(relation: str, hop: GoldHop, chain: GoldChain) -> bool:
    """The relation shares a stem with the hop's relation words and does not echo the
    chain's question."""
    got = content(relation) | set(ALIASES.get(relation.casefold().strip(), ()))
    if not stems(got) & stems(hop.relation_words()):
        return False
    return not chain.echoes(relation, hop)


def triplet_matches(t: Triplet, hop: GoldHop, chain: GoldChain) -> bool:
    """Relation right, and the head right: a named head must name the hop's entity; a
    placeholder head is right for a hop that starts from an earlier answer. On a hop in
    words that names an entity and refers to an earlier one, either head passes."""
    head, rel, _ = t
    if not relation_matches(rel, hop, chain):
        return False
    if hop.text and _REF.search(hop.text):
        return _placeholder(head) or head_matches(head, GoldHop("", "", _REF.sub(" ", hop.text)))
    return head_matches(head, hop)


def align(pred: Sequence[Triplet], chain: GoldChain) -> int:
    """The most matches of an in-order alignment (longest common subsequence)."""
    gold = chain.hops
    n, m = len(pred), len(gold)
    dp = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n):
        for j in range(m):
            hit = 1 if triplet_matches(pred[i], gold[j], chain) else 0
            dp[i + 1][j + 1] = max(dp[i][j + 1], dp[i + 1][j], dp[i][j] + hit)
    return dp[n][m]


def _first_hops(gold: Sequence[GoldHop]) -> list[GoldHop]:
    """The hops a chain may start from: every named hop before the first one that starts
    from an answer (a comparison has one per entity); none when the chain starts from one."""
    lead: list[GoldHop] = []
    for g in gold:
        if not g.named:
            break
        lead.append(g)
    return lead


def first_head_right(pred: Sequence[Triplet], chain: GoldChain) -> bool:
    """The chain's first named head is an entity a first hop names (issue 24's first hop)."""
    head = next((h for h, _, _ in pred if not _placeholder(h)), None)
    return head is not None and any(head_matches(head, g) for g in _first_hops(chain.hops))


def first_hop_right(pred: Sequence[Triplet], chain: GoldChain) -> bool:
    """The chain's first triplet with a named head matches a first hop: head and relation."""
    first = next((t for t in pred if not _placeholder(t[0])), None)
    return first is not None and any(
        triplet_matches(first, g, chain) for g in _first_hops(chain.hops)
    )


@dataclass(frozen=True)
class QueryScore:
    """One question's figures: the per-query rows behind ChainScore's sums (the paired
    bootstrap resamples them)."""

    parsed: int
    first_hop: int
    first_head: int
    predicted: int
    matched: int
    gold: int


def score_chain(pred: Sequence[Triplet], chain: GoldChain) -> QueryScore:
    if not pred:
        return QueryScore(0, 0, 0, 0, 0, len(chain.hops))
    return QueryScore(
        1,
        int(first_hop_right(pred, chain)),
        int(first_head_right(pred, chain)),
        len(pred),
        align(pred, chain),
        len(chain.hops),
    )


@dataclass
class ChainScore:
    rows: list[QueryScore] = field(default_factory=list)

    def add(self, pred: Sequence[Triplet], chain: GoldChain) -> QueryScore:
        row = score_chain(pred, chain)
        self.rows.append(row)
        return row

    def summary(self) -> dict[str, float | int]:
        n = len(self.rows)

        def total(key: str) -> int:
            return sum(getattr(r, key) for r in self.rows)

        predicted, gold = total("predicted"), total("gold")
        return {
            "n_scored": n,
            "parse_rate": total("parsed") / n if n else 0.0,
            "first_hop_accuracy": total("first_hop") / n if n else 0.0,
            "first_head_accuracy": total("first_head") / n if n else 0.0,
            "chain_precision": total("matched") / predicted if predicted else 0.0,
            "chain_recall": total("matched") / gold if gold else 0.0,
        }
