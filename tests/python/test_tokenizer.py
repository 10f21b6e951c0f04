"""strata.tokenizer: GGUF-stored byte-level BPE against the Hugging Face tokenizer it was written from."""

from __future__ import annotations

import random
import sysconfig
import warnings
from pathlib import Path
from typing import Any

import gguf
import pytest
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

import strata
from strata.tokenizer import (
    CHATML_TEMPLATE,
    TOKEN_CONTROL,
    TOKEN_NORMAL,
    TOKEN_UNUSED,
    add_tokenizer_to_gguf,
    detect_pre,
    render_chatml,
    tokenizer_metadata,
)
from strata.tokenizer import (
    Tokenizer as StrataTokenizer,
)
from strata_train.tokenizer_train import SPECIAL_TOKENS, train_bytelevel_bpe

# The pre-tokenizer regex exactly as Qwen2's tokenizer.json spells it (written out here, not imported,
# so a typo in strata's copy would show up as different ids).
QWEN2_TOKENIZER_JSON_REGEX = (
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
)
LLAMA3_TOKENIZER_JSON_REGEX = (
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
)

UNICODE_SAMPLES = [
    "日本語のテキストと中文混合，标点。",
    "emoji 🎉🚀👩‍👩‍👧 flags 🇫🇷 skin 👍🏽",
    "combining e\u0301 a\u0308 n\u0303 and precomposed é ä ñ; Hangul 한국어",
    "RTL: שלום עולם and مرحبا بالعالم ‏mixed‎ marks",
    "math ∑∫√∞ ≠ ≤ ½ ⅞ and zero-width\u200bjoiner\u200d, BOM \ufeff",
]
WHITESPACE_SAMPLES = [
    "\ttabs\t\tand  two  spaces   three",
    "lines\n\n\nblank\n \n\t\n",
    "windows\r\nline\r\nendings\r\n\r\n",
    "   leading and trailing   ",
    " ",
    "",
    "\n",
]
CODE_SAMPLES = [
    'def f(x: int) -> str:\n    """Doc."""\n    return f"{x!r:>10}"  # it\'s ok\n',
    "class A(B, metaclass=M):\n\tpass\n\nif __name__ == '__main__':\n    print(0x1F, 1_000_000, 3.14e-10)\n",
    "lambda *a, **k: [i**2 for i in range(10) if i % 2 == 0]\n",
]
ALL_SAMPLES = UNICODE_SAMPLES + WHITESPACE_SAMPLES + CODE_SAMPLES


def _training_texts() -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = [(stdlib / name).read_text(encoding="utf-8") for name in ("textwrap.py", "shlex.py", "string.py")]
    return texts + UNICODE_SAMPLES * 3 + WHITESPACE_SAMPLES + CODE_SAMPLES


def metadata_from_gguf(path: Path) -> dict[str, Any]:
    """Every key/value of a GGUF file as plain Python values (what strata's own reader hands over)."""
    reader = gguf.GGUFReader(path)
    return {name: field.contents() for name, field in reader.fields.items() if not name.startswith("GGUF.")}


def write_gguf(path: Path, hf: Tokenizer, **kwargs: Any) -> None:
    writer = gguf.GGUFWriter(path, arch="strata")
    add_tokenizer_to_gguf(writer, hf, **kwargs)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="module")
