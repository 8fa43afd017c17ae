"""One small headline metric per DVC stage (r2adapter/evaluate/headline.py): every stage of
dvc.yaml's loop, resolved by DVC itself (foreach expanded), declares one small metrics file that
the checkout holds and that the stage's own command writes from the committed reports; the
full reports are uncached outputs, so `dvc metrics show` is a table a person can read."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from r2adapter.cli import main
from r2adapter.errors import R2AError
from r2adapter.evaluate.headline import HEADLINES, headline_path, pick, read_headline

pytestmark = pytest.mark.unit  # files only

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def stages() -> list[Any]:
    from dvc.repo import Repo

    with Repo(str(ROOT)) as repo:
        # data.dvc runs nothing; the sweeps are off the loop (not in `make run`), and their
        # result files are rendered whole on docs/results.md: no headline of their own
        return [st for st in repo.index.stages if st.cmd and not st.addressing.startswith("sweep@")]


def _metric(stage: Any) -> Any:
    metrics = [o for o in stage.outs if o.metric]
    assert len(metrics) == 1, f"{stage.addressing}: {len(metrics)} metrics files, not one"
    return metrics[0]


def test_every_stage_has_one_small_headline_in_the_checkout(stages: list[Any]) -> None:
    assert len(stages) > 20, "dvc.yaml resolved to too few stages"
    for st in stages:
        m = _metric(st)
        path = ROOT / str(m.def_path)
        assert path.is_file(), f"{st.addressing}: no {m.def_path} (`r2a headline`)"
        assert not m.use_cache, f"{st.addressing}: a headline is kept in git (cache: false)"
        data = json.loads(path.read_text())
        numbers = [v for v in data.values() if isinstance(v, int | float)]
        assert 2 <= len(numbers) <= 6, (st.addressing, data)
        assert not [v for v in data.values() if isinstance(v, dict | list)], st.addressing
        assert path.stat().st_size < 300, (st.addressing, path.stat().st_size)


def test_the_full_reports_are_outputs_not_metrics(stages: list[Any]) -> None:
    by_name = {st.addressing: st for st in stages}
    full = {
        "index": "reports/index/2wikimultihopqa.json",
        "label": "reports/labels/2wikimultihopqa.json",
        "corpora@musique_dev": "reports/labels/musique_dev.json",
        "train@r2a": "reports/train/minilm.json",
        "promote@r2a_embed": "reports/promote/r2a_embed.json",
        "train@kway": "reports/train/kway.json",
        "promote@adr": "reports/promote/adr.json",
        "evaluate": "reports/eval/corpora.json",
    }
    for name, report in full.items():
        (out,) = [o for o in by_name[name].outs if str(o.def_path) == report]
        assert not out.metric and not out.use_cache, name
    evaluate = {str(o.def_path) for o in by_name["evaluate"].outs}
    assert {"reports/eval/report.md", "reports/eval/routing.png"} <= evaluate


def test_each_stage_command_writes_its_committed_headline(stages: list[Any]) -> None:
    """`r2a headline STAGE [ITEM]` ends every command but validate's (its report is five
    numbers, its own headline); run on the committed reports it gives the committed file,
    so the checkout's headlines are the code's, not edited by hand."""
    for st in stages:
        m = _metric(st)
        if st.addressing.startswith("validate@"):
            assert str(m.def_path) == f"reports/validate/{st.addressing[9:]}.json"
            continue
        args = shlex.split(st.cmd.rsplit("&&", 1)[1])
        assert args[:2] == ["r2a", "headline"], st.addressing
        out, figures = read_headline(ROOT, *args[2:])
        assert str(out) == str(m.def_path), st.addressing
        assert json.loads((ROOT / out).read_text()) == figures, (
            f"{out} differs from its reports: `r2a {' '.join(args[1:])}`"
        )


def test_pick_reads_the_fields_it_names() -> None:
    """The label headline follows the report's own rule; a promotion's bool is a number; a
    first promotion has no champion's figure, and that field is left out."""
    label = {
        "rule": "recall_first",
        "table1": {"total": 860, "preference_graph_pct": 44.9},
        "rule_comparison": {
            "avg_rank": {"oracle_recall@5": 0.5},
            "recall_first": {"oracle_recall@5": 0.812790697},
        },
    }
    assert pick(HEADLINES["label"], {"labels": label}) == {
        "queries": 860,
        "graph_preference_pct": 44.9,
        "oracle_recall@5": 0.8128,
    }
    promote = {
        "promoted": False,
        "candidate_metrics": {"recall@5": 0.75, "graph_usage": 0.5},
        "champion_metrics": None,
    }
    assert pick(HEADLINES["promote"], {"promote": promote}) == {
        "promoted": 0,
        "recall@5": 0.75,
        "graph_usage": 0.5,
    }
    routing = {"dataset": "toy", "routers": {"r2a": {"recall@5": 0.7}}}
    corpora = {"corpora": {"toy": {"rows": {"kway_loco": {"recall": 0.8}}}, "other": {}}}
    figures = pick(HEADLINES["evaluate"], {"routing": routing, "corpora": corpora})
    assert figures == {"recall@5": 0.7, "kway_loco_recall": 0.8}


def test_headline_paths_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert headline_path("train", "minilm") == Path("reports/metrics/train/minilm.json")
    assert headline_path("evaluate") == Path("reports/metrics/evaluate.json")
    with pytest.raises(R2AError, match="one stage per item"):
        headline_path("promote")
    with pytest.raises(R2AError, match="no reports/train/nosuch.json: run the stage first"):
        read_headline(tmp_path, "train", "nosuch")
    (tmp_path / "reports" / "train").mkdir(parents=True)
    (tmp_path / "reports" / "train" / "bad.json").write_text("{")
    with pytest.raises(R2AError, match="reports/train/bad.json: not JSON"):
        read_headline(tmp_path, "train", "bad")
    assert main(["headline", "train"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "r2a headline train ITEM" in err
