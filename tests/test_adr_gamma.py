"""ADR's γ chosen on the folds under a prompt-token budget (issue 26, r2adapter/adr/gamma.py):
the largest γ of adr.gammas whose out-of-fold routed prompt tokens stay within the budget."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from r2adapter.adr.gamma import choose_gamma, out_of_fold, token_ratio
from r2adapter.adr.labels import AdrLabel, OperatorOutcome
from r2adapter.config import adr_params
from r2adapter.errors import R2AError

pytestmark = pytest.mark.unit

OPS = ("simple", "moderate", "complex")


def _labels(n: int = 240, seed: int = 0) -> tuple[list[AdrLabel], np.ndarray]:
    """Queries whose best operator is a noisy function of an 8-d embedding, so that the
    head's confidence varies and γ moves the fallback share."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8))
    w = rng.normal(size=(3, 8))
    best = np.argmax(x @ w.T + rng.normal(scale=1.5, size=(n, 3)), axis=1)
    labels = []
    for i in range(n):
        outcomes = {
            op: OperatorOutcome(["g"], 1.0 if j >= best[i] else 0.0, 0.0, 100 * (j + 1), 1.0)
            for j, op in enumerate(OPS)
        }
        labels.append(AdrLabel(f"q{i}", "?", "", "train", ["g"], outcomes))
    return labels, x


def test_a_zero_budget_keeps_the_configured_gamma() -> None:
    labels, x = _labels()
    p = replace(adr_params(), token_budget=0.0, gamma=0.7)
    gamma, how = choose_gamma(labels, x, p, np.zeros(len(labels)))
    assert gamma == 0.7 and "fixed" in how["how"]


def test_the_chosen_gamma_is_the_largest_within_the_budget_out_of_fold() -> None:
    labels, x = _labels()
    overhead = np.full(len(labels), 50.0)
    p = replace(adr_params(), gammas=(0.4, 0.5, 0.6, 0.7, 0.8, 0.9))
    probs, _ = out_of_fold(labels, x, p)
    ratios = {g: token_ratio(labels, probs, g, overhead) for g in p.gammas}
    assert len({round(r, 4) for r in ratios.values()}) > 2  # γ moves the tokens here
    budget = float(np.median(list(ratios.values())))
    gamma, how = choose_gamma(labels, x, replace(p, token_budget=budget), overhead)
    assert gamma == max(g for g, r in ratios.items() if r <= budget)
    assert how["ratio_by_gamma"][f"{gamma:g}"] <= budget
    looser, _ = choose_gamma(labels, x, replace(p, token_budget=1.0), overhead)
    assert looser >= gamma  # a looser budget never forces a smaller γ


def test_a_budget_nothing_meets_takes_the_smallest_gamma_and_says_so() -> None:
    labels, x = _labels()
    p = replace(adr_params(), gammas=(0.5, 0.8), token_budget=0.01)
    gamma, how = choose_gamma(labels, x, p, np.zeros(len(labels)))
    assert gamma == 0.5 and "none within" in how["how"]


def test_the_budget_is_a_share() -> None:
    with pytest.raises(R2AError, match="token_budget"):
        replace(adr_params(), token_budget=1.5).check()


@pytest.fixture
def home(tmp_path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from r2adapter.config import settings

    monkeypatch.setenv("R2A_HOME", str(tmp_path))
    settings.cache_clear()
    yield tmp_path
    monkeypatch.undo()
    settings.cache_clear()


def test_loco_trains_adr_on_every_other_corpus_and_names_the_command_without_one(home) -> None:  # type: ignore[no-untyped-def]
    from r2adapter.adr.evaluate import other_corpora_labels
    from r2adapter.adr.labels import adr_label_path, export_adr_labels

    (home / "params.yaml").write_text("adr:\n  train_corpora: [hotpotqa_dev, musique_dev]\n")
    with pytest.raises(R2AError) as e:
        other_corpora_labels("musique_dev")
    assert "r2a adr label --dataset C" in str(e.value) and "\n" not in str(e.value)
    labels, _ = _labels(30)
    for name, part in (("hotpotqa_dev", labels[:20]), ("musique_dev", labels[20:])):
        adr_label_path(name).parent.mkdir(parents=True, exist_ok=True)
        export_adr_labels(adr_label_path(name), part)
    got, sizes = other_corpora_labels("musique_dev")
    assert sizes == {"hotpotqa_dev": 20} and [g.query_id for g in got] == [
        lab.query_id for lab in labels[:20]
    ]


def test_loco_holds_adr_out_with_every_query_set_over_the_same_passages(  # type: ignore[no-untyped-def]
    home, monkeypatch
) -> None:
    from r2adapter.adr.evaluate import other_corpora_labels
    from r2adapter.adr.labels import adr_label_path, export_adr_labels
    from r2adapter.store import graph_store

    (home / "params.yaml").write_text(
        "pipeline:\n  dataset: 2wikimultihopqa\n"
        "adr:\n  train_corpora: [hotpotqa_dev, musique_dev, musique_dev_mixed]\n"
    )
    labels, _ = _labels(30)
    # musique_dev_mixed asks musique_dev's questions again over the same passages;
    # musique_mixed (labelled, in no train_corpora: the unseen-corpus proxy) is never trained on
    parts = {"hotpotqa_dev": labels[:10], "musique_dev": labels[10:20],
             "musique_dev_mixed": labels[10:30], "2wikimultihopqa": labels[:5],
             "musique_mixed": labels[20:30]}  # fmt: skip
    for name, part in parts.items():
        adr_label_path(name).parent.mkdir(parents=True, exist_ok=True)
        export_adr_labels(adr_label_path(name), part)
    keys = {"musique_dev": "m", "musique_dev_mixed": "m", "hotpotqa_dev": "h"}
    monkeypatch.setattr(graph_store, "corpus_key", lambda d: keys.get(d, d))
    got, sizes = other_corpora_labels("musique_dev_mixed")
    # 2Wiki's five questions are hotpotqa_dev's first five here: each counted once
    assert sizes == {"2wikimultihopqa": 5, "hotpotqa_dev": 5}
    assert sorted(g.query_id for g in got) == sorted(lab.query_id for lab in labels[:10])


@pytest.mark.slow  # loads the encoder for the features: ~5 s, out of make test-fast
def test_the_union_reads_every_listed_corpus_once(home) -> None:  # type: ignore[no-untyped-def]
    from r2adapter.adr.labels import adr_label_path, export_adr_labels
    from r2adapter.adr.registry import _labels_and_x
    from r2adapter.label.corpora import training_corpora

    assert training_corpora("a", ("b", "a", "c")) == ["a", "b", "c"]
    labels, _ = _labels(30)
    for name, part in (("hotpotqa_dev", labels[:20]), ("musique_dev", labels[20:])):
        adr_label_path(name).parent.mkdir(parents=True, exist_ok=True)
        export_adr_labels(adr_label_path(name), part)
    got, x, _ = _labels_and_x("hotpotqa_dev", ("musique_dev", "hotpotqa_dev"))
    assert [g.query_id for g in got] == [lab.query_id for lab in labels] and x.shape[0] == 30
    # a listed corpus without labels is left out (with a warning: the loop's corpora step
    # and the pipeline's corpora task write them); the dataset's own is an error
    got, x, _ = _labels_and_x("hotpotqa_dev", ("2wikimultihopqa",))
    assert [g.query_id for g in got] == [lab.query_id for lab in labels[:20]]
    with pytest.raises(R2AError):
        _labels_and_x("2wikimultihopqa", ("hotpotqa_dev",))
