"""Storage types the converters write, encoded with ``gguf.quants`` (ggml's own block formats)."""

from __future__ import annotations

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, LlamaFileType
from gguf.quants import quantize

from strata.errors import InvalidArgument

# The types gguf.quants can write that the engine reads (docs/gguf.md; SPEC §2.1).
WEIGHT_TYPES: dict[str, GGMLQuantizationType] = {
    "F32": GGMLQuantizationType.F32,
    "F16": GGMLQuantizationType.F16,
    "BF16": GGMLQuantizationType.BF16,
    "Q8_0": GGMLQuantizationType.Q8_0,
    "Q5_0": GGMLQuantizationType.Q5_0,
    "Q5_1": GGMLQuantizationType.Q5_1,
    "Q4_0": GGMLQuantizationType.Q4_0,
}

FILE_TYPES: dict[str, LlamaFileType] = {
    "F32": LlamaFileType.ALL_F32,
    "F16": LlamaFileType.MOSTLY_F16,
    "BF16": LlamaFileType.MOSTLY_BF16,
    "Q8_0": LlamaFileType.MOSTLY_Q8_0,
    "Q5_0": LlamaFileType.MOSTLY_Q5_0,
    "Q5_1": LlamaFileType.MOSTLY_Q5_1,
    "Q4_0": LlamaFileType.MOSTLY_Q4_0,
}

# A row whose length the block size does not divide is stored as this instead (llama.cpp does the same).
FALLBACK = GGMLQuantizationType.F16


def parse_weight_type(name: str) -> GGMLQuantizationType:
    key = name.upper()
    if key not in WEIGHT_TYPES:
        raise InvalidArgument(f"unknown weight type {name!r}; choose one of {', '.join(WEIGHT_TYPES)}")
    return WEIGHT_TYPES[key]


def storage_type(shape: tuple[int, ...], wanted: GGMLQuantizationType) -> GGMLQuantizationType:
    """The type a tensor of this shape is stored as when `wanted` is asked for."""
    block, _ = GGML_QUANT_SIZES[wanted]
    return wanted if shape[-1] % block == 0 else FALLBACK


def encode(array: np.ndarray, qtype: GGMLQuantizationType) -> tuple[np.ndarray, GGMLQuantizationType | None]:
    """(data for GGUFWriter.add_tensor, raw_dtype to pass along: None for plain F32/F16 arrays)."""
    data = quantize(np.ascontiguousarray(array, dtype=np.float32), qtype)
    return data, (qtype if data.dtype == np.uint8 else None)
