"""Training the demo model's byte-level BPE tokenizer with Hugging Face ``tokenizers``.

The pipeline is the one llama.cpp calls "qwen2": the Qwen2 split regex, then GPT-2's byte-to-character
map, no normalizer (so every string round-trips exactly), a ByteLevel decoder. The result is stored in
GGUF by :func:`strata.tokenizer.add_tokenizer_to_gguf` with ``pre="qwen2"``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from strata.tokenizer import QWEN2_REGEX

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
# Ids 0, 1, 2 of every tokenizer trained here: document separator, then the ChatML markers.
SPECIAL_TOKENS: tuple[str, ...] = (ENDOFTEXT, IM_START, IM_END)
N_BYTES = 256


def new_bytelevel_bpe() -> Tokenizer:
    """An empty byte-level BPE tokenizer with the qwen2 pre-tokenizer and a ByteLevel decoder."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    return tok


def train_bytelevel_bpe(
    texts: Iterable[str],
    *,
    vocab_size: int = 8192,
    special_tokens: Sequence[str] = SPECIAL_TOKENS,
    min_frequency: int = 2,
    length: int | None = None,
    show_progress: bool = False,
) -> Tokenizer:
    """Train on ``texts``; ids: the special tokens first, then the 256 byte symbols, then merges.

    Deterministic for the same texts (the trainer breaks count ties by pair id).
    """
    floor = N_BYTES + len(special_tokens)
    if vocab_size < floor:
        raise ValueError(f"vocab_size {vocab_size} is below the {floor} byte and special tokens")
    tok = new_bytelevel_bpe()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=show_progress,
    )
    tok.train_from_iterator(texts, trainer=trainer, length=length)
    return tok
