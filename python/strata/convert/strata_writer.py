"""Write a `strata` GGUF file (docs/gguf.md §1) from tensors keyed by GGUF name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFWriter

from strata.convert.arrays import to_numpy
from strata.convert.gguf_header import add_file_keys
from strata.convert.strata_layout import (
    ARCH,
    StrataHParams,
    is_expert_tensor,
    strata_keys,
    strata_tensor_specs,
)
from strata.convert.tokenizer_keys import apply_tokenizer
from strata.convert.weight_types import encode, parse_weight_type, storage_type
from strata.errors import FormatError


def _tensor_source(model_or_state_dict: Any) -> Mapping[str, Any]:
    """A mapping GGUF name -> array; a StrataModel (anything with gguf_tensors()) is asked for one."""
    if hasattr(model_or_state_dict, "gguf_tensors"):
        return model_or_state_dict.gguf_tensors()
    if isinstance(model_or_state_dict, Mapping):
        return model_or_state_dict
    raise FormatError("expected a mapping of GGUF tensor names to arrays, or a model with gguf_tensors()")


def write_strata_gguf(
    model_or_state_dict: Any,
    config: Any,
    path: str | Path,
    tokenizer: Any = None,
    weight_type: str = "F32",
    expert_type: str | None = None,
    name: str = "strata",
    progress: Callable[[int, int, str], None] | None = None,
) -> Path:
    """Write every key and tensor of the `strata` layout.

    model_or_state_dict: tensors keyed by GGUF name (numpy or torch), or a ``strata_train``
    StrataModel. config: a StrataConfig, a mapping or a StrataHParams. weight_type is the storage of
    matrices (F32, F16, BF16, Q8_0, Q5_0, Q5_1, Q4_0; rows a block does not divide fall back to F16);
    expert_type overrides it for the routed experts; norms, hyper-connection tensors, routers,
    gates and indexer weights stay F32, vocab_ids I32. tokenizer: see tokenizer_keys.apply_tokenizer.
    progress: called as ``progress(done, total, tensor_name)`` after each tensor is encoded.
    """
    hp = StrataHParams.from_any(config)
    wanted = parse_weight_type(weight_type)
    wanted_experts = parse_weight_type(expert_type) if expert_type else wanted
    specs = strata_tensor_specs(hp)
    source = _tensor_source(model_or_state_dict)

    missing = [n for n in specs if n not in source]
    extra = sorted(set(source) - set(specs))
    if missing or extra:
        raise FormatError(
            f"tensors do not match the strata layout: missing {missing[:8]}, unexpected {extra[:8]}"
        )

    arrays: dict[str, np.ndarray] = {}
    for tname, spec in specs.items():
        arr = to_numpy(source[tname], np.int32 if spec.kind == "i32" else np.float32)
        if arr.shape != spec.shape:
            raise FormatError(f"{tname}: shape {arr.shape}, the config implies {spec.shape}")
        if not np.all(np.isfinite(arr)):
            raise FormatError(f"{tname}: holds NaN or infinite values")
        arrays[tname] = arr
    if hp.mtp:
        ids = arrays[f"blk.{hp.n_layers}.nextn.vocab_ids"]
        if ids.tolist() != hp.mtp_vocab:
            raise FormatError("nextn.vocab_ids differs from the config's mtp_vocab_ids")

    path = Path(path)
    writer = GGUFWriter(str(path), ARCH)
    try:
        add_file_keys(writer, name, weight_type)
        for key, value, vtype in strata_keys(hp):
            {"u32": writer.add_uint32, "f32": writer.add_float32, "bool": writer.add_bool}[vtype](key, value)
        apply_tokenizer(writer, tokenizer)
        for done, (tname, spec) in enumerate(specs.items(), 1):
            arr = arrays[tname]
            if spec.kind == "weight":
                qtype = storage_type(spec.shape, wanted_experts if is_expert_tensor(tname) else wanted)
                data, raw = encode(arr, qtype)
                writer.add_tensor(tname, data, raw_dtype=raw)
            else:
                writer.add_tensor(tname, arr)
            if progress is not None:
                progress(done, len(specs), tname)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    return path