def qwen_style_hf() -> Tokenizer:
    """A Qwen2-style byte-level BPE trained in-test with the Qwen2 regex spelled as in tokenizer.json."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_TOKENIZER_JSON_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1200,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_training_texts(), trainer=trainer)
    return tok


@pytest.fixture(scope="module")
def loaded(qwen_style_hf: Tokenizer, tmp_path_factory: pytest.TempPathFactory) -> StrataTokenizer:
    path = tmp_path_factory.mktemp("gguf") / "tok.gguf"
    write_gguf(path, qwen_style_hf, chat_template=CHATML_TEMPLATE)
    return StrataTokenizer.from_gguf_metadata(metadata_from_gguf(path))


def test_metadata_keys_written_and_read(qwen_style_hf: Tokenizer, tmp_path: Path) -> None:
    path = tmp_path / "t.gguf"
    write_gguf(path, qwen_style_hf, chat_template=CHATML_TEMPLATE, pad_token="<|im_end|>")
    meta = metadata_from_gguf(path)
    assert meta["tokenizer.ggml.model"] == "gpt2"
    assert meta["tokenizer.ggml.pre"] == "qwen2"
    assert len(meta["tokenizer.ggml.tokens"]) == qwen_style_hf.get_vocab_size() == 1200
    assert meta["tokenizer.ggml.token_type"][:4] == [TOKEN_CONTROL] * 3 + [TOKEN_NORMAL]
    assert meta["tokenizer.ggml.merges"][0].count(" ") == 1
    assert meta["tokenizer.ggml.eos_token_id"] == 0  # <|endoftext|> by default
    assert meta["tokenizer.ggml.padding_token_id"] == 2
    assert meta["tokenizer.ggml.add_bos_token"] is False
    assert meta["tokenizer.chat_template"] == CHATML_TEMPLATE
    tok = StrataTokenizer.from_gguf_metadata(meta)
    assert (tok.vocab_size, tok.eos_id, tok.bos_id, tok.pad_id, tok.pre) == (1200, 0, None, 2, "qwen2")
    assert tok.chat_template == CHATML_TEMPLATE
    assert tok.eog_ids == frozenset({0, 2})  # eos and <|im_end|>


@pytest.mark.parametrize("text", ALL_SAMPLES)
def test_same_ids_as_hf_and_roundtrip(loaded: StrataTokenizer, qwen_style_hf: Tokenizer, text: str) -> None:
    ids = loaded.encode(text)
    assert ids == qwen_style_hf.encode(text).ids
    assert loaded.decode(ids) == text
    assert loaded.decode(ids) == qwen_style_hf.decode(ids)


def test_same_ids_as_hf_on_real_code(loaded: StrataTokenizer, qwen_style_hf: Tokenizer) -> None:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = [
        (stdlib / n).read_text(encoding="utf-8") for n in ("argparse.py", "json/decoder.py", "codecs.py")
    ]
    for text, enc in zip(texts, qwen_style_hf.encode_batch(texts), strict=True):
        ids = loaded.encode(text)
        assert ids == enc.ids
        assert loaded.decode(ids) == text
    assert loaded.encode_batch(texts) == [loaded.encode(t) for t in texts]


def test_qwen2_pre_tokenizer_splits(loaded: StrataTokenizer) -> None:
    words = [
        w
        for w, _ in loaded.hf_tokenizer.pre_tokenizer.pre_tokenize_str("Hello world123 it'S\n\n  x\tdef f():")
    ]
    assert words == ["Hello", "Ġworld", "1", "2", "3", "Ġit", "'S", "ĊĊ", "Ġ", "Ġx", "ĉdef", "Ġf", "():"]
    assert len(loaded.encode("9876543210")) == 10  # qwen2 never merges digits


def test_decode_every_token_like_hf(loaded: StrataTokenizer, qwen_style_hf: Tokenizer) -> None:
    for i in range(loaded.vocab_size):
        assert loaded.decode([i], skip_special=False) == qwen_style_hf.decode([i], skip_special_tokens=False)
    rng = random.Random(0)
    for _ in range(200):  # random id runs: cut and invalid UTF-8 must be replaced like Rust's lossy decode
        ids = [rng.randrange(3, loaded.vocab_size) for _ in range(rng.randrange(1, 12))]
        assert loaded.decode(ids) == qwen_style_hf.decode(ids)


def test_special_tokens(loaded: StrataTokenizer, qwen_style_hf: Tokenizer) -> None:
    text = "a<|im_start|>user\nhi<|im_end|>\n<|endoftext|>"
    ids = loaded.encode(text)
    assert ids == qwen_style_hf.encode(text).ids
    assert [1, 2, 0] == [i for i in ids if i < 3]
    assert loaded.decode(ids) == "auser\nhi\n"
    assert loaded.decode(ids, skip_special=False) == text
    plain = loaded.encode(text, parse_special=False)
    assert all(i >= 3 for i in plain)
    assert loaded.decode(plain) == text
    assert loaded.encode(text) == ids  # the parse_special=False copy leaves the main tokenizer alone
    assert loaded.is_special(0) and not loaded.is_special(300)
    assert loaded.token_type(2) == TOKEN_CONTROL
    assert loaded.token_to_id("<|im_end|>") == 2


def test_streaming_decoder_never_splits_a_character(loaded: StrataTokenizer) -> None:
    split_inside_a_char = 0
    for text in ALL_SAMPLES:
        ids = loaded.encode(text)
        stream = loaded.stream_decoder()
        so_far = ""
        for i in ids:
            piece = stream.push(i)
            assert "\ufffd" not in piece
            so_far += piece
            assert text.startswith(so_far)
            try:
                loaded.token_bytes(i).decode("utf-8")
            except UnicodeDecodeError:
                split_inside_a_char += 1
        assert so_far + stream.flush() == text
    assert split_inside_a_char > 0  # the samples do put token boundaries inside characters


def test_streaming_decoder_matches_decode_on_random_ids(loaded: StrataTokenizer) -> None:
    rng = random.Random(1)
    for _ in range(200):
        ids = [rng.randrange(0, loaded.vocab_size) for _ in range(rng.randrange(0, 16))]
        skip = rng.random() < 0.5
        stream = loaded.stream_decoder(skip_special=skip)
        pieces = [stream.push(i) for i in ids] + [stream.flush()]
        assert "".join(pieces) == loaded.decode(ids, skip_special=skip)
    stream = loaded.stream_decoder()
    emoji_ids = loaded.encode("🎉")
    assert len(emoji_ids) > 1 and stream.push(emoji_ids[0]) == ""  # held back: an incomplete character
    stream.reset()
    assert stream.push_many(loaded.encode("ok")) + stream.flush() == "ok"


def test_add_bos_eos_and_padding(qwen_style_hf: Tokenizer, tmp_path: Path) -> None:
    path = tmp_path / "bos.gguf"
    write_gguf(path, qwen_style_hf, bos_token="<|im_start|>", add_bos=True, add_eos=True, vocab_size=1210)
    tok = StrataTokenizer.from_gguf_metadata(metadata_from_gguf(path))
    assert tok.vocab_size == 1210
    assert tok.token_type(1205) == TOKEN_UNUSED and tok.token_text(1205) == "[PAD1205]"
    assert tok.decode([1205]) == "" and tok.decode([1205], skip_special=False) == ""
    ids = tok.encode("hello")
    assert ids[0] == 1 and ids[-1] == 0
    assert tok.encode("hello", add_special=False) == ids[1:-1]
    assert tok.encode_batch(["hello"]) == [ids]
    assert max(tok.encode("[PAD1205] text")) < 1200  # unused placeholders are never produced


def _hf_with_pre(pre_tokenizer: Any, ignore_merges: bool = False) -> Tokenizer:
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=900, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(_training_texts(), trainer=trainer)
    return tok


def _byte_level() -> Any:
    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)


@pytest.mark.parametrize(
    ("label", "make"),
    [
        ("gpt-2", lambda: _hf_with_pre(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True))),
        (
            "llama-bpe",
            lambda: _hf_with_pre(
                pre_tokenizers.Sequence(
                    [pre_tokenizers.Split(Regex(LLAMA3_TOKENIZER_JSON_REGEX), "isolated"), _byte_level()]
                ),
                ignore_merges=True,
            ),
        ),
    ],
)
def test_other_pre_tokenizers(label: str, make: Any, tmp_path: Path) -> None:
    hf = make()
    assert detect_pre(hf) == label
    path = tmp_path / "p.gguf"
    write_gguf(path, hf)
    tok = StrataTokenizer.from_gguf_metadata(metadata_from_gguf(path))
    assert tok.pre == label
    for text in ALL_SAMPLES + ["it'S 12345 numbers", "x" * 40]:
        assert tok.encode(text, add_special=False) == hf.encode(text).ids
        assert tok.decode(tok.encode(text)) == text


def test_default_pre_tokenizer_regexes(qwen_style_hf: Tokenizer) -> None:
    meta = tokenizer_metadata(qwen_style_hf, pre="default")
    tok = StrataTokenizer.from_gguf_metadata(meta)
    words = [w for w, _ in tok.hf_tokenizer.pre_tokenizer.pre_tokenize_str("a+=b1234 it's")]
    # llama.cpp's default, regex after regex: punctuation runs first (so "'s" splits), gpt2 words,
    # digit runs, then groups of three digits.
    assert words == ["a", "+=", "b", "123", "4", "Ġit", "'", "s"]
    for text in ALL_SAMPLES:
        assert tok.decode(tok.encode(text)) == text


def test_llama3_family_adds_bos_by_default(qwen_style_hf: Tokenizer) -> None:
    meta = tokenizer_metadata(qwen_style_hf, pre="llama-bpe")
    del meta["tokenizer.ggml.add_bos_token"]
    no_bos = StrataTokenizer.from_gguf_metadata(meta)  # no bos id in the file: nothing to add
    assert not no_bos.add_bos and no_bos.encode("hi") == no_bos.encode("hi", add_special=False)
    with_bos = StrataTokenizer.from_gguf_metadata({**meta, "tokenizer.ggml.bos_token_id": 1})
    assert with_bos.add_bos and with_bos.encode("hi")[0] == 1
    qwen = StrataTokenizer.from_gguf_metadata(
        {**meta, "tokenizer.ggml.pre": "qwen2", "tokenizer.ggml.bos_token_id": 1}
    )
    assert not qwen.add_bos


def test_unknown_pre_falls_back_to_default(qwen_style_hf: Tokenizer) -> None:
    meta = tokenizer_metadata(qwen_style_hf)
    meta["tokenizer.ggml.pre"] = "some-future-model"
    with pytest.warns(RuntimeWarning, match="some-future-model"):
        tok = StrataTokenizer.from_gguf_metadata(meta)
    assert tok.pre == "default"
    del meta["tokenizer.ggml.pre"]  # missing key: llama.cpp's default, silently
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert StrataTokenizer.from_gguf_metadata(meta).pre == "default"


def test_bad_metadata_is_a_format_error(qwen_style_hf: Tokenizer) -> None:
    good = tokenizer_metadata(qwen_style_hf)
    cases: list[tuple[dict[str, Any], str]] = [
        ({k: v for k, v in good.items() if k != "tokenizer.ggml.tokens"}, "tokens is missing"),
        ({**good, "tokenizer.ggml.model": "llama"}, "'llama' is not supported"),
        ({**good, "tokenizer.ggml.token_type": good["tokenizer.ggml.token_type"][:-1]}, "token types"),
        ({**good, "tokenizer.ggml.merges": ["nospace"]}, "two tokens"),
        ({**good, "tokenizer.ggml.merges": ["zzzq qqqz"]}, "inconsistent"),
        ({**good, "tokenizer.ggml.eos_token_id": 5000}, "outside the vocabulary"),
        ({**good, "tokenizer.ggml.add_bos_token": True}, "no tokenizer.ggml.bos_token_id"),
        ({**good, "tokenizer.ggml.tokens": "abc"}, "expected an array"),
        (
            {
                **good,
                "tokenizer.ggml.tokens": [],
                "tokenizer.ggml.token_type": [],
                "tokenizer.ggml.merges": [],
            },
            "empty",
        ),
    ]
    for meta, message in cases:
        with pytest.raises(strata.FormatError, match=message):
            StrataTokenizer.from_gguf_metadata(meta)


def test_bad_arguments(loaded: StrataTokenizer, qwen_style_hf: Tokenizer) -> None:
    with pytest.raises(strata.InvalidArgument, match="takes a str"):
        loaded.encode(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(strata.InvalidArgument, match="outside the vocabulary"):
        loaded.decode([loaded.vocab_size])
    with pytest.raises(strata.InvalidArgument, match="not in the vocabulary"):
        tokenizer_metadata(qwen_style_hf, bos_token="<s>")
    with pytest.raises(strata.InvalidArgument, match="smaller than"):
        tokenizer_metadata(qwen_style_hf, vocab_size=10)
    with pytest.raises(strata.InvalidArgument, match="unsupported pre-tokenizer"):
        tokenizer_metadata(qwen_style_hf, pre="tekken")
    wordlevel = Tokenizer(models.WordLevel({"a": 0}, unk_token="a"))
    with pytest.raises(strata.InvalidArgument, match="only BPE"):
        tokenizer_metadata(wordlevel)


MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": " hi ü "},
    {"role": "assistant", "content": "yo", "tool_calls": [{"name": "f", "arguments": {"b": 1, "a": "é"}}]},
]
# A Qwen-like template: whitespace control, loop.first/break, a default filter, tojson of nested data.
TEMPLATE = (
    "{%- for m in messages %}{%- if loop.first and m.role != 'system' %}<|im_start|>system\n"
    "You are {{ name | default('x') }}.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ m.role }}\n{{ m.content | trim }}"
    "{% if m.tool_calls is defined %}{{ m.tool_calls | tojson }}{% endif %}<|im_end|>\n"
    "{%- if loop.index > 5 %}{% break %}{% endif %}\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}{{ eos_token if close else '' }}"
)


def test_chat_template_chatml(loaded: StrataTokenizer) -> None:
    text = loaded.apply_chat_template(MESSAGES[:2])
    assert text == render_chatml(MESSAGES[:2])
    expected = "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\n hi ü <|im_end|>\n"
    assert text == expected + "<|im_start|>assistant\n"
    assert loaded.apply_chat_template(MESSAGES[:1], add_generation_prompt=False).endswith("<|im_end|>\n")
    ids = loaded.encode(text)
    assert ids.count(1) == 3 and ids.count(2) == 2


def test_chat_template_matches_transformers(qwen_style_hf: Tokenizer) -> None:
    import transformers  # a test dependency; imported here because it is slow to import
    meta = tokenizer_metadata(qwen_style_hf, chat_template=TEMPLATE)
    tok = StrataTokenizer.from_gguf_metadata(meta)
    reference = transformers.PreTrainedTokenizerFast(
        tokenizer_object=qwen_style_hf, chat_template=TEMPLATE, eos_token="<|endoftext|>"
    )
    for messages in (MESSAGES, MESSAGES[1:]):
        for gen in (True, False):
            for extra in ({"close": False}, {"name": "Q", "close": True}):
                ours = tok.apply_chat_template(messages, add_generation_prompt=gen, **extra)
                theirs = reference.apply_chat_template(
                    messages, tokenize=False, add_generation_prompt=gen, **extra
                )
                assert ours == theirs


def test_chat_template_errors_and_fallback(qwen_style_hf: Tokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    failing = StrataTokenizer.from_gguf_metadata(
        tokenizer_metadata(qwen_style_hf, chat_template="{{ raise_exception('no system role') }}")
    )
    with pytest.raises(strata.InvalidArgument, match="no system role"):
        failing.apply_chat_template(MESSAGES)
    with pytest.raises(strata.InvalidArgument, match="role"):
        failing.apply_chat_template([{"content": "x"}])
    broken = StrataTokenizer.from_gguf_metadata(tokenizer_metadata(qwen_style_hf, chat_template="{% for %}"))
    with pytest.raises(strata.FormatError, match="not a valid Jinja"):
        broken.apply_chat_template(MESSAGES)

    def no_jinja(template: str) -> Any:
        raise ImportError("jinja2")

    monkeypatch.setattr("strata.tokenizer._compile_jinja", no_jinja)
    custom = StrataTokenizer.from_gguf_metadata(tokenizer_metadata(qwen_style_hf, chat_template=TEMPLATE))
    with pytest.warns(RuntimeWarning, match="jinja2 is not installed"):
        assert custom.apply_chat_template(MESSAGES) == render_chatml(MESSAGES)
    plain = StrataTokenizer.from_gguf_metadata(tokenizer_metadata(qwen_style_hf))  # no template: ChatML
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert plain.apply_chat_template(MESSAGES, add_generation_prompt=False) == render_chatml(
            MESSAGES, add_generation_prompt=False
        )


def test_trained_recipe_tokenizer_is_qwen2(tmp_path: Path) -> None:
    hf = train_bytelevel_bpe(_training_texts(), vocab_size=600)
    assert detect_pre(hf) == "qwen2"
    assert [hf.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2]
    path = tmp_path / "r.gguf"
    write_gguf(path, hf, chat_template=CHATML_TEMPLATE)
    tok = StrataTokenizer.from_gguf_metadata(metadata_from_gguf(path))
    for text in ALL_SAMPLES:
        assert tok.encode(text) == hf.encode(text).ids
        assert tok.decode(tok.encode(text)) == text
