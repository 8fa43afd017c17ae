"""LLM clients behind one protocol: `LLM.complete(messages) -> str`, chosen by `get_llm()`."""

from r2adapter.llm.base import LLM, LLMError, LLMSettings, Message, get_llm, register_llm
from r2adapter.llm.jsonreply import extract_json_object
from r2adapter.llm.openai_compat import OpenAICompatibleLLM

__all__ = [
    "LLM",
    "LLMError",
    "LLMSettings",
    "Message",
    "OpenAICompatibleLLM",
    "extract_json_object",
    "get_llm",
    "register_llm",
]
