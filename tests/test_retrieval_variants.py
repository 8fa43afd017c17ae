"""Named retriever variants of the retrieval evaluation (`r2a evaluate retrieval --variant`,
r2adapter/evaluate/retrieval.py VARIANTS): the names, the GraphParams each runs with (checked
like params.yaml's), and on the shipped sample index that a variant is the strategy it names
with its overrides, reported with per-query figures that make up its means."""

from __future__ import annotations

import json

import pytest

from r2adapter.config import graph_params
from r2adapter.errors import R2AError
from r2adapter.evaluate import retrieval as ev
from r2adapter.evaluate.retrieval import VARIANTS, Variant, check_variants, variant_params


@pytest.mark.unit
def test_variant_names_and_the_default_set() -> None:
    defaults = check_variants(["all"])
    assert defaults[0] == "graph" and "catrag_learned_cv5" in defaults
    # the LLM's and the answer key's only when named
    for named_only in ("catrag_llm", "graph_fact_filter_llm", "catrag_oracle_tiers"):
        assert named_only not in defaults and check_variants([named_only]) == (named_only,)
    assert check_variants(["catrag", "graph", "catrag"]) == ("catrag", "graph")
    with pytest.raises(R2AError, match="unknown retrieval variant 'hybrid'"):
        check_variants(["hybrid"])
    for name, spec in VARIANTS.items():
        assert spec.tiers in ev.TIER_KINDS, name
        assert spec.strategy in ("graph", "catrag"), name


@pytest.mark.unit
def test_variant_params_are_params_yaml_with_the_overrides_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = graph_params()
    p = variant_params("graph_hipporag2_weights")
    assert (p.fact_edge_scale, p.synonym_edge_scale) == (2.0, 2.0)
    assert p.damping == base.damping and p.linking_top_k == base.linking_top_k
    assert variant_params("catrag_learned_cv5").tier_source == "learned"
    monkeypatch.setitem(VARIANTS, "bad", Variant("graph", {"ppr_r_max": 0.5}))
    with pytest.raises(R2AError, match=r"graph.ppr_r_max must be in \[1e-12, 0.1\], not 0.5"):
        variant_params("bad")
    monkeypatch.setitem(VARIANTS, "typo", Variant("graph", {"dampng": 0.5}))
    with pytest.raises(R2AError, match="variant 'typo'"):
        variant_params("typo")


@pytest.mark.integration
def test_variants_on_the_sample_index(sample_dataset: str) -> None:
    from r2adapter.evaluate.retrieval import evaluate_retrieval

    plain = evaluate_retrieval(sample_dataset, modes=["graph", "catrag"])
    names = ["graph", "graph_hipporag2_weights", "catrag_no_edges", "catrag_oracle_tiers"]
    report = evaluate_retrieval(sample_dataset, variants=names, per_query=True)
    rows = report["modes"]
    assert isinstance(rows, dict) and list(rows) == names and report["variants"] == names
    modes = plain["modes"]
    assert isinstance(modes, dict)
    for key in ("recall@2", "recall@5", "fcr@2", "fcr@5"):  # the variant `graph` is graph
        assert rows["graph"][key] == modes["graph"][key], key
    assert rows["catrag_no_edges"]["strategy"] == "catrag"
    assert rows["catrag_no_edges"]["ablate"] == ["edges"]
    assert rows["graph_hipporag2_weights"]["params"] == {
        "fact_edge_scale": 2.0,
        "synonym_edge_scale": 2.0,
    }
    per_query, ids = report["per_query"], report["query_ids"]
    assert isinstance(per_query, dict) and isinstance(ids, list)
    n = report["n_queries"]
    assert isinstance(n, int) and n == len(ids) > 0
    for name in names:
        assert len(per_query[name]["fcr@5"]) == n
        for key in ("recall@5", "fcr@5"):
            assert sum(per_query[name][key]) / n == pytest.approx(rows[name][key]), (name, key)
    # a variant names its own strategy and ablations
    with pytest.raises(R2AError, match="leave out --mode and --ablate"):
        evaluate_retrieval(sample_dataset, modes=["graph"], variants=["catrag"])


@pytest.mark.integration
def test_cli_evaluate_retrieval_variant(sample_dataset: str, pg_env: dict[str, str]) -> None:
    from tests.conftest import run_cli

    base = ["evaluate", "retrieval", "--dataset", sample_dataset]
    two = ["--variant", "graph", "--variant", "catrag_anchoring_only"]
    r = run_cli([*base, *two, "--json"], pg_env)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert list(report["modes"]) == ["graph", "catrag_anchoring_only"]
    assert report["modes"]["catrag_anchoring_only"]["ablate"] == ["edges", "keyfact"]
    r = run_cli([*base, "--variant", "hybrid"], pg_env)
    assert r.returncode == 2 and "invalid choice: 'hybrid'" in r.stderr
    r = run_cli([*base, "--variant", "catrag", "--mode", "graph"], pg_env)
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0
    assert "leave out --mode and --ablate" in r.stderr


@pytest.mark.unit
def test_catrag_names_its_form_plainly() -> None:
    from r2adapter.evaluate.retrieval import catrag_form

    assert catrag_form((), "entities").startswith("the paper's form")
    assert catrag_form(("edges", "keyfact"), "entities") == (
        "a subset of the paper's parts: anchoring (named entities)"
    )
    assert "noun chunks" in catrag_form((), "entities_and_chunks")
    assert catrag_form(("anchoring", "edges", "keyfact"), "entities").startswith("no part")
    # a named variant means what its name says whatever the default turns off
    assert variant_params("catrag_paper").catrag_ablate == ()
    assert variant_params("catrag_paper").anchor_phrases == "entities"
    assert variant_params("catrag_no_edges").anchor_phrases == "entities_and_chunks"
    assert variant_params("catrag_no_edges").catrag_ablate == ()
