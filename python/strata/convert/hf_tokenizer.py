"""The tokenizer of a Hugging Face model directory as GGUF keys: ``tokenizer.json`` (byte-level
BPE, through :func:`strata.tokenizer.add_tokenizer_to_gguf`), the chat template and BOS/EOS from
``tokenizer_config.json`` (or ``chat_template.jinja``) and ``generation_config.json``.

Where the two config files disagree, ``tokenizer_config.json`` names the tokens (``bos_token``,
``eos_token``: strings or ``{"content": ...}``) and ``generation_config.json`` fills what it does not
name (``bos_token_id``, ``eos_token_id``; of a list of EOS ids the first is the EOS, as in
transformers' ``GenerationConfig``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from strata.convert.tokenizer_keys import TokenizerWriter
from strata.errors import FormatError


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise FormatError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise FormatError(f"{path}: expected a JSON object")
    return value


def _token_text(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _chat_template(model_dir: Path, tok_cfg: dict[str, Any]) -> str | None:
    template = tok_cfg.get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if isinstance(template, str):
        return template
    jinja = model_dir / "chat_template.jinja"  # where transformers >= 4.43 saves it
    return jinja.read_text(encoding="utf-8") if jinja.is_file() else None


def hf_tokenizer_writer(model_dir: str | Path, vocab_size: int | None = None) -> TokenizerWriter:
    """A writer of the directory's tokenizer keys (padded with unused tokens up to vocab_size)."""
    import tokenizers

    from strata.tokenizer import add_tokenizer_to_gguf

    model_dir = Path(model_dir)
    if model_dir.is_file():  # a bare tokenizer.json
        tok_path, model_dir = model_dir, model_dir.parent
    else:
        tok_path = model_dir / "tokenizer.json"
    if not tok_path.is_file():
        raise FormatError(f"{model_dir}: no tokenizer.json")
    try:
        hf = tokenizers.Tokenizer.from_file(str(tok_path))
    except Exception as exc:  # tokenizers raises plain Exception subclasses
        raise FormatError(f"{tok_path}: cannot be read as a Hugging Face tokenizer ({exc})") from None
    tok_cfg = _read_json(model_dir / "tokenizer_config.json")
    gen_cfg = _read_json(model_dir / "generation_config.json")

    def by_id(key: str) -> str | None:
        value = gen_cfg.get(key)
        if isinstance(value, list):
            value = value[0] if value else None
        if not isinstance(value, int):
            return None
        text = hf.id_to_token(value)
        if text is None:
            where = model_dir / "generation_config.json"
            raise FormatError(f"{where}: {key} = {value} is not in the vocabulary")
        return str(text)

    bos = _token_text(tok_cfg.get("bos_token")) or by_id("bos_token_id")
    eos = _token_text(tok_cfg.get("eos_token")) or by_id("eos_token_id")
    pad = _token_text(tok_cfg.get("pad_token"))
    add_bos = bool(tok_cfg.get("add_bos_token", False)) and bos is not None
    template = _chat_template(model_dir, tok_cfg)

    def add(writer: Any) -> None:
        add_tokenizer_to_gguf(writer, hf, chat_template=template, bos_token=bos, eos_token=eos,
                              pad_token=pad if pad is not None and hf.token_to_id(pad) is not None else None,
                              add_bos=add_bos, vocab_size=vocab_size)

    return add
