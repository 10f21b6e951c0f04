"""Byte-level BPE tokenizer stored in GGUF metadata (llama.cpp's ``tokenizer.ggml.*`` keys).

Reading: :meth:`Tokenizer.from_gguf_metadata` rebuilds a Hugging Face ``tokenizers.Tokenizer`` from
the vocabulary, token types and merges of a GGUF file and picks the pre-tokenizer named by
``tokenizer.ggml.pre`` the way llama.cpp does, so a file tokenizes the same here and there.
Writing: :func:`add_tokenizer_to_gguf` stores a Hugging Face byte-level BPE tokenizer under the same
keys. Decoding is done from a per-token byte table (not through Hugging Face), which gives exact
control of special tokens and lets :class:`StreamDecoder` hand out text token by token without ever
splitting a UTF-8 character. See docs/tokenizer.md.
"""

from __future__ import annotations

import codecs
import json
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import tokenizers

from strata.chat_template import compile_chat_template as _compile_jinja
from strata.chat_template import output_limit, render_chat_template
from strata.errors import FormatError, InvalidArgument

if TYPE_CHECKING:
    import gguf

# GGUF keys (llama.cpp names) this module reads and writes.
_LONG_TEXT = 1 << 16  # characters; above this encode() lets other threads run while it works

KEY_MODEL = "tokenizer.ggml.model"
KEY_PRE = "tokenizer.ggml.pre"
KEY_TOKENS = "tokenizer.ggml.tokens"
KEY_TOKEN_TYPE = "tokenizer.ggml.token_type"
KEY_MERGES = "tokenizer.ggml.merges"
KEY_BOS_ID = "tokenizer.ggml.bos_token_id"
KEY_EOS_ID = "tokenizer.ggml.eos_token_id"
KEY_EOT_ID = "tokenizer.ggml.eot_token_id"
KEY_EOM_ID = "tokenizer.ggml.eom_token_id"
KEY_PAD_ID = "tokenizer.ggml.padding_token_id"
KEY_ADD_BOS = "tokenizer.ggml.add_bos_token"
KEY_ADD_EOS = "tokenizer.ggml.add_eos_token"
KEY_CHAT_TEMPLATE = "tokenizer.chat_template"

# llama.cpp's token types (gguf.TokenType); 0 = undefined.
TOKEN_NORMAL = 1
TOKEN_UNKNOWN = 2
TOKEN_CONTROL = 3
TOKEN_USER_DEFINED = 4
TOKEN_UNUSED = 5
TOKEN_BYTE = 6

# Pre-tokenizer regexes. Hugging Face's tokenizers (Oniguruma) understands the original patterns from
# the models' tokenizer.json; llama.cpp runs hand-rewritten equivalents (no `(?i:...)`) selected by
# the `tokenizer.ggml.pre` label (src/llama-vocab.cpp, llm_tokenizer_bpe).
GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEFAULT: four regexes applied one after the other.
DEFAULT_REGEXES = (
    r"[\p{P}\$\+<=>\^~\|]+",
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
    r"\p{N}+",
    r"[0-9][0-9][0-9]",
)


@dataclass(frozen=True)
class PreTokenizerSpec:
    """One llama.cpp pre-tokenizer: its regexes (applied in order) and the BPE flags it implies."""

    name: str
    regexes: tuple[str, ...]
    ignore_merges: bool = False  # a word that is itself a token is not split (llama3 family)
    add_bos_default: bool = False  # llama.cpp's add_bos default before the add_bos_token key


_GPT2 = PreTokenizerSpec("gpt-2", (GPT2_REGEX,))
_QWEN2 = PreTokenizerSpec("qwen2", (QWEN2_REGEX,))
_LLAMA3 = PreTokenizerSpec("llama-bpe", (LLAMA3_REGEX,), ignore_merges=True, add_bos_default=True)
_DEFAULT = PreTokenizerSpec("default", DEFAULT_REGEXES)

