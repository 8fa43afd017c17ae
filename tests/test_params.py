"""params.yaml's one loader: every section read into its dataclass, an unknown key or an
out-of-range value a one-line error that names it, and the papers' values as defaults."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from r2adapter import config
from r2adapter.config import (
    LABEL_RULES,
    EncoderParams,
    GraphParams,
    LabelParams,
    encoder_params,
    graph_params,
    load_params,
    rewrite_params,
    router_params,
    settings,
)
from r2adapter.errors import R2AError

pytestmark = pytest.mark.unit  # files only: no Postgres, no server

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A project home whose params.yaml each test writes."""
    monkeypatch.setenv("R2A_HOME", str(tmp_path))
    for var in ("R2A_ENCODER", "R2A_ENCODER_BACKEND"):
        monkeypatch.delenv(var, raising=False)
    settings.cache_clear()
    yield tmp_path
    monkeypatch.undo()
    settings.cache_clear()


def _error(home: Path, text: str) -> str:
    (home / "params.yaml").write_text(text)
    with pytest.raises(R2AError) as e:
        load_params()
    msg = str(e.value)
    assert "\n" not in msg, msg  # one line
    return msg


def test_the_repository_params_are_the_papers_defaults(home: Path) -> None:
    shutil.copy(ROOT / "params.yaml", home / "params.yaml")
    p = load_params()
    # HippoRAG 2's and CatRAG's values, named once in config.py; the one chosen departure:
    # CatRAG runs its best subset, anchoring alone (docs/retrieval.md, the union's folds)
    assert p.graph.catrag_ablate == ("edges", "keyfact")
    assert replace(p.graph, catrag_ablate=()) == GraphParams()
    assert (p.graph.damping, p.graph.synonym_threshold, p.graph.linking_top_k) == (0.5, 0.8, 5)
    assert (p.graph.passage_node_weight, p.graph.ppr_tol) == (0.05, 1e-6)
    assert p.encoder == EncoderParams()
    assert p.label == LabelParams()  # one truth for the label rule: recall_first
    assert p.label.rule == "recall_first"
    assert p.router.epsilon == 0.6  # R²Adapter eq. 7
    embed = router_params("embedding")
    assert (embed.gamma, embed.lr, embed.features) == (0.0, 1e-2, ("title_cover",))


def test_a_value_changes_what_is_read(home: Path) -> None:
    (home / "params.yaml").write_text("graph:\n  damping: 0.85\nencoder:\n  backend: torch\n")
    assert graph_params().damping == 0.85
    assert graph_params().linking_top_k == 5  # the rest keep their defaults
    assert encoder_params().backend == "torch"


def test_the_file_is_parsed_once_per_content(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rewritten query's seeding reads params.yaml per query: the parse is cached on the
    file's bytes, so a call costs no YAML parse, and an edit of the same length (what an
    mtime of coarse resolution could miss) is still read."""
    parses: list[Path] = []
    real = config._parse_params
    monkeypatch.setattr(
        config, "_parse_params", lambda path, raw: parses.append(path) or real(path, raw)
    )
    (home / "params.yaml").write_text("rewrite:\n  min_confidence: 0.5\n")
    for _ in range(3):
        assert rewrite_params().min_confidence == 0.5
    assert len(parses) == 1
    (home / "params.yaml").write_text("rewrite:\n  min_confidence: 0.7\n")
    assert rewrite_params().min_confidence == 0.7
    assert len(parses) == 2
    (home / "params.yaml").write_text("rewrite:\n  seed_weight: 0\n")
    with pytest.raises(R2AError, match="rewrite.seed_weight must be in"):
        rewrite_params()


def test_no_file_is_the_defaults(home: Path) -> None:
    assert load_params().graph == GraphParams()


def test_unknown_key_names_it(home: Path) -> None:
    msg = _error(home, "graph:\n  dampin: 0.5\n")
    assert "unknown key(s) graph.dampin" in msg and "damping" in msg
    msg = _error(home, "router_embedding:\n  epoch: 3\n")
    assert "router_embedding.epoch" in msg


def test_unknown_section_names_it(home: Path) -> None:
    assert "unknown section 'grpah'" in _error(home, "grpah:\n  damping: 0.5\n")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("graph:\n  damping: 1.5\n", "graph.damping must be in (0, 1), not 1.5"),
        ("graph:\n  synonym_threshold: 2\n", "graph.synonym_threshold"),
        ("graph:\n  linking_top_k: 0\n", "graph.linking_top_k must be ≥ 1, not 0"),
        ("graph:\n  hnsw_ef_search: 5000\n", "graph.hnsw_ef_search"),
        (
            "encoder:\n  backend: tpu\n",
            "encoder.backend must be one of onnx, onnx-int8, torch, not 'tpu'",
        ),
        ("encoder:\n  batch_size: 0\n", "encoder.batch_size"),
        ("label:\n  split: [0.5, 0.5, 0.5]\n", "label.split"),
        ("label:\n  rule: newest\n", "unknown label rule 'newest'"),
        ("router:\n  epsilon: 1.2\n", "router.epsilon must be in [0, 1], not 1.2"),
        ("router_minilm:\n  epochs: 0\n", "epochs must be ≥ 1, not 0"),
        ("graph:\n  linking_top_k: five\n", "graph.linking_top_k must be of type int"),
        ("graph:\n  damping: 1e-1\n", "graph.damping must be of type float"),  # YAML: a str
        ("router:\n  features: [title_cover, bogus]\n", "unknown routing feature"),
    ],
)
def test_out_of_range_value_names_it(home: Path, text: str, named: str) -> None:
    assert named in _error(home, text)


def test_encoder_env_is_read_at_load_not_at_import(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("R2A_ENCODER", "some/other-model")
    assert EncoderParams().model == "minilm"  # the class default never reads the environment
    assert encoder_params().model == "some/other-model"  # the loader does, at the call
    monkeypatch.setenv("R2A_ENCODER_BACKEND", "gpu")
    with pytest.raises(R2AError, match="encoder.backend"):
        encoder_params()


def test_label_rule_names_match_the_rules() -> None:
    from r2adapter.label.rules import RULES

    assert set(LABEL_RULES) == set(RULES)
