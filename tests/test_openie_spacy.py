"""The spaCy OpenIE backend: known answers on hand-written 2Wiki-style abstracts, the
protocol (order, count, empty text, determinism) and the parenthetical date reader."""

from __future__ import annotations

import pytest

from r2adapter.data.schema import Extraction, Passage
from r2adapter.index.openie import get_openie, normalize_phrase
from r2adapter.index.openie_spacy import (
    MAX_TRIPLES,
    SpacyOpenIE,
    parenthetical_facts,
    split_parentheticals,
    title_base,
)

pytestmark = pytest.mark.unit  # no Postgres, no server

TEUTBERGA = Passage.of(
    "Teutberga",
    "Teutberga( died 11 November 875) was a queen of Lotharingia by marriage to Lothair II. "
    "She was a daughter of Bosonid Boso the Elder and sister of Hucbert, the lay-abbot of "
    "St. Maurice's Abbey.",
)
LOTHAIR = Passage.of(
    "Lothair II",
    "Lothair II (835 – 8 August 869) was the king of Lotharingia from 855 until his death. "
    "He was the second son of Emperor Lothair I and Ermengarde of Tours. He was married to "
    "Teutberga (died 875), daughter of Boso the Elder.",
)
FILM = Passage.of(
    "Day and Night (2004 Swedish film)",
    "Day and Night is a 2004 Swedish drama film directed by Simon Staho.",
)
PASSIVE = Passage.of(
    "The Tender Years",
    "The Tender Years is a 1948 American drama film. The film was directed by Harold D. "
    "Schuster. It was released on January 3, 1948, by 20th Century Fox.",
)
PLAYER = Passage.of(
    "Vadim Vlasov",
    "Vadim Nikolayevich Vlasov( born 19 December 1980) is a former Russian football player. "
    "He is a younger brother of Dmitri Vlasov.",
)
MOTHER = Passage.of(
    "Lothair II",
    "Lothair II was a Frankish king. His mother was Ermengarde of Tours.",
)
ACTOR = Passage.of(
    "John Smith (actor)",
    "John Smith (1 May 1900 – 2 June 1980) was an English actor. His brother, Peter Smith, "
    "was a painter. Smith was born in Leeds.",
)
ALIAS = Passage.of(
    "Alex da Kid",
    "Alexander Junior Grant (born 7 August 1982), professionally known as Alex da Kid, is a "
    "British record producer. Grant lives in Los Angeles.",
)
CORPUS = [TEUTBERGA, LOTHAIR, FILM, PASSIVE, PLAYER, MOTHER, ACTOR, ALIAS]


@pytest.fixture(scope="module")
def oie() -> SpacyOpenIE:
    return SpacyOpenIE()


@pytest.fixture(scope="module")
def extracted(oie: SpacyOpenIE) -> dict[str, Extraction]:
    out = oie.extract(CORPUS)
    return {p.id: ex for p, ex in zip(CORPUS, out, strict=True)}