# `tokenizer.ggml.pre` label -> pre-tokenizer, as llama.cpp maps them (the labels we support).
PRE_TOKENIZERS: dict[str, PreTokenizerSpec] = {
    "default": _DEFAULT,
    "gpt-2": _GPT2,
    "gpt2": _GPT2,  # not a llama.cpp label, accepted for convenience; written as "gpt-2"
    "phi-2": _GPT2,
    "qwen2": _QWEN2,
    "stablelm2": _QWEN2,
    "deepseek-r1-qwen": _QWEN2,
    "llama-bpe": _LLAMA3,
    "llama3": _LLAMA3,
    "llama-v3": _LLAMA3,
}

# Token texts llama.cpp treats as end-of-generation when present (llama-vocab.cpp, special_eog_ids).
EOG_TOKEN_TEXTS = frozenset(
    {
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<end_of_turn>",
        "<|endoftext|>",
        "<|eom_id|>",
        "<EOT>",
        "_<EOT>",
        "<|end_of_text|>",
        "<end_of_utterance>",
    }
)

# ChatML, the template of Qwen-family models and of the shipped demo model.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte <-> printable character map used by every byte-level BPE vocabulary."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars, strict=True)}


BYTE_TO_CHAR: dict[int, str] = _bytes_to_unicode()
CHAR_TO_BYTE: dict[str, int] = {c: b for b, c in BYTE_TO_CHAR.items()}


def _normal_token_bytes(text: str) -> bytes:
    # Hugging Face's ByteLevel decoder: map every char back to its byte; a token holding a char outside
    # the byte alphabet is taken as its raw UTF-8 instead.
    try:
        return bytes(CHAR_TO_BYTE[c] for c in text)
    except KeyError:
        return text.encode("utf-8")


def _byte_token_value(text: str) -> bytes | None:
    # "<0xAB>" byte tokens (SentencePiece style) stand for one raw byte.
    if len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
        try:
            return bytes([int(text[3:5], 16)])
        except ValueError:
            return None
    return None


def _pre_tokenizer_json(spec: PreTokenizerSpec) -> dict[str, Any]:
    splits: list[dict[str, Any]] = [
        {"type": "Split", "pattern": {"Regex": rx}, "behavior": "Isolated", "invert": False}
        for rx in spec.regexes
    ]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {"type": "Sequence", "pretokenizers": [*splits, byte_level]}


def _as_str(value: Any, what: str) -> str:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as e:
            raise FormatError(f"{what}: not valid UTF-8") from e
    if not isinstance(value, str):
        raise FormatError(f"{what}: expected a string, got {type(value).__name__}")
    return value


