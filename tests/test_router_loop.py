"""The router loop against the real Postgres and a real MLflow store: index → label →
train (Lightning) → register → promote → evaluate, plus its bad inputs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from r2adapter.config import router_params, settings
from r2adapter.errors import R2AError
from r2adapter.label.annotate import LabelRecord, export_labels, read_labels
from r2adapter.label.step import label_paths
from tests.conftest import N_QUERIES, make_mini_musique, run_cli  # noqa: F401

pytestmark = pytest.mark.integration  # the embedded Postgres

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mini(mini_indexed: str, pg_env: dict[str, str]) -> dict[str, str]:
    return {"path": mini_indexed, "env": json.dumps(pg_env)}


def test_label_train_register_promote(mini: dict[str, str]) -> None:
    env = json.loads(mini["env"])
    r = run_cli(["label", "--dataset", mini["path"]], env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Table 1" in r.stdout and "rule comparison" in r.stdout
    labels = read_labels(settings().root / "labels" / "musmini.jsonl")
    assert len(labels) == N_QUERIES and {x.split for x in labels} == {"train", "val", "test"}
    stats = json.loads(label_paths("musmini")[1].read_text())
    assert stats["table1"]["total"] == N_QUERIES
    assert set(stats["rule_comparison"]) == {"avg_rank", "topk_first", "recall_first"}

    r = run_cli(["train", "--dataset", "musmini", "--backbone", "embedding", "--epochs", "5"], env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "registered version 1 as candidate" in r.stdout
    r = run_cli(["promote", "--router", "r2a_embed"], env)
    assert r.returncode == 0 and "the first model becomes champion" in r.stdout, r.stderr
    r = run_cli(["train", "--dataset", "musmini", "--epochs", "1"], env)  # fine-tuned MiniLM
    assert r.returncode == 0 and "registered version 1" in r.stdout, r.stderr[-2000:]
    assert run_cli(["promote"], env).returncode == 0

    r = run_cli(["evaluate", "routing", "--dataset", "musmini", "--split", "all", "--json"], env)
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout.strip().splitlines()[-1])
    routers = report["routers"]
    assert {"always_dense", "always_graph", "ner", "oracle", "r2a", "r2a_embed"} <= set(routers)
    assert routers["always_graph"]["graph_usage"] == 1.0
    assert routers["always_dense"]["graph_usage"] == 0.0
    assert routers["oracle"]["f1_graph"] == 1.0
    assert routers["oracle"]["recall@5"] >= max(
        routers["always_dense"]["recall@5"], routers["always_graph"]["recall@5"]
    )
    assert any("LLM-router skipped" in n for n in report["notes"])

    # label-free calibration: τ set so that (at most) a quarter of the corpus goes to graph
    args = ["evaluate", "routing", "--dataset", "musmini", "--split", "all", "--json"]
    r = run_cli([*args, "--calibrate-usage", "0.25"], env)
    assert r.returncode == 0, r.stderr[-2000:]
    calibrated = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(calibrated["calibration"]["taus"]) == {"r2a", "r2a_embed"}
    for name in ("r2a", "r2a_embed"):
        assert calibrated["routers"][name]["graph_usage"] <= 0.25

    r = run_cli(["models", "--json"], env)
    models = json.loads(r.stdout)
    champions = {m["router"] for m in models if "champion" in m["aliases"]}
    # both two-way champions; the k-way and ADR routers are listed too when registered
    assert {"r2a", "r2a_embed"} <= champions <= {"r2a", "r2a_embed", "kway", "adr"}
    assert all("recall@5" in m["gate"] for m in models if m["router"] in ("r2a", "r2a_embed"))


def test_routing_sweep_takes_the_reports_figures(mini: dict[str, str], tmp_path: Path) -> None:
    """The routing targets' set (r2adapter/evaluate/routing_targets.py, what the routing
    sweep reports) has `r2a evaluate routing`'s figures as they are (both champions, the
    label-free calibration) and adds the τ-sweep curves and checks; a routing sweep written
    by the test, run by `r2a evaluate sweep`, reports those figures with its timing repeats,
    their checks and the plot."""
    from r2adapter.config import label_params
    from r2adapter.evaluate.routing_report import routing_report
    from r2adapter.evaluate.routing_targets import evaluate_set
    from r2adapter.steps import champion_router

    rule = label_params().rule
    bench = evaluate_set("musmini", champion_router, "all", rule, llm_queries=0, calibrate=0.25)
    report = routing_report("musmini", champion_router, "all", rule)
    calibrated = routing_report("musmini", champion_router, "all", rule, 0.25)

    def figures(m: dict) -> dict:  # latency is measured again in each run
        return {k: v for k, v in m.items() if not k.startswith("latency")}

    for name, m in report["routers"].items():  # type: ignore[union-attr]
        assert figures(bench["routers"][name]) == figures(m), name
    taus = calibrated["calibration"]["taus"]  # type: ignore[index]
    assert set(taus) == {"r2a", "r2a_embed"} and bench["calibration"]["taus"] == taus
    for name in taus:
        budget = bench["routers"][f"{name}_budget"]
        assert figures(budget) == figures(calibrated["routers"][name]), name  # type: ignore[index]
    assert bench["champion_versions"] == report["champion_versions"]
    assert "LLM-router skipped (--llm-queries 0)" in bench["notes"]

    # what the benchmark adds: each champion's curve runs from all-dense to all-graph
    dense, graph = (bench["routers"][k]["recall@5"] for k in ("always_dense", "always_graph"))
    assert set(bench["curves"]) == {"r2a", "r2a_embed"}
    for curve in bench["curves"].values():
        assert curve[0]["graph_usage"] == 0.0 and curve[0]["recall@5"] == pytest.approx(dense)
        assert curve[-1]["graph_usage"] == 1.0 and curve[-1]["recall@5"] == pytest.approx(graph)
    assert set(bench["checks"]) == {"r2a", "r2a_embed", "r2a_budget", "r2a_embed_budget"}
    for c in bench["checks"].values():
        assert c["best_single_recall@5"] == max(dense, graph)

    # the sweep: the same figures, timing repeats one query at a time, their checks, the plot
    out = tmp_path / "routing.json"
    sweep = {"kind": "routing", "datasets": ["musmini"], "split": "all", "latency_queries": 4}
    sweep |= {"llm_queries": 0, "mlflow": False, "out": str(out)}
    home = tmp_path / "home"  # the session's home stays as it is: a params.yaml of its own
    home.mkdir()
    (home / "params.yaml").write_text(json.dumps({"sweeps": {"mini": sweep}}))
    env = {**json.loads(mini["env"]), "TQDM_DISABLE": "1", "R2A_HOME": str(home)}
    r = run_cli(["evaluate", "sweep", "--name", "mini"], env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    saved = json.loads(out.read_text())
    committed = json.loads((ROOT / "benchmarks" / "results" / "routing.json").read_text())
    assert list(saved) == [k for k in committed if k != "mlflow_run_id"]  # what the page reads
    assert set(saved["sets"]) == {"musmini:all"}
    ran = saved["sets"]["musmini:all"]
    for name, m in report["routers"].items():  # type: ignore[union-attr]
        assert figures(ran["routers"][name]) == pytest.approx(figures(m)), name
    assert set(ran["curves"]) == {"r2a", "r2a_embed"} and ran["calibration"] is None
    lat = saved["latency"]
    timed = {"r2a", "r2a_torch", "r2a_embed_head", "r2a_embed_with_encoding", "ner"}
    assert timed | {"query_encoding"} <= set(lat) and lat["queries"] == 4
    assert all(0 < lat[k]["p50_ms"] <= lat[k]["p95_ms"] for k in timed)
    assert lat["r2a_torch_decision_agreement"] == 1.0  # ONNX and torch decide alike
    checks = saved["latency_checks"]
    assert set(checks) >= {"r2a_within_target", "r2a_embed_head_within_target"}
    assert checks["r2a_p50_ms"] == lat["r2a"]["p50_ms"]
    assert out.with_suffix(".png").stat().st_size > 10_000
    assert "mlflow_run_id" not in saved


def test_mlflow_run_has_curves_and_label_hash(mini: dict[str, str]) -> None:
    import mlflow

    from r2adapter.registry.tracking import mlflow_setup

    mlflow_setup()
    runs = mlflow.search_runs(experiment_names=["r2a-router"], output_format="list")
    # the two-way routers' runs (ADR's classifier logs `adr-<dataset>` runs here too)
    runs = [r for r in runs if not (r.info.run_name or "").startswith("adr-")]
    assert runs, "no MLflow run"
    run = runs[-1]
    assert len(run.data.params["label_md5"]) == 32
    client = mlflow.MlflowClient()
    history = client.get_metric_history(run.info.run_id, "val_score")
    assert len(history) >= 1
    arts = {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
    assert {"plots/threshold.png", "plots/val_pr.png", "plots/threshold_search.json"} <= arts


def test_single_class_labels_refused_and_aliases_kept(mini: dict[str, str], tmp_path: Path) -> None:
    from r2adapter.registry.models import alias_version
    from r2adapter.twoway.register import train_and_register

    before = alias_version("r2a_embed", "candidate")
    good = read_labels(settings().root / "labels" / "musmini.jsonl")
    one = [
        LabelRecord(**{**x.__dict__, "y_graph": False, "y_dense": True, "preference": "dense"})
        for x in good
    ]
    path = tmp_path / "one.jsonl"
    export_labels(path, one)
    with pytest.raises(R2AError, match="single class"):
        train_and_register("musmini", router_params("embedding"), label_file=path)
    after = alias_version("r2a_embed", "candidate")
    assert before is not None and after is not None and before.version == after.version


def test_bad_inputs_one_line(mini: dict[str, str], tmp_path: Path) -> None:
    env = json.loads(mini["env"])
    r = run_cli(["train", "--dataset", "nolabels"], env)
    assert r.returncode == 1 and "label file not found" in r.stderr
    r = run_cli(["train", "--dataset", "musmini", "--epochs", "-2"], env)
    assert r.returncode == 1 and "epochs must be" in r.stderr
    bad = {**env, "MLFLOW_TRACKING_URI": "http://127.0.0.1:9/"}
    r = run_cli(
        ["models"],
        {**bad, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "2"},
        timeout=120,
    )
    assert r.returncode == 1 and "MLflow store unreachable" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    fresh = {**env, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/empty.db"}
    r = run_cli(["promote"], fresh)
    assert r.returncode == 1 and "no candidate" in r.stderr
    assert os.environ.get("R2A_DATABASE_URL") is None


def test_router_with_dense_evidence_on_onnx(mini: dict[str, str]) -> None:
    """What params.yaml asks of the pipeline's r2a: dense evidence, served on ONNX Runtime."""
    from r2adapter.registry.models import alias_version, load_router
    from r2adapter.retrieve.graph_index import GRAPHS
    from r2adapter.twoway.register import train_and_register

    champion = alias_version("r2a", "champion")
    p = router_params("minilm", features=("title_cover",), runtime="onnx", normalize=True, epochs=1)
    train_and_register("musmini", p, progress=False)
    r2a, _ = load_router("r2a", "candidate")
    assert r2a.cfg.features == ("title_cover",) and r2a.cfg.corpus == "musmini"
    assert r2a.cfg.runtime == "onnx" and r2a.runtime == "onnx" and r2a.uses_embedding
    qs = ["Who is the father of the director of film X?", "Where was Ada born?"]
    p_d, p_g = r2a.score(qs)  # reads the musmini index for its features
    assert ((0 <= p_d) & (p_d <= 1) & (0 <= p_g) & (p_g <= 1)).all()
    torch_twin = type(r2a)(type(r2a.cfg)(**{**r2a.cfg.__dict__, "runtime": "torch"}), r2a.net)
    with pytest.raises(R2AError, match="bind it"):  # its features need a corpus's index
        torch_twin.score(qs)
    torch_twin.bind("musmini", GRAPHS)
    t_d, t_g = torch_twin.score(qs)
    assert abs(t_g - p_g).max() < 1e-5 and abs(t_d - p_d).max() < 1e-5
    now = alias_version("r2a", "champion")  # training alone never moves the champion
    assert champion is not None and now is not None and now.version == champion.version
