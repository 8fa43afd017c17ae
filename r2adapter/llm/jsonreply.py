"""Find the JSON object in a model's reply, whatever prose or code fences surround it."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text` (fenced blocks tried first), or None."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for chunk in candidates:
        start = chunk.find("{")
        while start != -1:
            try:
                obj, _ = decoder.raw_decode(chunk, start)
            except ValueError:
                pass
            else:
                if isinstance(obj, dict):
                    return obj
            start = chunk.find("{", start + 1)
    return None
