"""``strata convert HF_DIR OUT.gguf``: a Hugging Face model directory (config.json, *.safetensors in
BF16/F16/F32, sharded or not, tokenizer files) to the matching llama.cpp architecture —
``Qwen3MoeForCausalLM`` -> ``qwen3moe``, ``Glm4MoeForCausalLM`` -> ``glm4moe`` (with its MTP layer
when the checkpoint has one), ``DeepseekV4ForCausalLM`` -> ``deepseek4`` (a file for llama.cpp: strata
itself does not run that architecture yet)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from strata.convert.deepseek4 import convert_deepseek4
from strata.convert.glm4moe import convert_glm4moe
from strata.convert.hf_tokenizer import hf_tokenizer_writer
from strata.convert.qwen3moe import convert_qwen3moe
from strata.convert.tokenizer_keys import byte_level_tokenizer
from strata.errors import ConfigError, FormatError, InvalidArgument

# model_type -> converter
CONVERTERS: dict[str, Callable[..., Path]] = {
    "qwen3_moe": convert_qwen3moe, "glm4_moe": convert_glm4moe, "deepseek_v4": convert_deepseek4}
_ARCHITECTURES = {"Qwen3MoeForCausalLM": "qwen3_moe", "Glm4MoeForCausalLM": "glm4_moe",
                  "DeepseekV4ForCausalLM": "deepseek_v4"}


def hf_model_type(cfg: dict[str, Any]) -> str:
    """The converter key for a config.json: its model_type, else its architectures entry."""
    kind = cfg.get("model_type")
    if kind not in CONVERTERS:
        for arch in cfg.get("architectures") or []:
            kind = _ARCHITECTURES.get(arch, kind)
    if kind not in CONVERTERS:
        raise ConfigError(
            f"model_type {cfg.get('model_type')!r} (architectures {cfg.get('architectures')!r}) cannot be "
            f"converted; supported: {', '.join(sorted(_ARCHITECTURES))}"
        )
    return str(kind)


def convert_hf_dir(
    model_dir: str | Path,
    out: str | Path,
    *,
    weight_type: str = "F16",
    expert_type: str | None = None,
    tokenizer: str = "auto",
    name: str | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    mtp: bool = False,
) -> Path:
    """tokenizer: "auto" (the directory's tokenizer.json when present), "bytes" (a byte-level test
    vocabulary) or "none". progress: the converters' ``progress(done, total, what)`` callback.
    mtp: write the MTP layer's own file instead of the main model (DeepSeek-V4 only, as llama.cpp's
    ``--mtp``; glm4moe writes its MTP layer into the main file)."""
    model_dir = Path(model_dir)
    config_path = model_dir / "config.json"
    if not config_path.is_file():
        raise FormatError(f"{model_dir}: no config.json")
    try:
        cfg = json.loads(config_path.read_text())
    except ValueError as exc:
        raise FormatError(f"{config_path}: not valid JSON ({exc})") from None
    kind = hf_model_type(cfg)
    convert = CONVERTERS[kind]
    extra: dict[str, Any] = {}
    if mtp:
        if kind != "deepseek_v4":
            raise InvalidArgument(f"--mtp: only DeepSeek-V4 has a separate MTP file, not {kind}")
        extra["mtp"] = True
    vocab = int(cfg.get("vocab_size", 0)) or None
    writer: Any = None
    if tokenizer == "auto":
        writer = hf_tokenizer_writer(model_dir, vocab) if (model_dir / "tokenizer.json").is_file() else None
    elif tokenizer == "bytes":
        writer = byte_level_tokenizer(int(cfg["vocab_size"]))
    elif tokenizer != "none":
        raise InvalidArgument(f"tokenizer must be auto, bytes or none, not {tokenizer!r}")
    return convert(model_dir, out, tokenizer=writer, weight_type=weight_type, expert_type=expert_type,
                   name=name, progress=progress, **extra)
