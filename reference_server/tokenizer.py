"""The reference server's tokenizer: a byte-level BPE trained offline on text the repo ships.

One tokenizer serves usage counts, count_tokens, /tokenize and the engines, so every number the
server reports is counted the same way. Special tokens (chat-template markers, `<think>`,
`<tool_call>`) are atomic, as in real model tokenizers. `harnesscheck make-model` reuses `train`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer as _HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

DATA = Path(__file__).parent / "data"
DEFAULT_PATH = DATA / "tokenizer.json"

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<|begin_of_sentence|>",
    "<|end_of_sentence|>",
    "<|User|>",
    "<|Assistant|>",
]


class Tokenizer:
    """A thin wrapper: encode/decode without implicit special tokens, plus an incremental decoder."""

    def __init__(self, hf: _HFTokenizer) -> None:
        self.hf = hf
        self.vocab_size = hf.get_vocab_size()

    @classmethod
    def from_file(cls, path: str | Path) -> Tokenizer:
        return cls(_HFTokenizer.from_file(str(path)))

    def encode(self, text: str) -> list[int]:
        # encode_batch_fast (tokenizers >= 0.21) releases the GIL: a long prompt tokenized on a worker
        # thread does not stall the event loop's streams; the ids are the same as encode's.
        fast = getattr(self.hf, "encode_batch_fast", None)
        if fast is not None:
            return fast([text], add_special_tokens=False)[0].ids
        return self.hf.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        return self.hf.decode(list(ids), skip_special_tokens=False)

    def token_strs(self, ids: Sequence[int]) -> list[str]:
        return [self.decode([i]) for i in ids]

    def token_id(self, token: str) -> int:
        found = self.hf.token_to_id(token)
        if found is None:
            raise KeyError(token)
        return found

    def count(self, text: str) -> int:
        return len(self.encode(text))


class IncrementalDecoder:
    """Token ids in, text out, never splitting a multi-byte character (as vLLM's detokenizer)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.emitted = 0  # characters of decode(ids[start:]) already given out
        self.start = 0

    def push(self, ids: Iterable[int]) -> str:
        self.ids.extend(ids)
        text = self.tokenizer.decode(self.ids[self.start :])
        if text.endswith("\ufffd"):  # an incomplete UTF-8 sequence: wait for the next token
            return ""
        out = text[self.emitted :]
        # Restart the window so decoding stays O(window), not O(turn).
        self.start = len(self.ids)
        self.emitted = 0
        return out


def train(texts: Iterable[str], *, vocab_size: int = 8192) -> _HFTokenizer:
    hf = _HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator(texts, trainer=trainer)
    return hf


def shipped_corpus() -> list[str]:
    """Text the repo ships: its docs, scenarios and sources (used to build the default tokenizer)."""
    root = Path(__file__).resolve().parent.parent
    texts = []
    for pattern in ("docs/*.md", "README.md", "scenarios/**/*.yaml", "**/*.py", "**/*.jinja"):
        for path in sorted(root.glob(pattern)):
            if ".venv" in path.parts:
                continue
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
    return texts


@lru_cache(maxsize=None)
def load(path: str | None = None) -> Tokenizer:
    return Tokenizer.from_file(path or DEFAULT_PATH)


if __name__ == "__main__":  # rebuild the shipped tokenizer: python -m harnesscheck.reference_server.tokenizer
    DATA.mkdir(exist_ok=True)
    train(shipped_corpus()).save(str(DEFAULT_PATH))
    print(f"wrote {DEFAULT_PATH}")
