"""The cost-aware router over every strategy (r2adapter/kway): the strategy table, the
cascade and its search on known answers, the heads learning a planted signal, and the whole
path on a real index: per-strategy labels, train → register → promote, the cv5 report and
the service routing with it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np
import pytest

from r2adapter.config import kway_params
from r2adapter.errors import R2AError
from r2adapter.evaluate.routing_report import mixture_ceiling
from r2adapter.evaluate.stats import paired_bootstrap
from r2adapter.kway.cascade import (
    Costs,
    choose,
    cost_cap,
    fallback_index,
    objective,
    search_thresholds,
)
from r2adapter.kway.labels import read_strategy_labels
from r2adapter.kway.model import KwayRouter, fit_kway
from r2adapter.kway.strategies import (
    base_retrievers,
    delivered,
    parse_strategy,
    rrf,
    strategy_table,
)
from tests.conftest import run_cli, served_store, serving

# -- unit: no Postgres, no server ------------------------------------------------------------


@pytest.mark.unit
def test_a_strategy_over_a_missing_retriever_is_one_line() -> None:
    with pytest.raises(R2AError, match="'nosuch' which does not exist|does not exist"):
        strategy_table(["dense@5", "nosuch@5"])
    with pytest.raises(R2AError, match="<retriever>@<k>"):
        parse_strategy("graph@0")
    s = parse_strategy("fusion@8")
    assert s.bases == ("dense", "graph") and s.k == 8 and s.graph_side
    assert not parse_strategy("dense@3").graph_side


@pytest.mark.unit
def test_a_rewritten_strategy_is_a_graph_retriever_on_the_rewrite() -> None:
    s = parse_strategy("graph+rw@5")
    assert (s.mode, s.rewritten, s.k, s.bases, s.graph_side) == (
        "graph",
        True,
        5,
        ("graph+rw",),
        True,
    )
    assert not parse_strategy("graph@5").rewritten and parse_strategy("graph@5").mode == "graph"
    with pytest.raises(R2AError, match="only a graph retriever"):
        parse_strategy("dense+rw@5")
    with pytest.raises(R2AError, match="does not exist"):
        parse_strategy("nosuch+rw@5")
    table = strategy_table(["catrag+rw@5", "dense@5", "graph+rw@3", "graph@5"])
    assert base_retrievers(table) == ("dense", "graph", "graph+rw", "catrag+rw")


@pytest.mark.unit
@pytest.mark.parametrize("budget", [-0.1, 1.5])
def test_a_budget_outside_0_1_is_refused(budget: float) -> None:
    with pytest.raises(R2AError, match=r"kway.budget must be in \[0, 1\]"):
        kway_params(budget=budget)


@pytest.mark.unit
def test_rrf_and_prefixes() -> None:
    # a: 1/61 + 1/63 = .032266 just beats b: 2/62 = .032258; c and d are in one list only
    fused = rrf([["a", "b", "c"], ["d", "b", "a"]], rrf_k=60, depth=10)
    assert fused == ["a", "b", "d", "c"]
    rankings = {"dense": ["a", "b", "c"], "graph": ["d", "b", "a"]}
    assert delivered(parse_strategy("dense@2"), rankings) == ["a", "b"]
    assert delivered(parse_strategy("fusion@2"), rankings) == fused[:2]


@pytest.mark.unit
def test_the_cascade_takes_the_cheapest_confident_head_else_the_fallback() -> None:
    probs = np.array([[0.9, 0.9, 0.1], [0.2, 0.8, 0.1], [0.1, 0.1, 0.1]])
    tau = np.array([0.5, 0.5, 0.5])
    order = np.array([2, 0, 1])  # strategy 2 is the cheapest, then 0, then 1
    assert choose(probs, tau, order, fallback=1).tolist() == [0, 1, 1]
    assert choose(probs, np.array([0.95, 0.5, 0.05]), order, fallback=0).tolist() == [2, 2, 2]
    assert fallback_index(np.array([0.5, 0.9, 0.8]), np.array([5, 8, 5]), 5.0) == 2
    # within a 30 ms cap as well, the best affordable one; none affordable: the cheapest
    rec, ps, ms = np.array([0.5, 0.7, 0.8]), np.array([5, 5, 5]), np.array([10.0, 25.0, 50.0])
    assert fallback_index(rec, ps, 5.0) == 2
    assert fallback_index(rec, ps, 5.0, ms, 30.0) == 1
    assert fallback_index(rec, ps, 5.0, ms, 5.0) == 0
    from r2adapter.kway.model import fallback_candidates

    for rule, want in (("best", [2]), ("affordable", [1]), ("searched", [2, 1])):
        p = kway_params(strategies=("dense@5", "graph@5", "catrag@5"), route=(), fallback=rule)
        assert fallback_candidates(rec, ps, ms, 30.0, p) == want
    assert cost_cap(np.array([10.0, 30.0, 50.0]), 0.5) == 30.0


@pytest.mark.unit
def test_the_threshold_search_meets_the_budget_and_uses_the_signal() -> None:
    rng = np.random.default_rng(0)
    n = 400
    hard = rng.random(n) < 0.4  # the cheap strategy fails on hard queries only
    recall = np.stack([np.where(hard, 0.0, 1.0), np.ones(n)], axis=1)
    ms = np.tile([10.0, 50.0], (n, 1))
    passages = np.full((n, 2), 5.0)
    probs = np.stack([np.where(hard, 0.2, 0.9) + rng.normal(0, 0.05, n), np.full(n, 0.5)], 1)
    c = Costs(recall, ms, passages)
    grid = np.round(np.arange(0.05, 0.96, 0.05), 2)
    tau, score, ok = search_thresholds(probs, c, np.array([0, 1]), 1, 40.0, 5.0, grid, 0.75)
    picked = choose(probs, tau, np.array([0, 1]), 1)
    assert ok and score == pytest.approx(1.0)  # every hard query → the expensive strategy
    assert (picked[hard] == 1).all() and ms[np.arange(n), picked].mean() <= 40.0
    # a cap below what the signal needs: the search stays within it and loses recall
    tau, score, ok = search_thresholds(probs, c, np.array([0, 1]), 1, 15.0, 5.0, grid, 0.75)
    picked = choose(probs, tau, np.array([0, 1]), 1)
    assert ok and ms[np.arange(n), picked].mean() <= 15.0 and score < 1.0


@pytest.mark.unit
def test_the_heads_learn_a_planted_signal_and_survive_save_load(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    n, d = 300, 8
    x = rng.normal(size=(n, d)).astype(np.float32)
    hard = x[:, 0] > 0.3
    suitable = np.stack([~hard, np.ones(n, dtype=bool)], axis=1)
    recall = suitable.astype(float)
    c = Costs(recall, np.tile([10.0, 50.0], (n, 1)), np.full((n, 2), 5.0))
    p = kway_params(
        strategies=("dense@5", "graph@5"), route=(), features=("query_embedding",), budget=0.8
    )
    tr, va, te = np.arange(0, 200), np.arange(200, 250), np.arange(250, 300)

    def rows(r: np.ndarray) -> Costs:
        return Costs(c.recall[r], c.ms[r], c.passages[r])

    router, hist = fit_kway(x[tr], suitable[tr], x[va], rows(va), rows(tr), p.strategies, p)
    assert hist.best_step > 0 and router.cfg.fallback == "graph@5"
    ch = router.choose(x[te])
    assert recall[te][np.arange(len(te)), ch].mean() >= 0.9  # routed, not always one
    assert 0.2 < (ch == 0).mean() < 0.9
    router.save(tmp_path / "r")
    again = KwayRouter.load(tmp_path / "r")
    assert np.allclose(again.probs(x[te]), router.probs(x[te]))
    with pytest.raises(R2AError, match="not a saved k-way router"):
        KwayRouter.load(tmp_path / "missing")


@pytest.mark.unit
def test_transfer_prices_the_strategies_at_the_new_corpus_own_ms() -> None:
    """Trained where graph (50 ms) was 5× dense (10 ms); on the new corpus graph costs 12 ms
    and the dearest strategy 30 ms. `plugin` orders and caps by the new prices, so the
    cheap graph takes the queries its head likes within the cap; `shift`, pricing at the
    old corpus's ms, cannot see that graph is now cheap."""
    from r2adapter.kway.evaluate import calibrate_kway
    from r2adapter.kway.model import KwayConfig

    rng = np.random.default_rng(3)
    n, d = 200, 2
    x = rng.normal(size=(n, d))
    cfg = KwayConfig(
        strategies=("dense@5", "graph@5", "catrag@5"),
        mean_ms=(10.0, 50.0, 60.0),
        mean_passages=(5.0, 5.0, 5.0),
        mean_recall=(0.6, 0.8, 0.8),
        thresholds=(0.75, 0.75, 0.75),
        fallback="graph@5",
        features=("query_embedding",),
        budget=0.4,
        max_passages=5.0,
        confidence=0.75,
    )
    # dense's head likes x0 > 0, graph's likes every query a little more than catrag's
    w = np.array([[4.0, 1.0, 0.5], [0.0, 0.0, 0.0]])
    heads = {"w": w, "b": np.array([0.0, 0.5, 0.0]), "mean": np.zeros(d), "std": np.ones(d)}
    router = KwayRouter(cfg, heads)
    new_ms, ps = np.array([10.0, 12.0, 30.0]), np.array([5.0, 5.0, 5.0])
    notes: list[str] = []
    p = kway_params(strategies=cfg.strategies, route=(), budget=0.4)
    plug = calibrate_kway(router, x, 0.4, p, notes, new_ms, ps)
    assert "plug-in" in notes[-1]
    ch = plug.choose(x)
    assert new_ms[ch].mean() <= cost_cap(new_ms, 0.4) + 1e-9  # 18 ms
    assert (ch == 1).mean() > 0.3 and (ch == 2).mean() < 0.2  # the cheap graph is used
    assert plug.cfg.mean_ms == (10.0, 12.0, 30.0)
    shifted = calibrate_kway(router, x, 0.4, replace(p, transfer="shift"), notes, new_ms, ps)
    assert "shifted" in notes[-1] and shifted.cfg.mean_ms == cfg.mean_ms
    with pytest.raises(R2AError, match="kway.transfer"):
        kway_params(transfer="nope").check()


