"""The trained routers by name: the one table the registry, the CLI's `choices`, the
reports and the service read (the baselines name themselves in route/baselines.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RouterKind:
    name: str  # `r2a promote --router`, R2A_ROUTER, the reports' key
    model: str  # the MLflow registered model
    backbone: str  # the backbone the pipeline trains under this name (params.yaml router_<it>)


TRAINED_ROUTERS: dict[str, RouterKind] = {
    "r2a": RouterKind("r2a", "r2a-router", "minilm"),  # the fine-tuned encoder (the paper's)
    "r2a_embed": RouterKind("r2a_embed", "r2a-router-embed", "embedding"),  # a head over the
    # retrieval embedding
}


def router_kind(backbone: str) -> str:
    """The name a router trained on `backbone` is registered under: any transformer backbone
    is `r2a`, the head over the retrieval embedding `r2a_embed`."""
    return "r2a_embed" if backbone == "embedding" else "r2a"
