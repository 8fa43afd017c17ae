"""The reader's prompt: what the service's `/answer` sends the LLM (one user message), so
that what is counted as a context's cost (ADR's prompt tokens) is what a reader is sent."""

from __future__ import annotations

ANSWER_PROMPT = (
    "Answer the question using only the passages below. Reply with a short answer (a few "
    "words), no explanation.\n\n{passages}\n\nQuestion: {question}\nAnswer:"
)
MAX_CONTEXT_CHARS = 6000  # the context is cut here before it is sent


def answer_prompt(question: str, context: str) -> str:
    """The one user message for `question` over `context` (passages, or facts and
    narratives), the context cut at MAX_CONTEXT_CHARS."""
    return ANSWER_PROMPT.format(passages=context[:MAX_CONTEXT_CHARS], question=question)
