"""Prompt files: `r2adapter/prompts/<name>.md`, one message per `## <stage>.<role>` heading.

Roles are `system`, `example_user`, `example_assistant` (an optional worked example) and
`user`; `{field}` placeholders are filled by `messages()`, and no other braces are touched, so
JSON in a prompt needs no escaping.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from r2adapter.llm.base import LLMError, Message

_HEADING = re.compile(r"^## ([\w-]+)\.(system|example_user|example_assistant|user)\s*$", re.M)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_ROLES = (
    ("system", "system"),
    ("example_user", "user"),
    ("example_assistant", "assistant"),
    ("user", "user"),
)


@dataclass(frozen=True)
class PromptFile:
    name: str
    sections: dict[str, str]  # "<stage>.<role>" -> template
    digest: str  # of the file's text: part of cache keys built on its output

    def messages(self, stage: str, **fields: str) -> list[Message]:
        if f"{stage}.user" not in self.sections:
            raise LLMError(f"prompt file '{self.name}' has no '## {stage}.user' section")
        out: list[Message] = []
        for key, role in _ROLES:
            if (template := self.sections.get(f"{stage}.{key}")) is not None:
                out.append({"role": role, "content": _fill(template, fields)})
        return out


def _fill(template: str, fields: dict[str, str]) -> str:
    # One pass, so a field's value that contains "{passage}" is never expanded again.
    return re.sub(r"\{(\w+)\}", lambda m: fields.get(m.group(1), m.group(0)), template)


def parse_prompts(name: str, text: str) -> PromptFile:
    body = _COMMENT.sub("", text)
    heads = list(_HEADING.finditer(body))
    sections = {
        f"{h.group(1)}.{h.group(2)}": body[h.end() : nxt.start() if nxt else len(body)].strip()
        for h, nxt in zip(heads, [*heads[1:], None], strict=True)
    }
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return PromptFile(name, sections, digest)


@cache
def load_prompts(name: str) -> PromptFile:
    try:
        text = (resources.files("r2adapter") / "prompts" / f"{name}.md").read_text("utf-8")
    except (FileNotFoundError, NotADirectoryError):
        raise LLMError(
            f"prompt file r2adapter/prompts/{name}.md is missing: reinstall r2adapter"
        ) from None
    return parse_prompts(name, text)