@pytest.mark.unit
def test_budgeted_oracle_spends_the_budget_where_it_pays() -> None:
    """Two queries, cheap (10 ms, recall 0 / 1) and dear (30 ms, recall 1 / 1): within a mean
    of 20 ms the oracle sends only the first query to the dear strategy (recall 1); within
    10 ms it cannot (recall .5); the fixed strategies' best mix reaches .75 at 20 ms."""
    from r2adapter.evaluate.routing_report import budgeted_oracle

    m = {
        "recall": np.array([[0.0, 1.0], [1.0, 1.0]]),
        "ms": np.array([[10.0, 30.0], [10.0, 30.0]]),
        "passages": np.full((2, 2), 3.0),
    }
    got, ch = budgeted_oracle(m, 20.0, 3.5)
    assert got == pytest.approx(1.0) and ch.tolist() == [1, 0]
    assert budgeted_oracle(m, 10.0, 3.5)[0] == pytest.approx(0.5)
    assert budgeted_oracle(m, 10.0, 2.0)[0] == float("-inf")  # no choice fits 2 passages
    assert mixture_ceiling(m, [0, 1], 20.0, 3.5)[0] == pytest.approx(0.75)


@pytest.mark.unit
def test_the_heads_read_the_embedding_raw_and_standardise_the_rest() -> None:
    """kway.standardize_embedding false: the embedding's columns keep mean 0 / std 1 in the
    saved heads (the unit-norm vector as the encoder gives it), title cover's and the dense
    scores' are standardised; true standardises every column."""
    from r2adapter.kway.features import embedding_columns

    rng = np.random.default_rng(2)
    n = 120
    names = ("title_cover", "query_embedding", "dense_scores")
    emb = rng.normal(size=(n, 6)) / np.sqrt(6)
    x = np.hstack([rng.integers(0, 2, (n, 4)), emb, 5 + 3 * rng.normal(size=(n, 4))])
    cols = embedding_columns(names, x.shape[1])
    assert cols == slice(4, 10)
    y = np.stack([x[:, 4] > 0, np.ones(n, dtype=bool)], axis=1)
    c = Costs(y.astype(float), np.tile([10.0, 50.0], (n, 1)), np.full((n, 2), 5.0))
    for flag in (False, True):
        p = kway_params(
            strategies=("dense@5", "graph@5"), route=(), features=names, epochs=30,
            standardize_embedding=flag,
        )  # fmt: skip
        router, _ = fit_kway(x, y, x, c, c, p.strategies, p)
        raw = np.allclose(router.mean[cols], 0) and np.allclose(router.std[cols], 1)
        assert raw is not flag
        assert np.allclose(router.mean[10:], x[:, 10:].mean(axis=0))  # the rest standardised


