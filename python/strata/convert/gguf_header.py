"""The GGUF keys every converter writes the same way: the file's name and weight type, and the
attention / expert shape keys of llama.cpp's MoE architectures (qwen3moe, glm4moe, deepseek4)."""

from __future__ import annotations

from typing import Any

from gguf import GGML_QUANT_VERSION, GGMLQuantizationType, GGUFWriter

from strata.convert.weight_types import FILE_TYPES, parse_weight_type


def add_file_keys(writer: GGUFWriter, name: str, weight_type: str) -> None:
    """general.name, general.file_type, and the quantization version for a quantized file."""
    writer.add_name(name)
    writer.add_file_type(int(FILE_TYPES[weight_type.upper()]))
    if parse_weight_type(weight_type) not in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
        writer.add_quantization_version(GGML_QUANT_VERSION)


def add_moe_shape_keys(writer: GGUFWriter, hp: dict[str, Any], *, blocks: int, ffn: int | None, kv_heads: int,
                       rope_dim: int) -> None:
    """Context, widths, heads, RoPE, RMS eps and the routed experts' counts, in llama.cpp's order.
    `ffn` None leaves feed_forward_length out (a model without dense layers)."""
    writer.add_context_length(hp["context"])
    writer.add_embedding_length(hp["d"])
    writer.add_block_count(blocks)
    if ffn is not None:
        writer.add_feed_forward_length(ffn)
    writer.add_head_count(hp["heads"])
    writer.add_head_count_kv(kv_heads)
    writer.add_key_length(hp["head_dim"])
    writer.add_value_length(hp["head_dim"])
    writer.add_rope_dimension_count(rope_dim)
    writer.add_rope_freq_base(hp["rope_theta"])
    writer.add_layer_norm_rms_eps(hp["rms_eps"])
    writer.add_expert_count(hp["experts"])
    writer.add_expert_used_count(hp["experts_used"])
    writer.add_expert_feed_forward_length(hp["expert_ffn"])
