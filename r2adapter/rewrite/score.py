"""Score decompositions, not parses (issue 24): a rewriter's triplet chain against a gold
chain of hops.

A gold hop is what the question's chain asks at that step: the entity it starts from (a
name, or a reference to an earlier hop's answer) and the relation asked. Two sources:

- MuSiQue's `question_decomposition`: "Van Hook Township >> located in the administrative
  territorial entity" (a Wikidata head and property) or a sub-question in words ("who
  played susan walker in miracle on 34th street", "#1 >> sibling"); `#k` is hop k's answer;
- hand-checked triplets (r2adapter/rewrite/gold/hotpotqa_dev_triplets.json),
  `[head, relation, tail]`
  with `<...>` for an entity the question does not name and `?` for the one it asks; a
  relation may list alternatives with `|` ("director|directed").

A predicted triplet matches a gold hop when its relation shares a content word with the
hop's relation (a crude stem: the first five letters; a few Wikidata property labels read
as the nouns a question uses, `ALIASES`) and its head is right: a name for a named hop
(its content words found in the hop's entity, or for a sub-question in words, in the
sub-question), a placeholder for a hop that starts from an earlier answer. Predicted and
gold chains are aligned in order (the longest common subsequence of matches), so

- `chain_precision`: matched predicted triplets / predicted triplets (parsed questions),
- `chain_recall`: matched gold hops / gold hops (every question: an unparsed one recalls
  nothing),
- `first_hop_accuracy`: the share of questions whose first named head is the entity the
  gold first hop names (an unparsed question counts as wrong),
- `parse_rate`: the share of questions with any triplet.

The scorer is deliberately lenient about wording and strict about structure: which entity
the chain starts from and which hop asks what.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from r2adapter.rewrite.parse import TARGET, Triplet

STOP = frozenset(
    """a an the of in on at to for from by with and or is was were are be been being which
    what who whom whose where when how that this these those did does do has have had as its
    it his her their name named one same s into than then also there other""".split()
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
}  # fmt: skip
_REF = re.compile(r"#\d+")


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.casefold().replace("'s", ""))


def content(text: str) -> set[str]:
    return {w for w in words(text) if w not in STOP}


def stems(ws: Iterable[str]) -> set[str]:
    return {w[:5] for w in ws}


def _placeholder(entity: str) -> bool:
    return entity.startswith("<") or entity == TARGET


@dataclass(frozen=True)
class GoldHop:
    """One hop of a gold chain: `entity` its named head ("" when it starts from an earlier
    hop's answer); `relation` the words of the relation asked (alternatives joined by `|`);
    `text`: a sub-question in words (MuSiQue), where the head and relation are read."""

    entity: str
    relation: str
    text: str = ""

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


def musique_hops(decomposition: Sequence[dict[str, object]]) -> list[GoldHop]:
    """MuSiQue's `question_decomposition` as gold hops."""
    hops = []
    for step in decomposition:
        q = str(step.get("question", ""))
        if ">>" in q:
            head, _, rel = q.partition(">>")
            head = head.strip()
            hops.append(GoldHop("" if _REF.fullmatch(head) else head, rel.strip()))
        else:
            hops.append(GoldHop("", _REF.sub(" ", q), q))
    return hops


def triplet_hops(triplets: Sequence[Sequence[str]]) -> list[GoldHop]:
    """Hand-checked `[head, relation, tail]` triplets as gold hops."""
    return [GoldHop("" if _placeholder(h) else h, r) for h, r, _ in triplets]


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


def relation_matches(relation: str, hop: GoldHop) -> bool:
    want = hop.relation_words()
    if hop.text:  # a sub-question in words: its words less the entity it names
        want = want - content(hop.entity)
    got = content(relation) | set(ALIASES.get(relation.casefold().strip(), ()))
    return bool(stems(got) & stems(want))


def triplet_matches(t: Triplet, hop: GoldHop, first: bool) -> bool:
    """Relation right, and the head right: a named head must name the hop's entity; a
    placeholder head is right for a hop that starts from an earlier answer. On a hop in
    words that names an entity and refers to an earlier one, either head passes."""
    head, rel, _ = t
    if not relation_matches(rel, hop):
        return False
    if hop.text and _REF.search(hop.text):
        return _placeholder(head) or head_matches(head, GoldHop("", "", _REF.sub(" ", hop.text)))
    return head_matches(head, hop)


def align(pred: Sequence[Triplet], gold: Sequence[GoldHop]) -> int:
    """The most matches of an in-order alignment (longest common subsequence)."""
    n, m = len(pred), len(gold)
    dp = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n):
        for j in range(m):
            hit = 1 if triplet_matches(pred[i], gold[j], j == 0) else 0
            dp[i + 1][j + 1] = max(dp[i][j + 1], dp[i + 1][j], dp[i][j] + hit)
    return dp[n][m]


def first_hop_right(pred: Sequence[Triplet], gold: Sequence[GoldHop]) -> bool:
    """The chain's first named head is an entity a first hop names (a comparison has one
    first hop per entity: every gold hop named before the first placeholder hop)."""
    head = next((h for h, _, _ in pred if not _placeholder(h)), None)
    if head is None:
        return False
    firsts = [g for g in gold if g.named]
    if gold and not gold[0].named:
        return False
    # the first hops: the named ones up to the first hop that starts from an answer
    lead: list[GoldHop] = []
    for g in gold:
        if not g.named:
            break
        lead.append(g)
    return any(head_matches(head, g) for g in (lead or firsts[:1]))


@dataclass
class ChainScore:
    n: int = 0
    parsed: int = 0
    first_hop: int = 0
    predicted: int = 0
    gold: int = 0
    matched_pred: int = 0
    matched_gold: int = 0

    def add(self, pred: Sequence[Triplet], gold: Sequence[GoldHop]) -> None:
        self.n += 1
        self.gold += len(gold)
        if not pred:
            return
        self.parsed += 1
        self.predicted += len(pred)
        hits = align(pred, gold)
        self.matched_pred += hits
        self.matched_gold += hits
        self.first_hop += int(first_hop_right(pred, gold))

    def summary(self) -> dict[str, float | int]:
        return {
            "n_scored": self.n,
            "parse_rate": self.parsed / self.n if self.n else 0.0,
            "first_hop_accuracy": self.first_hop / self.n if self.n else 0.0,
            "chain_precision": self.matched_pred / self.predicted if self.predicted else 0.0,
            "chain_recall": self.matched_gold / self.gold if self.gold else 0.0,
        }