@pytest.mark.unit
def test_a_label_file_from_before_the_strategy_table_asks_for_a_relabel(
    tmp_path: Path,
) -> None:
    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps({"query_id": "q", "dense_top": [], "graph_top": []}) + "\n")
    with pytest.raises(R2AError, match="relabel|r2a label"):
        read_strategy_labels("x", path=old)
    with pytest.raises(R2AError, match="no strategy labels"):
        read_strategy_labels("x", path=tmp_path / "none.jsonl")


@pytest.mark.unit
def test_mixture_ceiling_and_paired_interval() -> None:
    """Three fixed strategies: cheap (10 ms, 2 passages, recall .5), mid (40 ms, 5, .8),
    wide (40 ms, 8, .9). Under 25 ms and 5 passages the best mix is half cheap, half wide:
    the ms cap needs half cheap, which leaves room in the passages for the wide one."""
    q = 4
    m = {
        "recall": np.tile([0.5, 0.8, 0.9], (q, 1)),
        "ms": np.tile([10.0, 40.0, 40.0], (q, 1)),
        "passages": np.tile([2.0, 5.0, 8.0], (q, 1)),
    }
    best, per_query = mixture_ceiling(m, [0, 1, 2], at_ms=25.0, at_passages=5.0)
    # ms: 10a + 40(1-a) ≤ 25 → a ≥ .5; passages with a = .5: 1 + 5b + 8c ≤ 5, b + c = .5
    # → c ≤ .5: .5·.5 + .5·.9 = .7 (a mix alone on the ms axis would not see passages)
    assert best == pytest.approx(0.7) and per_query == pytest.approx([0.7] * q)
    assert mixture_ceiling(m, [0, 1], at_ms=25.0, at_passages=5.0)[0] == pytest.approx(0.65)
    assert mixture_ceiling(m, [0, 1, 2], at_ms=40.0, at_passages=8.0)[0] == pytest.approx(0.9)
    assert mixture_ceiling(m, [0, 1, 2], at_ms=5.0, at_passages=8.0)[0] == float("-inf")
    a, b = np.array([1.0] * 50 + [0.0] * 50), np.array([0.0] * 100)
    r = paired_bootstrap(a, b)
    assert r["diff"] == pytest.approx(0.5) and r["ci95"][0] > 0.3