def _as_list(value: Any, what: str) -> list[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise FormatError(f"{what}: expected an array, got {type(value).__name__}")
    return list(value)


def _optional_id(meta: Mapping[str, Any], key: str, n_tokens: int) -> int | None:
    if key not in meta or meta[key] is None:
        return None
    try:
        value = int(meta[key])
    except (TypeError, ValueError) as e:
        raise FormatError(f"{key}: expected an integer token id, got {meta[key]!r}") from e
    if not 0 <= value < n_tokens:
        raise FormatError(f"{key}: token id {value} is outside the vocabulary of {n_tokens} tokens")
    return value


def _optional_bool(meta: Mapping[str, Any], key: str, default: bool) -> bool:
    if key not in meta or meta[key] is None:
        return default
    value = meta[key]
    if isinstance(value, (bool, int, np.bool_, np.integer)):
        return bool(value)
    raise FormatError(f"{key}: expected a boolean, got {value!r}")


class StreamDecoder:
    """Turns a stream of token ids into text pieces, never splitting a UTF-8 character.

    ``push(id)`` returns the text that became complete with that token (often "", e.g. after the
    first byte of an emoji); ``flush()`` ends the stream and returns what is left (an incomplete
    trailing sequence becomes U+FFFD). The pieces concatenate to ``Tokenizer.decode(ids)``.
    """

    def __init__(self, tokenizer: Tokenizer, *, skip_special: bool = True) -> None:
        self._tokenizer = tokenizer
        self._skip_special = skip_special
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> str:
        return self._utf8.decode(self._tokenizer.token_bytes(token_id, skip_special=self._skip_special))

    def push_many(self, token_ids: Iterable[int]) -> str:
        return "".join(self.push(t) for t in token_ids)

    def flush(self) -> str:
        """End of stream: returns the held-back bytes (as U+FFFD if incomplete) and resets."""
        return self._utf8.decode(b"", final=True)

    def reset(self) -> None:
        self._utf8.reset()


class Tokenizer:
    """A byte-level BPE tokenizer with llama.cpp semantics, built from GGUF metadata."""

    def __init__(
        self,
        *,
        tokens: Sequence[str],
        token_types: Sequence[int],
        merges: Sequence[tuple[str, str]],
        pre: str,
        bos_id: int | None = None,
        eos_id: int | None = None,
        pad_id: int | None = None,
        eot_id: int | None = None,
        eom_id: int | None = None,
        add_bos: bool | None = None,
        add_eos: bool = False,
        chat_template: str | None = None,
    ) -> None:
        if len(tokens) != len(token_types):
            raise FormatError(f"{len(tokens)} tokens but {len(token_types)} token types")
        if not tokens:
            raise FormatError("the vocabulary is empty")
        spec = PRE_TOKENIZERS.get(pre)
        if spec is None:
            warnings.warn(
                f"unsupported pre-tokenizer {pre!r}; using llama.cpp's 'default' regexes "
                f"(supported: {', '.join(sorted(PRE_TOKENIZERS))})",
                RuntimeWarning,
                stacklevel=3,
            )
            spec = _DEFAULT
        self._pre = spec
        self._tokens = list(tokens)
        self._types = [int(t) for t in token_types]
        self._bos_id = bos_id
        self._eos_id = eos_id
        self._pad_id = pad_id
        self._add_bos = (spec.add_bos_default and bos_id is not None) if add_bos is None else add_bos
        self._add_eos = add_eos
        self._chat_template = chat_template
        if self._add_bos and bos_id is None:
            raise FormatError(f"{KEY_ADD_BOS} is set but the file has no {KEY_BOS_ID}")
        if self._add_eos and eos_id is None:
            raise FormatError(f"{KEY_ADD_EOS} is set but the file has no {KEY_EOS_ID}")

        self._hf = self._build_hf(merges)
        self._hf_plain: tokenizers.Tokenizer | None = None  # built on first parse_special=False
        self._bytes, self._special_ids = self._build_byte_table()
        eog = {i for i, t in enumerate(self._tokens) if t in EOG_TOKEN_TEXTS}
        eog.update(i for i in (eos_id, eot_id, eom_id) if i is not None)
        self._eog_ids = frozenset(eog)
        self._jinja_template: Any = None

    # ---------------------------------------------------------------------------------- loading
    @classmethod
    def from_gguf_metadata(cls, meta: Mapping[str, Any], *, source: str | None = None,
                           vocab_size: int | None = None) -> Tokenizer:
        """Build from a GGUF key/value mapping (plain Python values: str, int, bool, lists).

        ``source`` (the file's path) starts every error message; ``vocab_size`` (the model's output
        rows) refuses a tokenizer with more tokens than the model can produce or embed.
        """
        try:
            tok = cls._from_metadata(meta)
        except FormatError as e:
            raise FormatError(f"{source}: {e}" if source else str(e)) from None
        if vocab_size is not None and tok.vocab_size > vocab_size:
            where = f"{source}: " if source else ""
            raise FormatError(f"{where}{KEY_TOKENS} has {tok.vocab_size} tokens but the model's vocabulary "
                              f"has {vocab_size} (ids past {vocab_size - 1} lack an embedding and a logit)")
        return tok

    @classmethod
    def _from_metadata(cls, meta: Mapping[str, Any]) -> Tokenizer:
        if KEY_TOKENS not in meta:
            raise FormatError(f"no tokenizer in this file: key {KEY_TOKENS} is missing")
        model = _as_str(meta.get(KEY_MODEL, "gpt2"), KEY_MODEL)
        if model != "gpt2":
            raise FormatError(
                f"{KEY_MODEL} = {model!r} is not supported: strata reads byte-level BPE ('gpt2') tokenizers"
            )
        tokens = [
            _as_str(t, f"{KEY_TOKENS}[{i}]") for i, t in enumerate(_as_list(meta[KEY_TOKENS], KEY_TOKENS))
        ]
        n = len(tokens)
        if n == 0:
            raise FormatError(f"{KEY_TOKENS}: the vocabulary is empty")
        if KEY_TOKEN_TYPE in meta:
            raw_types = _as_list(meta[KEY_TOKEN_TYPE], KEY_TOKEN_TYPE)
            try:
                types = [int(t) for t in raw_types]
            except (TypeError, ValueError) as e:
                raise FormatError(f"{KEY_TOKEN_TYPE}: expected integers") from e
        else:
            types = [TOKEN_NORMAL] * n
        merges: list[tuple[str, str]] = []
        for i, m in enumerate(_as_list(meta.get(KEY_MERGES, []), KEY_MERGES)):
            text = _as_str(m, f"{KEY_MERGES}[{i}]")
            # llama.cpp splits at the first space after the first character (a token may start with one).
            pos = text.find(" ", 1)
            if pos < 0:
                raise FormatError(f"{KEY_MERGES}[{i}] = {text!r}: expected two tokens separated by a space")
            merges.append((text[:pos], text[pos + 1 :]))
        pre = _as_str(meta.get(KEY_PRE, "default"), KEY_PRE)
        template = meta.get(KEY_CHAT_TEMPLATE)
        bos_id = _optional_id(meta, KEY_BOS_ID, n)
        # Without the key, the llama3 family adds BOS (llama.cpp's default) -- if the file has one.
        add_bos_default = PRE_TOKENIZERS.get(pre, _DEFAULT).add_bos_default and bos_id is not None
        return cls(
            tokens=tokens,
            token_types=types,
            merges=merges,
            pre=pre,
            bos_id=bos_id,
            eos_id=_optional_id(meta, KEY_EOS_ID, n),
            pad_id=_optional_id(meta, KEY_PAD_ID, n),
            eot_id=_optional_id(meta, KEY_EOT_ID, n),
            eom_id=_optional_id(meta, KEY_EOM_ID, n),
            add_bos=_optional_bool(meta, KEY_ADD_BOS, add_bos_default),
            add_eos=_optional_bool(meta, KEY_ADD_EOS, False),
            chat_template=None if template is None else _as_str(template, KEY_CHAT_TEMPLATE),
        )

    def _build_hf(self, merges: Sequence[tuple[str, str]]) -> tokenizers.Tokenizer:
        vocab: dict[str, int] = {}
        for i, t in enumerate(self._tokens):
            # A duplicated text keeps its first id (the BPE model maps a text to one id); an empty text
            # gets a placeholder name, as in llama.cpp.
            vocab.setdefault(t or f"[EMPTY_{i}]", i)
        added = [
            {
                "id": i,
                "content": t,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": ty == TOKEN_CONTROL,
            }
            for i, (t, ty) in enumerate(zip(self._tokens, self._types, strict=True))
            if ty in (TOKEN_CONTROL, TOKEN_USER_DEFINED) and t and vocab[t] == i
        ]
        spec = {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": added,
            "normalizer": None,
            "pre_tokenizer": _pre_tokenizer_json(self._pre),
            "post_processor": None,
            "decoder": {
                "type": "ByteLevel",
                "add_prefix_space": False,
                "trim_offsets": False,
                "use_regex": False,
            },
            "model": {
                "type": "BPE",
                "dropout": None,
                "unk_token": None,
                "continuing_subword_prefix": None,
                "end_of_word_suffix": None,
                "fuse_unk": False,
                "byte_fallback": False,
                "ignore_merges": self._pre.ignore_merges,
                "vocab": vocab,
                "merges": [list(m) for m in merges],
            },
        }
        try:
            return tokenizers.Tokenizer.from_str(json.dumps(spec, ensure_ascii=False))
        except Exception as e:  # the Rust side reports e.g. a merge naming a token not in the vocabulary
            raise FormatError(f"inconsistent tokenizer vocabulary/merges: {e}") from e

    def _build_byte_table(self) -> tuple[list[bytes], frozenset[int]]:
        table: list[bytes] = []
        special: set[int] = set()
        for i, (text, ty) in enumerate(zip(self._tokens, self._types, strict=True)):
            if ty in (TOKEN_CONTROL, TOKEN_UNKNOWN):
                special.add(i)
                table.append(text.encode("utf-8"))
            elif ty == TOKEN_UNUSED:
                special.add(i)
                table.append(b"")
            elif ty == TOKEN_USER_DEFINED:
                table.append(text.encode("utf-8"))
            elif ty == TOKEN_BYTE and (value := _byte_token_value(text)) is not None:
                table.append(value)
            else:
                table.append(_normal_token_bytes(text))
        return table, frozenset(special)

    # ------------------------------------------------------------------------------- properties
    @property
    def vocab_size(self) -> int:
        return len(self._tokens)

    @property
    def bos_id(self) -> int | None:
        return self._bos_id

    @property
    def eos_id(self) -> int | None:
        return self._eos_id

    @property
    def pad_id(self) -> int | None:
        return self._pad_id

    @property
    def eog_ids(self) -> frozenset[int]:
        """Ids that end generation: eos/eot/eom and llama.cpp's end-of-turn token texts."""
        return self._eog_ids

    @property
    def add_bos(self) -> bool:
        return self._add_bos

    @property
    def pre(self) -> str:
        """The pre-tokenizer in use (llama.cpp label)."""
        return self._pre.name

    @property
    def chat_template(self) -> str | None:
        return self._chat_template

    @property
    def hf_tokenizer(self) -> tokenizers.Tokenizer:
        """The Hugging Face tokenizer doing the encoding (for batch work; do not mutate)."""
        return self._hf

    def token_text(self, token_id: int) -> str:
        """The vocabulary entry as stored (byte-level characters for normal tokens)."""
        self._check_id(token_id)
        return self._tokens[token_id]

    def token_type(self, token_id: int) -> int:
        self._check_id(token_id)
        return self._types[token_id]

    def token_to_id(self, text: str) -> int | None:
        return self._hf.token_to_id(text)

    def is_special(self, token_id: int) -> bool:
        """Control, unknown and unused tokens: not part of the decoded text by default."""
        return token_id in self._special_ids

    def _check_id(self, token_id: int) -> None:
        if not 0 <= token_id < len(self._tokens):
            raise InvalidArgument(
                f"token id {token_id} is outside the vocabulary of {len(self._tokens)} tokens"
            )

    # ------------------------------------------------------------------------ encode and decode
    def encode(self, text: str, *, add_special: bool = True, parse_special: bool = True) -> list[int]:
        """Token ids of ``text``.

        ``add_special`` adds BOS/EOS where the file asks for it (``add_bos_token``/``add_eos_token``).
        ``parse_special`` turns control-token texts such as ``<|im_end|>`` into their ids; when False
        they are tokenized as plain text (user-defined tokens are always matched, as in llama.cpp).
        """
        if not isinstance(text, str):
            raise InvalidArgument(f"encode() takes a str, got {type(text).__name__}")
        _check_text(text)
        hf = self._hf if parse_special else self._plain_hf()
        if len(text) > _LONG_TEXT:  # encode_batch releases the GIL (encode does not): other threads run
            ids: list[int] = hf.encode_batch([text], add_special_tokens=False)[0].ids
        else:
            ids = hf.encode(text, add_special_tokens=False).ids
        if add_special:
            if self._add_bos and self._bos_id is not None:
                ids.insert(0, self._bos_id)
            if self._add_eos and self._eos_id is not None:
                ids.append(self._eos_id)
        return ids

    def encode_batch(self, texts: Sequence[str], *, add_special: bool = True) -> list[list[int]]:
        """Like :meth:`encode` for many texts, in parallel on the Rust side."""
        texts = list(texts)
        for t in texts:
            if not isinstance(t, str):
                raise InvalidArgument(f"encode_batch() takes strs, got {type(t).__name__}")
            _check_text(t)
        out = [e.ids for e in self._hf.encode_batch(texts, add_special_tokens=False)]
        if add_special and (self._add_bos or self._add_eos):
            for ids in out:
                if self._add_bos and self._bos_id is not None:
                    ids.insert(0, self._bos_id)
                if self._add_eos and self._eos_id is not None:
                    ids.append(self._eos_id)
        return out

    def _plain_hf(self) -> tokenizers.Tokenizer:
        if self._hf_plain is None:
            plain = tokenizers.Tokenizer.from_str(self._hf.to_str())
            plain.encode_special_tokens = True  # special (control) added tokens are not matched in text
            self._hf_plain = plain
        return self._hf_plain

    def token_bytes(self, token_id: int, *, skip_special: bool = True) -> bytes:
        """The bytes a token contributes to the text (b"" for a skipped special token)."""
        self._check_id(token_id)
        if skip_special and token_id in self._special_ids:
            return b""
        return self._bytes[token_id]

    def decode_bytes(self, ids: Iterable[int], *, skip_special: bool = True) -> bytes:
        return b"".join(self.token_bytes(int(i), skip_special=skip_special) for i in ids)

    def decode(self, ids: Iterable[int], *, skip_special: bool = True) -> str:
        """Text of ``ids``; invalid UTF-8 (e.g. a cut multi-byte character) becomes U+FFFD."""
        return self.decode_bytes(ids, skip_special=skip_special).decode("utf-8", errors="replace")

    def stream_decoder(self, *, skip_special: bool = True) -> StreamDecoder:
        """An incremental decoder for streaming generation (see :class:`StreamDecoder`)."""
        return StreamDecoder(self, skip_special=skip_special)

    # ---------------------------------------------------------------------------- chat template
    def apply_chat_template(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool = True,
        **extra: Any,
    ) -> str:
        """Render ``messages`` ([{"role": ..., "content": ...}, ...]) with the file's chat template.

        The template is Jinja (rendered in a sandbox, as transformers does, with a time and an output
        size limit: :mod:`strata.chat_template`); without a template in the file, or without ``jinja2``
        installed, ChatML is used (llama.cpp's default too). ``extra`` goes to the template (e.g.
        ``tools``, ``enable_thinking``). ``InvalidArgument`` when the template fails or hits a limit.
        """
        _check_messages(messages)
        template = self._chat_template or CHATML_TEMPLATE
        renderer = self._jinja(template)
        if renderer is None:
            if template != CHATML_TEMPLATE:
                warnings.warn(
                    "jinja2 is not installed: rendering the chat as ChatML instead of the model's template",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return render_chatml(messages, add_generation_prompt=add_generation_prompt)
        context = {
            "bos_token": self._special_text(self._bos_id),
            "eos_token": self._special_text(self._eos_id),
            **extra,
            "messages": [dict(m) for m in messages],
            "add_generation_prompt": add_generation_prompt,
        }
        return render_chat_template(renderer, context, output_limit(messages))

    def _special_text(self, token_id: int | None) -> str:
        return "" if token_id is None else self._tokens[token_id]

    def _jinja(self, template: str) -> Any:
        if self._jinja_template is not None and self._jinja_template[0] == template:
            return self._jinja_template[1]
        try:
            compiled = _compile_jinja(template)
        except ImportError:
            return None
        self._jinja_template = (template, compiled)
        return compiled


def _check_text(text: str) -> None:
    """Text must be valid Unicode: a lone surrogate (from JSON "\\ud800" or undecodable bytes on the
    command line) has no UTF-8 form and would make the Rust tokenizer raise a bare TypeError."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        shown = text[max(0, e.start - 20) : e.start + 20].encode("utf-8", "backslashreplace").decode()
        raise InvalidArgument(f"text is not valid Unicode: a lone surrogate U+{ord(text[e.start]):04X} at "
                              f"character {e.start} (near {shown!r}); text must be UTF-8") from None


def _check_messages(messages: Sequence[Mapping[str, Any]]) -> None:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidArgument("messages must be a list of {'role': ..., 'content': ...} mappings")
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or "role" not in m:
            raise InvalidArgument(f"messages[{i}] must be a mapping with a 'role' (and usually 'content')")


def render_chatml(messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True) -> str:
    """ChatML without Jinja; identical to rendering :data:`CHATML_TEMPLATE`."""
    _check_messages(messages)
    parts = [f"<|im_start|>{m['role']}\n{m.get('content') or ''}<|im_end|>\n" for m in messages]
    if add_generation_prompt:
        parts.append("<|im_start|>assistant\n")
    return "".join(parts)


# ------------------------------------------------------------------------------------- writing
def detect_pre(hf_tokenizer: tokenizers.Tokenizer) -> str:
    """The llama.cpp pre-tokenizer label matching a Hugging Face tokenizer's pre-tokenizer."""
    spec = json.loads(hf_tokenizer.to_str()).get("pre_tokenizer") or {}
    regexes: list[str] = []
    steps = spec.get("pretokenizers", []) if spec.get("type") == "Sequence" else [spec]
    for step in steps:
        if step.get("type") == "Split":
            pattern = step.get("pattern", {})
            regexes.append(pattern.get("Regex", pattern.get("String", "")))
        elif step.get("type") == "ByteLevel" and step.get("use_regex", True):
            regexes.append(GPT2_REGEX)
    for label in ("qwen2", "gpt-2", "llama-bpe", "default"):
        if tuple(regexes) == PRE_TOKENIZERS[label].regexes:
            return label
    raise InvalidArgument(
        f"cannot tell which llama.cpp pre-tokenizer matches this tokenizer (regexes {regexes!r}); pass pre="
    )


def tokenizer_metadata(
    hf_tokenizer: tokenizers.Tokenizer,
    *,
    pre: str | None = None,
    chat_template: str | None = None,
    bos_token: str | None = None,
    eos_token: str | None = None,
    pad_token: str | None = None,
    add_bos: bool = False,
    add_eos: bool = False,
    vocab_size: int | None = None,
) -> dict[str, Any]:
    """The ``tokenizer.*`` GGUF key/values for a Hugging Face byte-level BPE tokenizer.

    ``pre`` defaults to the label detected from the tokenizer's pre-tokenizer. ``eos_token`` defaults
    to ``<|endoftext|>`` when the vocabulary has it. ``vocab_size`` pads the list with unused
    ``[PAD{id}]`` tokens up to the model's embedding rows (llama.cpp's converter does the same).
    """
    spec = json.loads(hf_tokenizer.to_str())
    model = spec.get("model", {})
    if model.get("type") != "BPE":
        raise InvalidArgument(f"only BPE tokenizers can be stored, this one is {model.get('type')!r}")
    decoder = spec.get("decoder") or {}
    if decoder.get("type") != "ByteLevel":
        raise InvalidArgument(f"only byte-level BPE can be stored (decoder is {decoder.get('type')!r})")
    if spec.get("normalizer") is not None:
        warnings.warn(
            "the tokenizer's normalizer is not stored in GGUF (llama.cpp applies none)",
            RuntimeWarning,
            stacklevel=2,
        )
    pre = detect_pre(hf_tokenizer) if pre is None else pre
    if pre not in PRE_TOKENIZERS:
        raise InvalidArgument(
            f"unsupported pre-tokenizer {pre!r} (supported: {', '.join(sorted(PRE_TOKENIZERS))})"
        )
    pre = PRE_TOKENIZERS[pre].name if pre == "gpt2" else pre

    by_id: dict[int, tuple[str, int]] = {i: (t, TOKEN_NORMAL) for t, i in model.get("vocab", {}).items()}
    for tok in spec.get("added_tokens", []):
        by_id[int(tok["id"])] = (tok["content"], TOKEN_CONTROL if tok.get("special") else TOKEN_USER_DEFINED)
    n = max(by_id) + 1 if by_id else 0
    if vocab_size is not None:
        if vocab_size < n:
            raise InvalidArgument(f"vocab_size {vocab_size} is smaller than the tokenizer's {n} tokens")
        n = vocab_size
    tokens = [by_id.get(i, (f"[PAD{i}]", TOKEN_UNUSED))[0] for i in range(n)]
    types = [by_id.get(i, (f"[PAD{i}]", TOKEN_UNUSED))[1] for i in range(n)]
    merges = [m if isinstance(m, str) else f"{m[0]} {m[1]}" for m in model.get("merges", [])]

    def lookup(name: str | None, key: str) -> int | None:
        if name is None:
            return None
        token_id = hf_tokenizer.token_to_id(name)
        if token_id is None:
            raise InvalidArgument(f"{key}: token {name!r} is not in the vocabulary")
        return int(token_id)

    if eos_token is None and hf_tokenizer.token_to_id("<|endoftext|>") is not None:
        eos_token = "<|endoftext|>"
    meta: dict[str, Any] = {
        KEY_MODEL: "gpt2",
        KEY_PRE: pre,
        KEY_TOKENS: tokens,
        KEY_TOKEN_TYPE: types,
        KEY_MERGES: merges,
    }
    for key, name in ((KEY_BOS_ID, bos_token), (KEY_EOS_ID, eos_token), (KEY_PAD_ID, pad_token)):
        token_id = lookup(name, key)
        if token_id is not None:
            meta[key] = token_id
    if add_bos and KEY_BOS_ID not in meta:
        raise InvalidArgument("add_bos=True needs bos_token")
    if add_eos and KEY_EOS_ID not in meta:
        raise InvalidArgument("add_eos=True needs eos_token")
    meta[KEY_ADD_BOS] = add_bos
    meta[KEY_ADD_EOS] = add_eos
    if chat_template is not None:
        meta[KEY_CHAT_TEMPLATE] = chat_template
    return meta


def add_tokenizer_to_gguf(
    writer: gguf.GGUFWriter,
    hf_tokenizer: tokenizers.Tokenizer,
    *,
    pre: str | None = None,
    chat_template: str | None = None,
    bos_token: str | None = None,
    eos_token: str | None = None,
    pad_token: str | None = None,
    add_bos: bool = False,
    add_eos: bool = False,
    vocab_size: int | None = None,
) -> int:
    """Write a Hugging Face byte-level BPE tokenizer as llama.cpp's GGUF keys; returns the token count.

    Arguments as in :func:`tokenizer_metadata`.
    """
    meta = tokenizer_metadata(
        hf_tokenizer,
        pre=pre,
        chat_template=chat_template,
        bos_token=bos_token,
        eos_token=eos_token,
        pad_token=pad_token,
        add_bos=add_bos,
        add_eos=add_eos,
        vocab_size=vocab_size,
    )
    writer.add_tokenizer_model(meta[KEY_MODEL])
    writer.add_tokenizer_pre(meta[KEY_PRE])
    writer.add_token_list(meta[KEY_TOKENS])
    writer.add_token_types(meta[KEY_TOKEN_TYPE])
    writer.add_token_merges(meta[KEY_MERGES])
    if KEY_BOS_ID in meta:
        writer.add_bos_token_id(meta[KEY_BOS_ID])
    if KEY_EOS_ID in meta:
        writer.add_eos_token_id(meta[KEY_EOS_ID])
    if KEY_PAD_ID in meta:
        writer.add_pad_token_id(meta[KEY_PAD_ID])
    writer.add_add_bos_token(meta[KEY_ADD_BOS])
    writer.add_add_eos_token(meta[KEY_ADD_EOS])
    if KEY_CHAT_TEMPLATE in meta:
        writer.add_chat_template(meta[KEY_CHAT_TEMPLATE])
    return len(meta[KEY_TOKENS])


__all__ = [
    "CHATML_TEMPLATE",
    "PRE_TOKENIZERS",
    "QWEN2_REGEX",
    "PreTokenizerSpec",
    "StreamDecoder",
    "Tokenizer",
    "add_tokenizer_to_gguf",
    "detect_pre",
    "render_chatml",
    "tokenizer_metadata",
]
