"""The reader's prompt: what the service's `/answer` and `r2a evaluate answers` send the LLM
(one user message), so that what is counted as a context's cost (ADR's prompt tokens, the
strategies' reader tokens: r2adapter/llm/reader_tokens.py) is what a reader is sent.

Passages are numbered and each is followed by SEPARATOR, so the prompt is
instructions + passage 1 + … + passage k + question, and a passage's tokens do not depend on
its neighbours (r2adapter/llm/reader_tokens.py counts them one by one, exactly).
"""

from __future__ import annotations

from collections.abc import Sequence

ANSWER_PROMPT = (
    "Answer the question using only the passages below. Reply with a short answer (a few "
    "words), no explanation.\n\n{passages}Question: {question}\nAnswer:"
)
SEPARATOR = "\n\n"  # after every passage (and after a context handed in as one string)
# The context is cut here before it is sent. 16,000 characters (about 3,700 SmolLM2 tokens)
# hold 8 passages, the largest strategy, of every corpus here: a passage averages 450-570
# characters and the longest is 6,464 (2Wiki). Passages are cut whole (`passages_sent`).
MAX_CONTEXT_CHARS = 16_000


def passage_text(title: str, text: str) -> str:
    """One passage as the reader reads it, before its number: `title: text`."""
    return f"{title.strip()}: {text.strip()}"


def numbered(i: int, text: str) -> str:
    """Passage `text` (`passage_text`) at 1-based position `i`."""
    return f"[{i}] {text.strip()}"


def passages_sent(texts: Sequence[str]) -> int:
    """How many of `texts` (`passage_text`s, in order) the context holds: whole passages
    while they fit MAX_CONTEXT_CHARS; the first always (cut there when it alone is longer)."""
    used, n = 0, 0
    for i, t in enumerate(texts, 1):
        used += len(numbered(i, t)) + (len(SEPARATOR) if i > 1 else 0)
        if used > MAX_CONTEXT_CHARS and i > 1:
            break
        n = i
    return n


def format_passages(texts: Sequence[str]) -> str:
    """The context of `texts` (`passage_text`s, best first): numbered, whole passages while
    they fit MAX_CONTEXT_CHARS (`passages_sent`)."""
    n = passages_sent(texts)
    return SEPARATOR.join(numbered(i, t) for i, t in enumerate(texts[:n], 1))


def answer_prompt(question: str, context: str) -> str:
    """The one user message for `question` over `context` (`format_passages`, or facts and
    narratives), the context cut at MAX_CONTEXT_CHARS; an empty context gives the
    instructions and the question only."""
    ctx = context[:MAX_CONTEXT_CHARS].strip()
    return ANSWER_PROMPT.format(passages=ctx + SEPARATOR if ctx else "", question=question)
