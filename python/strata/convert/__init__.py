"""Writing GGUF files: the `strata` architecture (from tensors, a StrataModel or a training
checkpoint), Hugging Face Qwen3-MoE -> `qwen3moe`, GLM-4-MoE -> `glm4moe` and DeepSeek-V4 -> `deepseek4`
(a model directory with its tokenizer: `convert_hf_dir`), and random `strata` models for tests.

Nothing here imports torch, except reading a .pt training checkpoint.
"""

from __future__ import annotations

from strata.convert.deepseek4 import convert_deepseek4
from strata.convert.glm4moe import convert_glm4moe
from strata.convert.hf_dir import convert_hf_dir
from strata.convert.hf_tokenizer import hf_tokenizer_writer
from strata.convert.qwen3moe import convert_qwen3moe
from strata.convert.random_model import agreeing_strata_tensors, make_random_strata, random_strata_tensors
from strata.convert.strata_layout import StrataHParams, TensorSpec, strata_keys, strata_tensor_specs
from strata.convert.strata_writer import write_strata_gguf
from strata.convert.tokenizer_keys import TokenizerWriter, byte_level_tokenizer
from strata.convert.weight_types import WEIGHT_TYPES

__all__ = [
    "WEIGHT_TYPES",
    "StrataHParams",
    "TensorSpec",
    "TokenizerWriter",
    "byte_level_tokenizer",
    "convert_deepseek4",
    "convert_glm4moe",
    "convert_hf_dir",
    "hf_tokenizer_writer",
    "convert_qwen3moe",
    "make_random_strata",
    "agreeing_strata_tensors",
    "random_strata_tensors",
    "strata_keys",
    "strata_tensor_specs",
    "write_strata_gguf",
]
