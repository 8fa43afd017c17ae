"""LLM clients behind one protocol: `LLM.complete(messages) -> str`, chosen by `get_llm()`.

`get_llm()` picks the backend named by `R2A_LLM_BACKEND`, else `openai` when
`R2A_LLM_BASE_URL` is set, else none (callers skip with a note). `get_llm(default_local=True)`
falls back to the in-process `local` model instead of none, for callers that need an LLM.
"""

from r2adapter.llm import local, openai_compat
from r2adapter.llm.base import LLM, LLMError, LLMFactory, LLMSettings, Message
from r2adapter.llm.jsonreply import extract_json_object
from r2adapter.llm.openai_compat import OpenAICompatibleLLM

# The backends by name: the one table `get_llm` and R2A_LLM_BACKEND read. `local` imports
# nothing heavy until its model is first used.
LLM_BACKENDS: dict[str, LLMFactory] = {
    "openai": openai_compat.from_settings,
    "local": local.from_settings,
}


def get_llm(name: str | None = None, *, default_local: bool = False) -> LLM | None:
    """The configured LLM client, or None when none is configured.

    With `default_local=True`, "none configured" means the local model (`local` backend,
    loaded lazily on first use) instead of None: for callers that need an LLM (the query
    rewriter, answer generation), while callers that can skip (the LLM-router baseline) keep
    the default and get None.
    """
    cfg = LLMSettings.from_env()
    fallback = "local" if default_local else None
    name = name or cfg.backend or ("openai" if cfg.base_url else fallback)
    if name is None:
        return None
    if name not in LLM_BACKENDS:
        raise LLMError(f"unknown LLM backend '{name}': choose one of {', '.join(LLM_BACKENDS)}")
    return LLM_BACKENDS[name](cfg)


__all__ = [
    "LLM",
    "LLM_BACKENDS",
    "LLMError",
    "LLMSettings",
    "Message",
    "OpenAICompatibleLLM",
    "extract_json_object",
    "get_llm",
]
