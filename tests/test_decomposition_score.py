"""Issue 40 item 5: decomposition scored as decomposition. A relation is judged against the
gold relation words only and a relation that echoes the question is no match; the echo
baselines; the paired report and `r2a evaluate decomposition`. No Postgres."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from r2adapter.evaluate.stats import ratio_difference
from r2adapter.rewrite.echo import echo1, echo2
from r2adapter.rewrite.score import (
    COPY_SHARE,
    ChainScore,
    GoldHop,
    evidence_hops,
    first_head_right,
    first_hop_right,
    musique_hops,
    relation_matches,
    triplet_hops,
)

pytestmark = pytest.mark.unit

SEAT = "What is the seat of the county where Van Hook Township is located?"
SEAT_GOLD = [
    {"question": "Van Hook Township >> located in the administrative territorial entity"},
    {"question": "#1 >> capital"},
]
SISTER = "Who is the sibling of the actress who played Susan Walker in Miracle on 34th street?"
SISTER_GOLD = [
    {"question": "who played susan walker in miracle on 34th street"},
    {"question": "#1 >> sibling"},
]


def summary(pred: list[tuple[str, str, str]], chain: object) -> dict[str, float | int]:
    s = ChainScore()
    s.add(pred, chain)  # type: ignore[arg-type]
    return s.summary()


def test_the_echo_trick_scores_nothing() -> None:
    # issue 24's scorer matched this triplet to both hops' stems ("county", "locat") and
    # called its head the first hop: precision 1.0, first hop right
    chain = musique_hops(SEAT_GOLD, SEAT)
    echo = [("Van Hook Township", "What is the seat of the county where is located", "?")]
    s = summary(echo, chain)
    assert s["chain_precision"] == 0.0 and s["chain_recall"] == 0.0
    assert s["first_hop_accuracy"] == 0.0
    assert s["first_head_accuracy"] == 1.0  # the head alone is right: that is all it finds
    assert chain.echoes(echo[0][1], chain.hops[0])
    # a sub-question in words: the echo holds "played" but also every other hop's words
    words = musique_hops(SISTER_GOLD, SISTER)
    assert echo1(SISTER) == [
        (
            "Susan Walker",
            "Who is the sibling of the actress who played in Miracle on 34th street",
            "?",
        )
    ]
    assert summary(echo1(SISTER), words)["chain_precision"] == 0.0


def test_a_genuine_decomposition_scores_one() -> None:
    chain = musique_hops(SEAT_GOLD, SEAT)
    right = [
        ("Van Hook Township", "county", "<county of Van Hook Township>"),
        ("<county of Van Hook Township>", "seat", "?"),
    ]
    s = summary(right, chain)
    assert s["chain_precision"] == s["chain_recall"] == s["first_hop_accuracy"] == 1.0
    # the hops swapped: the alignment is in order, and the first triplet's relation is
    # the second hop's
    swapped = [("Van Hook Township", "seat", "<x>"), ("<x>", "county", "?")]
    assert summary(swapped, chain)["first_hop_accuracy"] == 0.0
    assert summary(swapped, chain)["chain_precision"] == 0.0


def test_a_relation_holding_only_its_own_hops_words_is_not_an_echo() -> None:
    # "place of birth" holds 2 of the question's 3 relation words, all of them its hop's
    q = "What is the place of birth of the director of film Polish Easter?"
    chain = evidence_hops(
        [["Polish Easter", "director", "Jakub Skoczeń"], ["Jakub Skoczeń", "place of birth", "Y"]],
        q,
    )
    assert len(chain.asked) == 4  # place, birth, director, film
    pred = [
        ("Polish Easter", "director", "<director of Polish Easter>"),
        ("<director of Polish Easter>", "place of birth", "?"),
    ]
    assert summary(pred, chain)["chain_precision"] == 1.0
    # more than COPY_SHARE of them, some another hop's: an echo, though it shares "director"
    copied = "place of birth of the director"
    held = 3 / len(chain.asked)
    assert held > COPY_SHARE and not relation_matches(copied, chain.hops[0], chain)
    # a small relation with a word beyond its hop's still matches (wording is free)
    assert relation_matches("film director", chain.hops[0], chain)


def test_gold_relation_words_leave_out_the_entity_and_question_words() -> None:
    chain = musique_hops(SISTER_GOLD, SISTER)
    hop = chain.hops[0]
    # "susan walker", "miracle", "34th" are names (capitalised in the question); who, in,
    # on are question and stop words
    assert hop.relation == "played street" and hop.named
    assert relation_matches("played in Miracle on 34th street", hop, chain)
    assert not relation_matches("Susan Walker", hop, chain)  # the entity is not a relation
    assert not relation_matches("who", hop, chain)


def test_k_references() -> None:
    q = "What event caused the Liberal Party of Australia's longest-serving leader to become PM?"
    chain = musique_hops(
        [
            {"question": "Who was the Liberal Party of Australia's longest-serving leader?"},
            {"question": "What event caused #1 to become PM?"},
        ],
        q,
    )
    first, second = chain.hops
    assert first.relation == "longest serving leader" and first.named
    assert second.relation == "event caused become" and not second.named
    pred = [
        ("Liberal Party of Australia", "longest-serving leader", "<leader>"),
        ("<leader>", "event caused", "?"),
    ]
    assert summary(pred, chain)["chain_precision"] == 1.0
    # a Wikidata hop from #1 needs a placeholder head; a name there is wrong
    seat = musique_hops(SEAT_GOLD, SEAT)
    assert summary([("Van Hook Township", "county", "<c>"), ("County", "seat", "?")], seat)[
        "chain_recall"
    ] == pytest.approx(0.5)


def test_placeholders() -> None:
    chain = triplet_hops(
        [["Oxford Movement", "opposed by|opponent", "<clergyman>"], ["<clergyman>", "wrote", "?"]],
        "The Church of England's Oxford Movement was opposed by a clergyman who wrote what?",
    )
    # a placeholder head on the named first hop is wrong, as is a name on the second
    assert (
        summary([("<x>", "opponent", "<y>"), ("Oxford Movement", "wrote", "?")], chain)[
            "chain_precision"
        ]
        == 0.0
    )
    assert not first_hop_right([("<x>", "opponent", "?")], chain)
    assert first_head_right([("<x>", "opponent", "<y>"), ("Oxford Movement", "x", "?")], chain)


def test_alternatives() -> None:
    chain = triplet_hops([["X", "director|directed", "?"]], "Who directed X?")
    hop = chain.hops[0]
    assert relation_matches("directed", hop, chain)
    assert relation_matches("director", hop, chain)
    assert not relation_matches("produced", hop, chain)
    born = triplet_hops([["Y", "born|date of birth", "?"]], "When was Y born?")
    assert relation_matches("date of birth", born.hops[0], born)
    # a listed property label brings the words questions use for it
    prop = evidence_hops([["Z", "place of birth", "P"]], "Where was Z born?")
    assert relation_matches("born", prop.hops[0], prop)
    assert GoldHop("X", "spouse").relation_words() >= {"wife", "husband"}


def test_evidence_chains_start_from_earlier_answers() -> None:
    chain = evidence_hops(
        [
            ["God's Gift to Women", "director", "Michael Curtiz"],
            ["Aldri annet enn bråk", "director", "Edith Carlmar"],
            ["Michael Curtiz", "date of birth", "1886"],
            ["Edith Carlmar", "date of birth", "1911"],
        ]
    )
    assert [h.named for h in chain.hops] == [True, True, False, False]


def test_echo_baselines() -> None:
    two = echo2(SEAT)
    # the rest's relation words (seat, county, located) cut after the first half's last;
    # the name sits in the second half, so it is hop 1
    assert two == [
        ("Van Hook Township", "where is located", "<where is located of Van Hook Township>"),
        ("<where is located of Van Hook Township>", "What is the seat of the county", "?"),
    ]
    s = summary(two, musique_hops(SEAT_GOLD, SEAT))
    assert s["chain_precision"] == 0.5  # "seat of the county" holds 2 of 3, one not the hop's
    bansaan = echo2("The territory containing Bansaan Island is located at which island?")
    assert [t[1] for t in bansaan] == ["The territory containing", "is located at which island"]
    assert echo2("When was Z born?") == echo1("When was Z born?")  # one relation word
    assert echo1("what is the best way to cook rice") == []  # no name: unparsed


def test_ratio_difference_by_hand() -> None:
    # a: 3/4 and 1/4 pooled 4/8; b: 1/2 and 1/2 pooled 2/4
    r = ratio_difference([3, 1], [4, 4], [1, 1], [2, 2])
    assert r["diff"] == pytest.approx(0.0)
    r = ratio_difference([2, 2], [2, 2], [1, 1], [2, 2])
    assert r["diff"] == pytest.approx(0.5) and r["ci95"] == pytest.approx([0.5, 0.5])
    rng = np.random.default_rng(1)
    den = rng.integers(1, 4, 300)
    num_a = rng.binomial(den, 0.7)
    num_b = rng.binomial(den, 0.5)
    r = ratio_difference(num_a, den, num_b, den)
    assert r["diff"] == pytest.approx(num_a.sum() / den.sum() - num_b.sum() / den.sum())
    lo, hi = r["ci95"]
    assert 0.1 < lo < r["diff"] < hi < 0.3
    with pytest.raises(ValueError):
        ratio_difference([1], [1, 2], [1], [1])


def _musique_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny"
    folder.mkdir()
    rows = [
        {"id": "a", "question": SEAT, "question_decomposition": SEAT_GOLD},
        {"id": "b", "question": SISTER, "question_decomposition": SISTER_GOLD},
        {"id": "c", "question": "Who is X?"},  # no gold: not scored
    ]
    (folder / "tiny.json").write_text(json.dumps(rows))
    return folder


def test_evaluate_decomposition_without_an_index(tmp_path: Path) -> None:
    from r2adapter.evaluate.decomposition import evaluate_decomposition, evaluate_decompositions
    from r2adapter.rewrite import Rewriter

    folder = _musique_folder(tmp_path)
    r = evaluate_decomposition(str(folder), Rewriter(backend="structural", min_confidence=0.0))
    assert r["gold_source"] == "question_decomposition" and r["n_gold"] == 2
    assert list(r["systems"]) == ["structural", "echo1", "echo2"]
    assert r["systems"]["echo1"]["chain_precision"] == 0.0
    for metric, p in r["paired"].items():
        assert p["against"] in ("echo1", "echo2")
        best = max(r["systems"]["echo1"][metric], r["systems"]["echo2"][metric])
        assert p["diff"] == pytest.approx(r["systems"]["structural"][metric] - best)
        assert p["ci95"][0] <= p["diff"] <= p["ci95"][1]
    assert all(v["parse_rate"] == 1.0 for v in r["parsed_by_all"].values())
    both = evaluate_decompositions([str(folder)])
    assert both["copy_share"] == COPY_SHARE and list(both["corpora"]) == [str(folder)]


def test_cli_table_and_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from r2adapter.cli import main

    folder = _musique_folder(tmp_path)
    out = tmp_path / "dec.json"
    assert main(["evaluate", "decomposition", "--dataset", str(folder), "--report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "echo2" in text and "- better" in text
    saved = json.loads(out.read_text())
    assert saved["corpora"][str(folder)]["n_gold"] == 2
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "bare.json").write_text(json.dumps([{"id": "x", "question": "Who is X?"}]))
    assert main(["evaluate", "decomposition", "--dataset", str(bare)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: dataset") and "no gold decompositions" in err
    assert len(err.splitlines()) == 1
