"""The k-way router: one suitability head per strategy over the routing features, trained
with the paper's focal BCE averaged over heads, and the cost-ordered cascade over them.

Inference is a standardisation and one (d × S) product in numpy, a few microseconds beyond
the features. Saved as a folder (config.json + heads.npz) that the MLflow model wraps.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from r2adapter.config import KwayParams
from r2adapter.errors import R2AError
from r2adapter.kway.cascade import (
    Costs,
    choose,
    cost_cap,
    fallback_index,
    outcome,
    tune_thresholds,
)
from r2adapter.kway.features import KwayFeatures, embedding_columns
from r2adapter.kway.strategies import parse_strategy
from r2adapter.route.evidence import GraphSource

MODEL = "r2a-router-kway"  # the k-way router's registered model in MLflow


@dataclass(frozen=True)
class KwayConfig:
    strategies: tuple[str, ...]
    mean_ms: tuple[float, ...]  # on the training labels: the cascade's order and the cap
    mean_passages: tuple[float, ...]
    mean_recall: tuple[float, ...]
    thresholds: tuple[float, ...]
    fallback: str
    features: tuple[str, ...]
    budget: float
    max_passages: float
    confidence: float
    corpus: str = ""
    encoder: str = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class KwayDecision:
    strategy: list[str]  # per query
    k: list[int]
    scores: np.ndarray  # (n, S) head probabilities
    fallback: np.ndarray  # bool: no head cleared its threshold
    strategies: tuple[str, ...]


class KwayRouter:
    name = "kway"

    def __init__(self, cfg: KwayConfig, heads: dict[str, np.ndarray]) -> None:
        self.cfg = cfg
        self.w, self.b = heads["w"], heads["b"]
        self.mean, self.std = heads["mean"], heads["std"]
        self.tau = np.asarray(cfg.thresholds, dtype=np.float64)
        self.order = np.argsort(np.asarray(cfg.mean_ms), kind="stable")
        self.fallback_ix = cfg.strategies.index(cfg.fallback)
        self._features: KwayFeatures | None = None
        for s in cfg.strategies:
            parse_strategy(s)  # a strategy whose retriever is gone: one line, at load

    def bind(self, dataset: str, graphs: GraphSource) -> KwayRouter:
        self._features = KwayFeatures(dataset, graphs, self.cfg.features)
        return self

    def features(self, questions: Sequence[str], qvecs: np.ndarray) -> np.ndarray:
        if self._features is None:
            raise R2AError("the k-way router reads corpus features: bind it to a dataset first")
        return self._features(questions, qvecs)

    def probs(self, x: np.ndarray) -> np.ndarray:
        z = ((x - self.mean) / self.std) @ self.w + self.b
        return 1.0 / (1.0 + np.exp(-z))

    def choose(self, x: np.ndarray, tau: np.ndarray | None = None) -> np.ndarray:
        """(n,) strategy index per row of features `x`: the cascade's choice (kway/cascade.py
        `choose`) at this router's τ, or at `tau` (a calibrated or searched one)."""
        return choose(self.probs(x), self.tau if tau is None else tau, self.order, self.fallback_ix)

    def decide(self, questions: Sequence[str], qvecs: np.ndarray) -> KwayDecision:
        p = self.probs(self.features(questions, qvecs))
        picked = choose(p, self.tau, self.order, self.fallback_ix)  # what self.choose does
        names = [self.cfg.strategies[i] for i in picked]
        clears = (p >= self.tau[None, :]).any(axis=1)
        return KwayDecision(
            names, [parse_strategy(n).k for n in names], p, np.asarray(~clears), self.cfg.strategies
        )

    def _with(self, **changes: Any) -> KwayRouter:
        """The same heads (and bound features) under a config with `changes`."""
        r = KwayRouter(
            replace(self.cfg, **changes),
            {"w": self.w, "b": self.b, "mean": self.mean, "std": self.std},
        )
        r._features = self._features
        return r

    def with_thresholds(self, tau: np.ndarray) -> KwayRouter:
        return self._with(thresholds=tuple(float(t) for t in tau))

    def with_costs(self, mean_ms: np.ndarray, mean_passages: np.ndarray) -> KwayRouter:
        """The same heads and thresholds priced at other mean costs (another corpus's): the
        cascade's order follows them."""
        return self._with(
            mean_ms=tuple(float(v) for v in mean_ms),
            mean_passages=tuple(float(v) for v in mean_passages),
        )

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(asdict(self.cfg), indent=2))
        np.savez(folder / "heads.npz", w=self.w, b=self.b, mean=self.mean, std=self.std)

    @classmethod
    def load(cls, folder: Path) -> KwayRouter:
        try:
            raw = json.loads((folder / "config.json").read_text())
            known = {f.name for f in fields(KwayConfig)}
            cfg = KwayConfig(
                **{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items() if k in known}  # type: ignore[arg-type]
            )
            with np.load(folder / "heads.npz") as z:
                heads = {k: z[k] for k in ("w", "b", "mean", "std")}
        except (OSError, KeyError, TypeError, ValueError) as e:
            raise R2AError(
                f"{folder}: not a saved k-way router ({str(e).splitlines()[0]})"
            ) from None
        return cls(cfg, heads)