# -- integration: a real index, registry and service ------------------------------------------


@pytest.fixture(scope="module")
def kway_env(
    pg_env: dict[str, str], champion_store: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """The mini index labelled (two-way and per strategy: `champion_store`'s `r2a label`
    writes the strategy labels too), a two-way champion, and a k-way router trained,
    registered and promoted, in a copy of the champion's registry."""
    tmp = tmp_path_factory.mktemp("kway")
    env = {
        **pg_env,
        "MLFLOW_TRACKING_URI": served_store(champion_store, tmp / "mlflow"),
        "R2A_SERVE_DATASET": "musmini",
        "R2A_CHAMPION_POLL_S": "1",
    }
    report = tmp / "train.json"
    r = run_cli(["train", "--dataset", "musmini", "--router", "kway", "--report", str(report)], env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(report.read_text())["version"] == "1"
    r = run_cli(["promote", "--router", "kway"], env)
    assert r.returncode == 0 and "promoted" in r.stdout, r.stderr[-2000:]
    # `r2a models` lists the k-way router beside the two-way ones, with its gate figures
    r = run_cli(["models", "--json"], env)
    kway = [m for m in json.loads(r.stdout) if m["router"] == "kway"]
    assert [m["version"] for m in kway] == [1] and "champion" in kway[0]["aliases"]
    assert {"recall", "fcr", "mean_ms"} <= set(kway[0]["gate"])
    return env


@pytest.mark.integration
def test_strategy_labels_on_a_real_index(kway_env: dict[str, str]) -> None:
    path = Path(kway_env["R2A_HOME"]) / "labels" / "musmini.strategies.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    table = kway_params().strategies
    assert len(rows) >= 50 and set(rows[0]["strategies"]) == set(table)
    for row in rows:
        assert set(row["rankings"]) == set(base_retrievers(strategy_table(table)))
        assert row["ms"]["graph"] > 0 and row["ms"]["embed"] > 0
        best = max(s["recall"] for s in row["strategies"].values())
        assert row["suitable"] and all(
            row["strategies"][n]["recall"] == best for n in row["suitable"]
        )
        for name, s in row["strategies"].items():
            assert len(s["passages"]) <= int(name.split("@")[1])
            assert 0 <= s["recall"] <= 1 and s["tokens"] > 0
    # every k of one retriever is a prefix of one ranking
    r0 = rows[0]
    assert r0["strategies"]["graph@3"]["passages"] == r0["strategies"]["graph@8"]["passages"][:3]


@pytest.mark.integration
def test_cv5_report_names_every_router_and_strategy(kway_env: dict[str, str]) -> None:
    r = run_cli(
        ["evaluate", "routing", "--dataset", "musmini", "--protocol", "cv5", "--routers",
         "r2a_embed", "--json"],
        kway_env,
        timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads(r.stdout.strip().splitlines()[-1])
    assert rep["protocol"] == "cv5" and rep["n_queries"] >= 50
    routers = rep["routers"]
    for name in ("kway", "r2a_embed", "ner", "oracle", "always_graph@5", "always_dense@5"):
        assert name in routers, name
    keys = {"recall", "fcr", "mean_passages", "mean_tokens", "mean_ms", "graph_usage", "share"}
    for name, m in routers.items():
        assert keys | {"latency_ms_p50"} <= set(m), name
        assert abs(sum(m["share"].values()) - 1) < 1e-9
    # the oracle reaches every query's best recall, so no router or strategy beats it
    assert all(
        m["recall"] <= routers["oracle"]["recall"] + 1e-9
        for name, m in routers.items()
        if not name.startswith("adr")  # ADR's operators are not in the strategy table
    )
    assert routers["always_graph@5"]["share"] == {"graph@5": 1.0}
    # kway routes among kway.route only: its own oracle, and the ablation over them all
    assert set(routers["kway"]["share"]) <= set(rep["strategies"]) < set(rep["labelled_strategies"])
    assert set(routers["oracle_routed"]["share"]) <= set(rep["strategies"])
    assert "routing_every_strategy" in rep["ablation"]
    assert len(rep["frontier"]) == 11 and "all" in rep["ablation"]
    shot = rep["ablation"]["moonshot"]  # the moonshot's point, measured with its ceilings
    assert shot["target"]["recall"] == pytest.approx(routers["always_graph@5"]["recall"])
    assert shot["target"]["mean_passages"] == 3.5 and "budgeted_oracle_recall" in shot
    assert (Path(kway_env["R2A_HOME"]) / "reports/routing/kway_musmini_cv5.png").is_file()


@pytest.mark.integration
def test_bad_budget_and_unknown_router_are_one_line(kway_env: dict[str, str]) -> None:
    for args, msg in (
        (["--protocol", "cv5", "--budget", "1.5"], "--budget must be in [0, 1]"),
        (["--protocol", "cv5", "--routers", "nosuch"], "unknown router"),
        (["--budget", "0.5"], "--budget applies to --protocol"),
    ):
        r = run_cli(["evaluate", "routing", "--dataset", "musmini", *args], kway_env)
        assert r.returncode != 0 and msg in r.stderr, r.stderr[-1000:]
        assert "Traceback" not in r.stderr


@pytest.fixture(scope="module")
def kway_service(
    kway_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    log = tmp_path_factory.mktemp("kway-svc") / "serve.log"
    with serving(kway_env, log) as url:
        yield url


@pytest.mark.integration
def test_the_service_routes_auto_with_the_kway_champion(kway_service: str) -> None:
    q = {"query": "Who is the father of the director of the film?"}
    info = httpx.post(f"{kway_service}/info", json={}, timeout=30).json()
    assert info["routing"] == "kway" and info["kway_version"] == "1", info
    r = httpx.post(f"{kway_service}/route", json=q, timeout=60)
    assert r.status_code == 200, r.text
    body = r.json()
    table = kway_params().routed().strategies  # the heads: one per strategy of kway.route
    assert body["router"] == "kway" and body["strategy"] in table
    assert set(body["scores"]) == set(table) and body["k"] == int(body["strategy"].split("@")[1])
    # not a fallback → the chosen head cleared its threshold
    assert body["fallback"] or body["scores"][body["strategy"]] >= body["tau"]
    r = httpx.post(f"{kway_service}/retrieve", json={**q, "mode": "auto"}, timeout=60)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["strategy"] == body["strategy"] and len(got["passages"]) == got["k"]
    r = httpx.post(f"{kway_service}/retrieve", json={**q, "mode": "dense", "top_k": 3}, timeout=60)
    assert r.status_code == 200 and len(r.json()["passages"]) == 3 and r.json()["strategy"] is None


@pytest.mark.unit
def test_route_is_a_labelled_subset() -> None:
    """kway.route: the router's strategies, a subset of the labelled table; [] routes all."""
    p = kway_params(
        strategies=("dense@5", "graph@5", "graph@8"),
        route=("dense@5", "graph@5"),
        quality_route=(),
        route_candidates=(),
    )
    assert p.routed().strategies == ("dense@5", "graph@5") and p.routed().route == ()
    assert kway_params(
        strategies=("dense@5", "graph@8"), route=(), route_candidates=()
    ).routed().strategies == (
        "dense@5",
        "graph@8",
    )
    with pytest.raises(R2AError, match=r"kway.route: \['catrag@5'\] not in kway.strategies"):
        kway_params(
            strategies=("dense@5", "graph@5"),
            route=("catrag@5",),
            quality_route=(),
            route_candidates=(),
        )
    with pytest.raises(R2AError, match=r"kway.quality_route: \[.graph@8.\] not in"):
        kway_params(
            strategies=("dense@5", "graph@5"),
            route=("dense@5",),
            quality_route=("graph@8",),
            route_candidates=(),
        )


@pytest.mark.unit
def test_a_soft_cap_has_no_step_and_trades_recall_for_overshoot() -> None:
    """`kway.cap_penalty` λ: recall − λ × the relative ms overshoot. A setting 1% over the
    cap keeps nearly its recall (hard: −1 and out), so timing noise at the cap moves the
    score by about as much as the noise; a large overshoot still loses to a cheaper
    setting, and the passages cap stays hard."""
    c = Costs(np.array([[0.6, 1.0]] * 4), np.array([[10.0, 20.2]] * 4), np.full((4, 2), 5.0))
    pricey = np.ones(4, dtype=int)
    hard, ok = objective(pricey, c, 20.0, 5.0)
    soft, ok_soft = objective(pricey, c, 20.0, 5.0, penalty=1.0)
    assert hard < 0 and not ok and soft == pytest.approx(0.99) and not ok_soft
    assert objective(pricey, c, 20.2, 5.0, penalty=1.0) == (1.0, True)  # within: plain recall
    far = objective(pricey, c, 10.0, 5.0, penalty=1.0)[0]  # 102% over: worse than cheap
    assert far < objective(np.zeros(4, dtype=int), c, 10.0, 5.0, penalty=1.0)[0] == 0.6
    assert objective(pricey, c, 20.0, 4.0, penalty=1.0)[0] < 0  # passages: still hard
    # the search: the expensive strategy 1% over a cap of 20 ms is kept soft, refused hard
    probs = np.array([[0.9, 0.5]] * 4)
    grid = np.round(np.arange(0.05, 0.96, 0.05), 2)
    order = np.array([0, 1])
    tau_h, _, _ = search_thresholds(probs, c, order, 1, 20.0, 5.0, grid, 0.75)
    tau_s, _, _ = search_thresholds(probs, c, order, 1, 20.0, 5.0, grid, 0.75, penalty=1.0)
    assert (choose(probs, tau_h, order, 1) == 0).all()
    assert (choose(probs, tau_s, order, 1) == 1).all()


@pytest.mark.unit
def test_questions_are_embedded_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """embed_questions: each question once per encoder; the rows in the order asked,
    repeats included; another encoder name embeds again."""
    from types import SimpleNamespace

    import r2adapter.index.encoder as encoder
    from r2adapter.kway import features

    calls: list[list[str]] = []

    def fake(name: str) -> SimpleNamespace:
        def encode(texts: list[str]) -> np.ndarray:
            calls.append(list(texts))
            return np.array([[len(t), ord(t[0]), len(name)] for t in texts], dtype=np.float32)

        return SimpleNamespace(name=name, dim=3, encode=encode)

    monkeypatch.setattr(features, "_QVECS", {})
    monkeypatch.setattr(encoder, "get_encoder", lambda: fake("a"))
    first = features.embed_questions(["who?", "where is it?", "who?"])
    assert calls == [["who?", "where is it?"]]
    assert first.tolist() == [[4, 119, 1], [12, 119, 1], [4, 119, 1]]
    again = features.embed_questions(["where is it?", "when?"])
    assert calls[-1] == ["when?"] and again.tolist() == [[12, 119, 1], [5, 119, 1]]
    assert features.embed_questions([]).shape == (0, 3)
    monkeypatch.setattr(encoder, "get_encoder", lambda: fake("bb"))
    assert features.embed_questions(["who?"]).tolist() == [[4, 119, 2]]
    assert calls[-1] == ["who?"]


@pytest.mark.unit
def test_the_adapter_composes_fusion_from_the_retrievers_it_holds() -> None:
    """fusion is a composite of the strategy table: the adapter builds it over its own dense
    and graph retrievers (the service builds no second pair for it)."""
    from r2adapter.adapter import R2Adapter
    from r2adapter.retrieve.fusion import FusionRetriever

    dense, graph = object(), object()
    a = R2Adapter(None, dense, graph, None)  # type: ignore[arg-type]
    fused = a.retrievers["fusion"]
    assert isinstance(fused, FusionRetriever)
    assert fused.dense is dense and fused.graph is graph