def norm(triples: list[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    return {(normalize_phrase(s), r, normalize_phrase(o)) for s, r, o in triples}


def linked(ex: Extraction, subject: str, obj: str) -> list[str]:
    """Relations of the triples joining `subject` to `obj` (normalised)."""
    s, o = normalize_phrase(subject), normalize_phrase(obj)
    return [r for ts, r, to in norm(ex.triples) if ts == s and to == o]


def test_registered_under_spacy() -> None:
    backend = get_openie("spacy")
    assert isinstance(backend, SpacyOpenIE)
    assert backend.name == "spacy"
    assert backend.cache_key().startswith("spacy:")
    custom = SpacyOpenIE(batch_size=8, n_process=1)
    assert (custom.batch_size, custom.n_process) == (8, 1)


def test_teutberga_death_date_and_husband(extracted: dict[str, Extraction]) -> None:
    ex = extracted[TEUTBERGA.id]
    assert linked(ex, "Teutberga", "11 November 875") == ["died"]
    assert linked(ex, "Teutberga", "Lothair II"), ex.triples
    assert any("queen of" in r for r in linked(ex, "Teutberga", "Lotharingia"))
    assert "Teutberga" in ex.entities


def test_pronoun_subject_resolves_to_title(extracted: dict[str, Extraction]) -> None:
    # "She was a daughter of Bosonid Boso the Elder and sister of Hucbert"
    ex = extracted[TEUTBERGA.id]
    assert any("daughter of" in r for r in linked(ex, "Teutberga", "Bosonid Boso the Elder"))
    assert any("sister of" in r for r in linked(ex, "Teutberga", "Hucbert"))
    assert not any(normalize_phrase(s) == "she" for s, _, _ in ex.triples)
    # "He was the second son of Emperor Lothair I and Ermengarde of Tours": both parents,
    # the emperor under his page title "Lothair I" (monarchs' styles dropped).
    lo = extracted[LOTHAIR.id]
    assert any("son of" in r for r in linked(lo, "Lothair II", "Lothair I"))
    assert any("son of" in r for r in linked(lo, "Lothair II", "Ermengarde of Tours"))


def test_lifespan_parenthetical(extracted: dict[str, Extraction]) -> None:
    ex = extracted[LOTHAIR.id]
    assert linked(ex, "Lothair II", "835") == ["born"]
    assert linked(ex, "Lothair II", "8 August 869") == ["died"]
    # A later parenthetical belongs to the name before it, not to the title.
    assert linked(ex, "Teutberga", "875") == ["died"]
    assert not linked(ex, "Lothair II", "875")


def test_spouse_chain_links_the_two_passages(extracted: dict[str, Extraction]) -> None:
    # Lothair II ↔ Teutberga ↔ her father: the hops of "Who is Lothair II's father-in-law?"
    ex = extracted[LOTHAIR.id]
    assert linked(ex, "Lothair II", "Teutberga") == ["married to"]
    assert any("daughter of" in r for r in linked(ex, "Teutberga", "Boso the Elder"))


def test_title_disambiguator_dropped_and_participle(extracted: dict[str, Extraction]) -> None:
    ex = extracted[FILM.id]
    assert linked(ex, "Day and Night", "Simon Staho") == ["directed by"]
    assert "released in" in linked(ex, "Day and Night", "2004")
    assert "is" in linked(ex, "Day and Night", "Swedish")
    assert all(s == "Day and Night" for s, _, _ in ex.triples)


def test_passive_and_the_film(extracted: dict[str, Extraction]) -> None:
    ex = extracted[PASSIVE.id]
    # "The film was directed by Harold D. Schuster": "The film" is the title.
    assert linked(ex, "The Tender Years", "Harold D. Schuster") == ["directed by"]
    assert linked(ex, "The Tender Years", "January 3, 1948") == ["released on"]
    assert linked(ex, "The Tender Years", "20th Century Fox") == ["released by"]


def test_fuller_name_and_brother(extracted: dict[str, Extraction]) -> None:
    ex = extracted[PLAYER.id]
    # The text's "Vadim Nikolayevich Vlasov" is the title entity, not a new node.
    assert linked(ex, "Vadim Vlasov", "19 December 1980") == ["born"]
    assert any("brother of" in r for r in linked(ex, "Vadim Vlasov", "Dmitri Vlasov"))
    assert not any("nikolayevich" in normalize_phrase(s) for s, _, _ in ex.triples)


def test_possessive_relation_noun(extracted: dict[str, Extraction]) -> None:
    ex = extracted[MOTHER.id]
    assert any("mother" in r for r in linked(ex, "Lothair II", "Ermengarde of Tours"))


def test_appositives_and_surname(extracted: dict[str, Extraction]) -> None:
    # "His brother, Peter Smith, was a painter."
    ex = extracted[ACTOR.id]
    assert linked(ex, "John Smith", "Peter Smith") == ["brother"]
    # "Smith was born in Leeds": the surname alone is the title entity.
    assert linked(ex, "John Smith", "Leeds") == ["born in"]
    # "..., sister of Hucbert, the lay-abbot of St. Maurice's Abbey."
    te = extracted[TEUTBERGA.id]
    assert any("abbot of" in r for r in linked(te, "Hucbert", "St. Maurice's Abbey"))


def test_birth_name_is_an_alias_of_the_title(extracted: dict[str, Extraction]) -> None:
    ex = extracted[ALIAS.id]
    assert linked(ex, "Alex da Kid", "Alexander Junior Grant") == ["also known as"]
    assert linked(ex, "Alex da Kid", "7 August 1982") == ["born"]
    # "Grant lives in Los Angeles": the birth name's surname is the title entity too.
    assert linked(ex, "Alex da Kid", "Los Angeles")
    assert all(s == "Alex da Kid" for s, _, _ in ex.triples)


def test_order_count_and_empty(oie: SpacyOpenIE) -> None:
    empty = Passage.of("Nothing", "")
    blank = Passage.of("Blank", "   ")
    batch = [FILM, empty, TEUTBERGA, blank, FILM]
    out = oie.extract(batch)
    assert len(out) == len(batch)
    assert out[1] == Extraction() and out[3] == Extraction()
    assert out[0] == out[4]
    assert any(s == "Teutberga" for s, _, _ in out[2].triples)
    assert all(s == "Day and Night" for s, _, _ in out[0].triples)
    assert oie.extract([]) == []


def test_deterministic_and_well_formed(oie: SpacyOpenIE) -> None:
    first = oie.extract(CORPUS)
    second = SpacyOpenIE(batch_size=2).extract(list(reversed(CORPUS)))[::-1]
    assert first == second
    for ex in first:
        assert len(ex.triples) <= MAX_TRIPLES
        keys = norm(ex.triples)
        assert len(keys) == len(ex.triples)  # no duplicates
        for s, r, o in ex.triples:
            assert normalize_phrase(s) and normalize_phrase(o) and r == r.strip().lower()
            assert normalize_phrase(s) != normalize_phrase(o)
        assert len({normalize_phrase(e) for e in ex.entities}) == len(ex.entities)


def test_triple_cap(oie: SpacyOpenIE) -> None:
    names = [f"Person{chr(65 + i)} Surname{chr(65 + i)}" for i in range(26)]
    text = "Big Film is a 1999 film. " + " ".join(
        f"The film stars {a} and {b}." for a, b in zip(names[::2], names[1::2], strict=True)
    )
    text += " " + " ".join(f"It was shown in City{chr(65 + i)}." for i in range(20))
    (ex,) = oie.extract([Passage.of("Big Film", text)])
    assert len(ex.triples) == MAX_TRIPLES


@pytest.mark.parametrize(
    ("inner", "facts"),
    [
        ("died 11 November 875", [("died", "11 November 875")]),
        (
            "born January 13, 1981 in Iriga, Camarines Sur",
            [("born", "January 13, 1981"), ("born in", "Iriga, Camarines Sur")],
        ),
        ("835 – 8 August 869", [("born", "835"), ("died", "8 August 869")]),
        ("c. 750-818", [("born", "c. 750"), ("died", "818")]),
        ("– 31 January 1758", [("died", "31 January 1758")]),
        (
            "25 March 1836, Moscow – 8 August 1898, Madrid",
            [
                ("born", "25 March 1836"),
                ("born in", "Moscow"),
                ("died", "8 August 1898"),
                ("died in", "Madrid"),
            ],
        ),
        ("née FitzAlan; 1375 – 14 November 1435", [("born", "1375"), ("died", "14 November 1435")]),
        (
            "August 20, 1785April 26, 1865",
            [("born", "August 20, 1785"), ("died", "April 26, 1865")],
        ),
        ("r. 1478-1490", []),
        ("1974", []),
        ("Hesse-Darmstadt", []),
    ],
)
def test_parenthetical_facts(inner: str, facts: list[tuple[str, str]]) -> None:
    assert parenthetical_facts(inner) == facts


def test_split_parentheticals_and_title_base() -> None:
    text, parens = split_parentheticals("Cui Liang (born 20 February 1983) is a player (pivot).")
    assert text == "Cui Liang is a player."
    assert [inner for inner, _ in parens] == ["born 20 February 1983", "pivot"]
    assert parens[0][1] == "Cui Liang"
    assert title_base("Cui Liang (handballer)") == "Cui Liang"
    assert title_base("Maurice, Landgrave of Hesse-Kassel") == "Maurice, Landgrave of Hesse-Kassel"
