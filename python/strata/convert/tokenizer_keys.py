"""How converters take tokenizer keys (``tokenizer.ggml.*``), and a minimal byte-level vocabulary.

A converter accepts ``tokenizer``: None (no tokenizer keys), a callable ``f(writer)`` that adds the
keys to a ``gguf.GGUFWriter``, or an object with an ``add_to_gguf(writer)`` method. The real
tokenizers (Hugging Face ``tokenizer.json``) are written by ``strata.tokenizer``; the byte-level
vocabulary below is for tests and random models.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gguf import GGUFWriter, TokenType

from strata.errors import InvalidArgument

TokenizerWriter = Callable[[GGUFWriter], None]


def apply_tokenizer(writer: GGUFWriter, tokenizer: Any) -> None:
    if tokenizer is None:
        return
    if hasattr(tokenizer, "add_to_gguf"):
        tokenizer.add_to_gguf(writer)
    elif callable(tokenizer):
        tokenizer(writer)
    else:
        raise InvalidArgument("tokenizer must be None, a callable(writer) or have add_to_gguf(writer)")


def gpt2_byte_symbols() -> list[str]:
    """GPT-2's printable stand-in for each byte value (the byte-level BPE alphabet), by byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    symbols: dict[int, str] = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in symbols:
            symbols[b] = chr(256 + extra)
            extra += 1
    return [symbols[b] for b in range(256)]


def byte_level_tokenizer(vocab_size: int) -> TokenizerWriter:
    """A gpt2-style vocabulary of exactly vocab_size tokens: ids 0..255 the bytes, 256 the merge of
    two spaces ("ĠĠ", so the merges list is not empty), 257 ``<|endoftext|>`` (bos = eos), then
    ``<|reserved_i|>`` control tokens up to vocab_size."""
    if vocab_size < 258:
        raise InvalidArgument(f"a byte-level vocabulary needs vocab_size >= 258, got {vocab_size}")
    space = gpt2_byte_symbols()[ord(" ")]
    tokens = gpt2_byte_symbols() + [space + space, "<|endoftext|>"]
    tokens += [f"<|reserved_{i}|>" for i in range(vocab_size - len(tokens))]
    types = [int(TokenType.NORMAL)] * 257 + [int(TokenType.CONTROL)] * (vocab_size - 257)

    def add(writer: GGUFWriter) -> None:
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("default")
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        writer.add_token_merges([f"{space} {space}"])
        writer.add_bos_token_id(257)
        writer.add_eos_token_id(257)

    return add
