"""Known-answer tests for the router's pure parts: labels, split, focal loss, τ search."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from r2adapter.config import router_params
from r2adapter.data.splits import split_of
from r2adapter.errors import R2AError
from r2adapter.label.rules import avg_rank_rule, recall_first_rule, topk_first_rule
from r2adapter.route.decision import decide
from r2adapter.route.loss import focal_bce
from r2adapter.route.threshold import f1_recall, search_threshold

pytestmark = pytest.mark.unit  # no Postgres, no server


def test_avg_rank_rule_and_preference() -> None:
    gold = ["a", "b"]
    lab = avg_rank_rule(["a", "x", "b"], ["b", "a"], gold, depth=200)
    assert (lab.rank_dense, lab.rank_graph) == (2.0, 1.5)
    assert (lab.y_dense, lab.y_graph, lab.preference) == (False, True, "graph")
    tie = avg_rank_rule(["a", "b"], ["b", "a"], gold)
    assert (tie.y_dense, tie.y_graph, tie.preference) == (True, True, "dense")  # dense wins ties
    missing = avg_rank_rule(["a"], ["a", "b"], gold, depth=10)
    assert missing.rank_dense == (1 + 11) / 2 and missing.preference == "graph"


def test_topk_first_rule_prefers_full_chain_in_top_k() -> None:
    gold = ["a", "b"]
    dense = ["a", "x1", "x2", "x3", "x4", "x5", "b"]  # avg rank 4, b outside the top 5
    graph = ["x1", "x2", "x3", "a", "b"]  # avg rank 4.5, both inside the top 5
    assert avg_rank_rule(dense, graph, gold).preference == "dense"
    lab = topk_first_rule(dense, graph, gold, top_k=5)
    assert (lab.y_dense, lab.y_graph, lab.preference) == (False, True, "graph")
    # neither has the chain in the top k: the average rank decides
    assert topk_first_rule(["a"] + ["x"] * 9, ["x"] * 9 + ["a"], gold, top_k=2).preference == (
        "dense"
    )


def test_recall_first_rule_prefers_graph_only_for_more_gold_in_top_k() -> None:
    gold = ["a", "b"]
    # both find both gold passages in the top 5; graph ranks them higher, dense still wins
    lab = recall_first_rule(["x1", "x2", "a", "b"], ["a", "b"], gold, top_k=5)
    assert (lab.y_dense, lab.y_graph, lab.preference) == (True, True, "dense")
    assert topk_first_rule(["x1", "x2", "a", "b"], ["a", "b"], gold).preference == "graph"
    # graph finds one more gold passage in the top 5
    more = recall_first_rule(["a"] + ["x"] * 9, ["b", "a"], gold, top_k=5)
    assert (more.y_dense, more.y_graph, more.preference) == (False, True, "graph")
    # dense finds more: graph is not suitable
    less = recall_first_rule(["a", "b"], ["a"], gold, top_k=5)
    assert (less.y_dense, less.y_graph, less.preference) == (True, False, "dense")


def test_split_is_deterministic_and_8_1_1() -> None:
    ids = [f"q{i}" for i in range(20000)]
    splits = [split_of(i) for i in ids]
    assert splits == [split_of(i) for i in ids]
    frac = {s: splits.count(s) / len(ids) for s in ("train", "val", "test")}
    assert frac["train"] == pytest.approx(0.8, abs=0.01)
    assert frac["val"] == pytest.approx(0.1, abs=0.01) and frac["test"] == pytest.approx(
        0.1, abs=0.01
    )


def test_focal_loss_against_hand_computation() -> None:
    probs = torch.tensor([[0.9, 0.2]])
    y = torch.tensor([[1.0, 1.0]])
    # k = dense: p_t = 0.9, α_t = 0.25; k = graph: p_t = 0.2, α_t = 0.25
    l_d = 0.25 * (1 - 0.9) ** 2 * -math.log(0.9)
    l_g = 0.25 * (1 - 0.2) ** 2 * -math.log(0.2)
    assert focal_bce(probs, y).item() == pytest.approx((l_d + l_g) / 2, rel=1e-5)
    neg = focal_bce(torch.tensor([[0.3, 0.3]]), torch.tensor([[0.0, 0.0]]))
    assert neg.item() == pytest.approx(0.75 * 0.3**2 * -math.log(0.7), rel=1e-5)
    # γ = 0, α = 0.5 is half the plain BCE
    bce = torch.nn.functional.binary_cross_entropy(probs, y)
    assert focal_bce(probs, y, alpha=0.5, gamma=0.0).item() == pytest.approx(
        0.5 * bce.item(), rel=1e-5
    )


def test_threshold_search_on_crafted_scores() -> None:
    # margins p_g − p_d: graph-preferred queries at 0.31 and 0.45, dense ones at 0.05 and 0.2
    p_dense = np.array([0.2, 0.1, 0.5, 0.4])
    p_graph = np.array([0.51, 0.55, 0.55, 0.6])
    truth = np.array([True, True, False, False])
    s = search_threshold(p_dense, p_graph, truth, 0.0, 0.5, 0.02)
    assert len(s.taus) == 26 and s.taus[-1] == pytest.approx(0.5)
    assert s.best_tau == pytest.approx(0.20)  # first τ that drops both dense queries
    assert s.best_score == pytest.approx(1.0)
    assert s.scores[0] == pytest.approx((2 / 3 + 1.0) / 2)  # τ = 0: all graph, P = .5, R = 1
    assert list(decide(p_dense, p_graph, 0.3).graph) == [True, True, False, False]
    assert f1_recall(np.array([True, False]), np.array([False, False])) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        search_threshold(p_dense, p_graph, truth, step=0)


def test_threshold_search_under_a_graph_budget() -> None:
    # margins .31 .45 (graph) and .05 .20 (dense); unconstrained best τ = .20 sends half
    p_dense = np.array([0.2, 0.1, 0.5, 0.4])
    p_graph = np.array([0.51, 0.55, 0.55, 0.6])
    truth = np.array([True, True, False, False])
    free = search_threshold(p_dense, p_graph, truth, 0.0, 0.5, 0.02)
    assert free.usage[0] == 1.0 and free.usage[-1] == 0.0
    capped = search_threshold(p_dense, p_graph, truth, 0.0, 0.5, 0.02, max_usage=0.25)
    assert capped.best_tau == pytest.approx(0.32)  # only the .45 query still goes to graph
    assert capped.usage[np.flatnonzero(capped.taus == capped.best_tau)[0]] == 0.25
    assert capped.best_score == pytest.approx((2 / 3 + 0.5) / 2)
    # a budget no τ in the range meets: the most frugal τ (the first of them)
    tight = search_threshold(p_dense, p_graph, truth, 0.0, 0.3, 0.02, max_usage=0.1)
    assert tight.best_tau == pytest.approx(0.2) and tight.usage.min() == 0.5


def test_router_params_validation() -> None:
    assert router_params("embedding").backbone == "embedding"
    with pytest.raises(R2AError, match="epochs"):
        router_params(epochs=-1)
    with pytest.raises(R2AError, match="tau_step"):
        router_params(tau_step=0)
    with pytest.raises(R2AError, match="max_graph_usage"):
        router_params(max_graph_usage=0)
    with pytest.raises(R2AError, match="unknown routing feature"):
        router_params(features=["title_cover", "bogus"])
    with pytest.raises(R2AError, match="runtime must be"):
        router_params(runtime="tensorrt")
    assert router_params(features=["title_cover"]).features == ("title_cover",)


def test_promotion_gate() -> None:
    from r2adapter.registry.models import Gate

    champ = {"recall@5": 0.70, "f1_graph": 0.60, "graph_usage": 0.50}
    ok, _ = Gate().check({"recall@5": 0.698, "f1_graph": 0.60, "graph_usage": 0.52}, champ)
    assert ok  # within tolerances
    ok, why = Gate().check({"recall@5": 0.68, "f1_graph": 0.60, "graph_usage": 0.50}, champ)
    assert not ok and "R@5" in why[0]
    ok, why = Gate().check({"recall@5": 0.70, "f1_graph": 0.50, "graph_usage": 0.50}, champ)
    assert not ok and "F1" in why[0]
    ok, why = Gate().check({"recall@5": 0.70, "f1_graph": 0.60, "graph_usage": 0.60}, champ)
    assert not ok and "usage" in why[0]
    ok, _ = Gate().check({"recall@5": 0.72, "f1_graph": 0.60, "graph_usage": 0.60}, champ)
    assert ok  # more graph calls bought a recall gain
    # under a graph budget of 0.5: compliance decides first, then the usual comparison
    budget = Gate(max_graph_usage=0.5)
    greedy = {"recall@5": 0.80, "f1_graph": 0.70, "graph_usage": 0.90}
    ok, why = budget.check({"recall@5": 0.74, "f1_graph": 0.55, "graph_usage": 0.52}, greedy)
    assert ok and "exceeds the budget" in why[0]
    ok, why = budget.check(greedy, champ)
    assert not ok and "budget" in why[0]
    ok, why = budget.check({"recall@5": 0.68, "f1_graph": 0.60, "graph_usage": 0.45}, champ)
    assert not ok and "R@5" in why[0]  # both within budget: quality decides


def test_title_cover_is_word_bounded_and_drops_qualifiers() -> None:
    from r2adapter.route.evidence import normalise_title, title_cover

    assert normalise_title("The Iron Mask (1929 film)") == " the iron mask "
    titles = [normalise_title(t) for t in ("The Iron Mask (film)", "Allan Dwan", "It", "")]
    assert title_cover("Who directed the film The Iron Mask?", titles) == 1
    assert title_cover("Was Allan Dwan older than the director of The Iron Mask?", titles) == 2
    assert title_cover("Whitney's hit", titles) == 0  # "It" inside a word does not count


def test_dense_evidence_reads_the_dense_top_k_titles() -> None:
    from types import SimpleNamespace

    from r2adapter.route.evidence import DenseEvidence, normalise

    emb = np.eye(4, dtype=np.float32)  # passage i is the unit vector e_i
    graph = SimpleNamespace(
        version=SimpleNamespace(id=1),
        passage_emb=emb,
        passage_titles=["Ada Lovelace", "Charles Babbage", "London", "Paris"],
    )
    ev = DenseEvidence("toy", SimpleNamespace(get=lambda dataset: graph), k=2)
    q = np.array([[0.9, 0.4, 0.1, 0.0], [0.0, 0.1, 0.2, 0.9]], dtype=np.float32)
    f = ev(["Did Ada Lovelace meet Charles Babbage?", "Who met Ada Lovelace in London?"], q)
    # query 1: top-2 = Ada, Babbage, both named → bucket 2; query 2: top-2 = Paris, London → 1
    assert f.shape == (2, 4) and f[0].tolist() == [0, 0, 1, 0] and f[1].tolist() == [0, 1, 0, 0]
    assert normalise("A-b  C") == " a b c "
    # the retrieval embedding as a feature: appended after the one-hot, and sized-checked
    wide = SimpleNamespace(**{**graph.__dict__, "passage_emb": np.eye(4, 384, dtype=np.float32)})
    wide_source = SimpleNamespace(get=lambda dataset: wide)
    both = DenseEvidence("toy", wide_source, ("title_cover", "retrieval_embedding"), k=2)
    q384 = np.zeros((2, 384), dtype=np.float32)
    q384[:, :4] = q
    f2 = both(["Did Ada Lovelace meet Charles Babbage?", "Who met Ada Lovelace in London?"], q384)
    assert f2.shape == (2, 4 + 384) and both.dim == 388
    assert np.array_equal(f2[:, :4], f) and np.array_equal(f2[:, 4:], q384)
    with pytest.raises(R2AError, match="expects 384-d"):
        DenseEvidence("toy", wide_source, ("retrieval_embedding",))(
            ["q"], np.zeros((1, 8), np.float32)
        )


def test_routers_read_features_and_onnx_scores_equal_torch() -> None:
    from r2adapter.route.model import EmbeddingRouter, TransformerRouter
    from r2adapter.route.trained import RouterConfig, TrainedRouter

    net = EmbeddingRouter(dim=8, n_features=4).eval()
    x, f = torch.randn(3, 8), torch.eye(4)[:3]
    out = net(x, f)
    assert out.shape == (3, 2)
    with torch.no_grad():  # the feature weights reach the output
        net.head[-1].weight[:, 8:] += 5.0
    assert not torch.allclose(net(x, f), out)

    torch.manual_seed(0)
    t = TransformerRouter("minilm", normalize=True).eval()
    cfg = RouterConfig(backbone="minilm", tau=0.1, epsilon=0.6, normalize=True)
    on_torch = TrainedRouter(cfg, t)
    on_onnx = TrainedRouter(RouterConfig(**{**cfg.__dict__, "runtime": "onnx"}), t)
    assert (on_torch.runtime, on_onnx.runtime) == ("torch", "onnx")
    qs = ["Who directed The Iron Mask?", "When was the director of film Dune born, and where?"]
    for a, b in zip(on_torch.score(qs), on_onnx.score(qs), strict=True):
        assert np.abs(a - b).max() < 1e-5
    # a query's score does not depend on the batch it came in (padding is masked)
    alone = on_onnx.score(qs[:1])[1][0]
    assert abs(alone - on_onnx.score(qs)[1][0]) < 1e-5


def test_transformer_router_keeps_the_lower_layers() -> None:
    from r2adapter.route.model import TransformerRouter

    t = TransformerRouter("minilm", num_layers=3)
    assert len(t.encoder.encoder.layer) == 3 and t.encoder.config.num_hidden_layers == 3
    ids = torch.tensor([[101, 2040, 102]])
    assert t.eval()(ids, torch.ones_like(ids)).shape == (1, 2)
    with pytest.raises(R2AError, match="num_layers must be in 1..6"):
        TransformerRouter("minilm", num_layers=9)


def test_malformed_router_folder_is_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from r2adapter.route.trained import TrainedRouter

    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(R2AError, match="not a saved router"):
        TrainedRouter.load(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(R2AError, match="not a saved router"):
        TrainedRouter.load(tmp_path)


def test_calibrate_meets_the_budget_on_the_corpus_questions() -> None:
    from r2adapter.route.model import EmbeddingRouter
    from r2adapter.route.trained import RouterConfig, TrainedRouter

    torch.manual_seed(3)
    cfg = RouterConfig(backbone="embedding", tau=0.45, epsilon=0.6, dim=8)
    router = TrainedRouter(cfg, EmbeddingRouter(dim=8, dropout=0.0))
    qs = [f"question {i}" for i in range(40)]
    vecs = np.random.default_rng(0).normal(size=(40, 8)).astype(np.float32)
    p_d, p_g = router.score(qs, vecs)
    margins = p_g - p_d
    for usage in (0.0, 0.25, 0.5, 1.0):
        tau = router.calibrate(qs, usage, vecs)
        assert router.tau == tau
        sent = np.mean(margins > tau)
        assert sent <= usage + 1e-9 and sent >= usage - 1 / 40 - 1e-9  # at most one short
        # the same questions scored again with noise of re-scoring size send no more
        for noise in (1e-7, -1e-7):
            assert np.mean(margins + noise > tau) <= usage + 1e-9
    with pytest.raises(R2AError, match="no questions"):
        router.calibrate([], 0.5)
    with pytest.raises(R2AError, match=r"in \[0, 1\]"):
        router.calibrate(qs, 1.5, vecs)


def test_the_search_stops_training_after_patience_searches_without_a_better_score() -> None:
    """patience N: training stops at the N-th search in a row that found no strictly better
    Score(τ); the best step stays the best; patience 0 never stops (Algorithm 2)."""
    from types import SimpleNamespace

    from r2adapter.train.callbacks import PeriodicThresholdSearch, SearchPoint

    def run(patience: int, scores: list[float]) -> tuple[int, int, list[int]]:
        cb = PeriodicThresholdSearch(every_n_steps=10, patience=patience)
        trainer = SimpleNamespace(global_step=0, should_stop=False)
        seen = iter(scores)

        def evaluate(tr: SimpleNamespace, module: object) -> None:
            score = next(seen)
            cb.history.points.append(SearchPoint(tr.global_step, None, (None, None)))  # type: ignore[arg-type]
            if score > cb.history.best_score:
                cb.history.best_score, cb.history.best_step = score, tr.global_step

        cb._evaluate = evaluate  # type: ignore[method-assign]
        stops = []
        for step in range(10, 10 * len(scores) + 1, 10):
            trainer.global_step = step
            cb.on_train_batch_end(trainer, None, None, None, 0)  # type: ignore[arg-type]
            if trainer.should_stop:
                stops.append(step)
                break
        return cb.history.best_step, cb.history.stopped_at, stops

    scores = [0.5, 0.6, 0.7, 0.7, 0.65, 0.69, 0.8, 0.6]
    assert run(2, scores) == (30, 50, [50])  # a tie is no progress: Algorithm 2's strict >
    assert run(3, scores) == (30, 60, [60])
    assert run(4, scores) == (70, -1, [])  # the late best is found: never 4 stale in a row
    assert run(0, scores) == (70, -1, [])


def test_patience_is_checked() -> None:
    from r2adapter.config import router_params

    with pytest.raises(R2AError, match="patience"):
        router_params("minilm", patience=-1).check()