def fallback_candidates(
    mean_recall: np.ndarray, mean_ps: np.ndarray, mean_ms: np.ndarray, cap: float, p: KwayParams
) -> list[int]:
    """The fallbacks `kway.fallback` allows: `best`, the best single strategy within the
    passage budget (ADR's conservative choice); `affordable`, the best one within the cost
    cap too; `searched`, both, the validation search picking one."""
    best = fallback_index(mean_recall, mean_ps, p.max_passages)
    affordable = fallback_index(mean_recall, mean_ps, p.max_passages, mean_ms, cap)
    pick = {"best": [best], "affordable": [affordable], "searched": [best, affordable]}
    return list(dict.fromkeys(pick[p.fallback]))


def focal_bce(logits: Any, y: Any, alpha: float, gamma: float) -> Any:
    """R²Adapter eq. 2 per head, averaged over heads and queries."""
    import torch

    p = torch.sigmoid(logits)
    pt = torch.where(y > 0.5, p, 1 - p)
    at = torch.where(y > 0.5, torch.full_like(p, alpha), torch.full_like(p, 1 - alpha))
    ce = torch.nn.functional.binary_cross_entropy_with_logits(logits, y, reduction="none")
    return (at * (1 - pt).pow(gamma) * ce).mean()


@dataclass
class FitHistory:
    steps: list[int]
    val_recall: list[float]
    val_ms: list[float]
    feasible: list[bool]
    best_step: int


def fit_kway(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_val: np.ndarray,
    val: Costs,
    train: Costs,
    strategies: Sequence[str],
    p: KwayParams,
    corpus: str = "",
    encoder: str = "all-MiniLM-L6-v2",
) -> tuple[KwayRouter, FitHistory]:
    """Heads trained full-batch (Adam), the cascade's τ searched on the validation queries
    every `eval_every` steps (Algorithm 2, generalised); the best (state, τ) is returned."""
    import torch

    torch.manual_seed(p.seed)
    mean = x_train.mean(axis=0)
    std = x_train.std(axis=0) + 1e-6
    if not p.standardize_embedding:  # the unit-norm embedding as the encoder gives it
        emb = embedding_columns(p.features, x_train.shape[1])
        mean[emb], std[emb] = 0.0, 1.0
    xt = torch.from_numpy(((x_train - mean) / std).astype(np.float32))
    yt = torch.from_numpy(y_train.astype(np.float32))
    xv = ((x_val - mean) / std).astype(np.float32)
    d, s = xt.shape[1], yt.shape[1]
    lin = torch.nn.Linear(d, s)
    opt = torch.optim.AdamW(lin.parameters(), lr=p.lr, weight_decay=p.weight_decay)
    mean_ms = train.ms.mean(axis=0)
    mean_ps = train.passages.mean(axis=0)
    mean_recall = train.recall.mean(axis=0)
    order = np.argsort(mean_ms, kind="stable")
    cap = cost_cap(mean_ms, p.budget)
    fallbacks = fallback_candidates(mean_recall, mean_ps, mean_ms, cap, p)
    hist = FitHistory([], [], [], [], 0)
    best: tuple[float, np.ndarray, np.ndarray, np.ndarray, int] | None = None
    for step in range(1, p.epochs + 1):
        opt.zero_grad()
        loss = focal_bce(lin(xt), yt, p.alpha, p.gamma)
        loss.backward()
        opt.step()
        if step % p.eval_every and step != p.epochs:
            continue
        with torch.no_grad():
            w = lin.weight.detach().numpy().T.astype(np.float64)
            b = lin.bias.detach().numpy().astype(np.float64)
        probs = 1.0 / (1.0 + np.exp(-(xv @ w + b)))
        step_best: tuple[float, np.ndarray, bool, int] | None = None
        for fb in fallbacks:  # the fallback is searched with τ, on the validation queries
            tau, score, ok = tune_thresholds(probs, val, order, fb, cap, p)
            if step_best is None or score > step_best[0] + 1e-12:
                step_best = (score, tau, ok, fb)
        assert step_best is not None
        score, tau, ok, fb = step_best
        r, ms, _ = outcome(choose(probs, tau, order, fb), val)
        hist.steps.append(step)
        hist.val_recall.append(r)
        hist.val_ms.append(ms)
        hist.feasible.append(ok)
        if best is None or score > best[0] + 1e-12:
            best = (score, w, b, tau, fb)
            hist.best_step = step
    assert best is not None
    _, w, b, tau, fb = best
    cfg = KwayConfig(
        tuple(strategies),
        tuple(float(v) for v in mean_ms),
        tuple(float(v) for v in mean_ps),
        tuple(float(v) for v in mean_recall),
        tuple(float(t) for t in tau),
        strategies[fb],
        tuple(p.features),
        p.budget,
        p.max_passages,
        p.confidence,
        corpus,
        encoder,
    )
    return KwayRouter(cfg, {"w": w, "b": b, "mean": mean, "std": std}), hist


def load_kway(alias: str = "champion", version: str | None = None) -> tuple[Any, str]:
    """The registered k-way router behind an alias (or that `version`), and its version."""
    from r2adapter.registry.models import load_alias

    return load_alias(
        MODEL,
        alias,
        "`r2a train --router kway` then `r2a promote --router kway`",
        version=version,
    )
