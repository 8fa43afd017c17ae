"""LLM-written atomic insights (adr.insight_text: llm). Each insight is one call with a
deadline; a call that times out or fails keeps the extractive text, and is counted, so a
slow or absent LLM never leaves the hypergraph half-built. Narratives stay extractive."""

from __future__ import annotations

from collections.abc import Callable

from r2adapter.config import AdrParams
from r2adapter.errors import R2AError

Writer = Callable[[list[str]], tuple[list[str], int]]

# our own words for DHI's "atomic direct insight"
PROMPT = (
    "Rewrite the sentence below as one short, self-contained factual statement that names "
    "every entity explicitly (no pronouns). Reply with the statement only.\n\nSentence: {text}"
)


def llm_identity() -> str:
    from r2adapter.llm import get_llm

    llm = get_llm()
    return "" if llm is None else llm.identity


def write_with(llm: object, texts: list[str], timeout: float) -> tuple[list[str], int]:
    """Each text rewritten by `llm` (an LLM); the extractive text where a call fails."""
    out, fallbacks = [], 0
    for text in texts:
        try:
            reply = llm.complete(  # type: ignore[attr-defined]
                [{"role": "user", "content": PROMPT.format(text=text)}],
                max_tokens=96,
                timeout=timeout,
            ).strip()
        except (R2AError, TimeoutError, OSError):
            reply = ""
        if reply:
            out.append(" ".join(reply.split()))
        else:
            out.append(text)
            fallbacks += 1
    return out, fallbacks


def llm_writer(p: AdrParams, log: Callable[[str], None]) -> tuple[Writer | None, str]:
    """The configured LLM as an insight writer and its identity (for the build signature);
    none configured: (None, ""), extractive texts, and a note in the log."""
    from r2adapter.llm import get_llm

    llm = get_llm()
    if llm is None:
        log("adr.insight_text is llm but no LLM is configured (R2A_LLM_*): extractive insights")
        return None, ""
    return (lambda texts: write_with(llm, texts, p.llm_timeout_s)), llm.identity
