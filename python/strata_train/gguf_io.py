"""Read a `strata` or `qwen3moe` GGUF file into a StrataModel (weights dequantized to float32).

This is how the engine's parity tests build the reference: the very file the engine loads, read with
the `gguf` package (``gguf.quants.dequantize`` for block formats). A `qwen3moe` file becomes a
StrataModel with every strata feature off and float K/V cells (docs/gguf.md §3).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFReader, GGUFValueType
from gguf.quants import dequantize

from strata_train.config import StrataConfig
from strata_train.gguf_names import load_gguf_tensors
from strata_train.model import StrataModel


def read_gguf(path: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(metadata key -> value, tensor name -> float32 / int32 array in numpy [out, in] order)."""
    reader = GGUFReader(str(path))
    keys: dict[str, Any] = {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        if field.types and field.types[0] == GGUFValueType.ARRAY and field.types[-1] == GGUFValueType.STRING:
            continue  # token lists: not needed by the reference, and slow to decode
        keys[name] = field.contents()
    tensors: dict[str, np.ndarray] = {}
    for t in reader.tensors:
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))
        if t.data.dtype == np.int32:
            tensors[t.name] = np.array(t.data).reshape(shape)
        else:
            tensors[t.name] = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(shape)
    return keys, tensors


def _f32(value: Any) -> float:
    """A float32 key as the shortest decimal that rounds to the same float32 (1e-6, not 9.99e-07)."""
    return float(np.format_float_positional(np.float32(value), unique=True, trim="-"))


def _get(keys: dict[str, Any], key: str, default: Any = None) -> Any:
    if key in keys:
        value = keys[key]
        return _f32(value) if isinstance(value, (float, np.floating)) else value
    if default is None:
        raise ValueError(f"GGUF is missing the key {key!r}")
    return default


def strata_config_from_gguf(keys: dict[str, Any], tensors: dict[str, np.ndarray]) -> StrataConfig:
    a = "strata"
    nextn = int(_get(keys, f"{a}.nextn_predict_layers", 0))
    blocks = int(_get(keys, f"{a}.block_count"))
    key_len = int(_get(keys, f"{a}.attention.key_length"))
    if int(_get(keys, f"{a}.attention.value_length", key_len)) != key_len:
        raise ValueError("strata.attention.value_length must equal key_length")
    vocab_ids = None
    if nextn:
        vocab_ids = tuple(int(i) for i in tensors[f"blk.{blocks - 1}.nextn.vocab_ids"].tolist())
        if len(vocab_ids) != int(_get(keys, f"{a}.nextn.vocab_size")):
            raise ValueError("strata.nextn.vocab_size does not match the vocab_ids tensor")
    return StrataConfig(
        vocab_size=int(tensors["token_embd.weight"].shape[0]),
        d=int(_get(keys, f"{a}.embedding_length")),
        n_layers=blocks - nextn,
        n_heads=int(_get(keys, f"{a}.attention.head_count")),
        n_kv_heads=int(_get(keys, f"{a}.attention.head_count_kv")),
        head_dim=key_len,
        gated=bool(_get(keys, f"{a}.attention.gated")),
        sink_count=int(_get(keys, f"{a}.attention.sink_count")),
        sliding_window=int(_get(keys, f"{a}.attention.sliding_window")),
        indexer_heads=int(_get(keys, f"{a}.attention.indexer.head_count", 0)),
        indexer_dim=int(_get(keys, f"{a}.attention.indexer.key_length", 0)),
        indexer_top_k=int(_get(keys, f"{a}.attention.indexer.top_k", 0)),
        rope_theta=float(_get(keys, f"{a}.rope.freq_base")),
        rope_dim=int(_get(keys, f"{a}.rope.dimension_count")),
        n_experts=int(_get(keys, f"{a}.expert_count")),
        n_experts_used=int(_get(keys, f"{a}.expert_used_count")),
        expert_ffn=int(_get(keys, f"{a}.expert_feed_forward_length")),
        shared_ffn=int(_get(keys, f"{a}.expert_shared_feed_forward_length", 0)),
        hc_count=int(_get(keys, f"{a}.hyper_connection.count")),
        hc_sinkhorn_iters=int(_get(keys, f"{a}.hyper_connection.sinkhorn_iterations")),
        hc_eps=float(_get(keys, f"{a}.hyper_connection.epsilon")),
        rms_eps=float(_get(keys, f"{a}.attention.layer_norm_rms_epsilon")),
        mtp=bool(nextn),
        mtp_vocab_ids=vocab_ids,
        context_length=int(_get(keys, f"{a}.context_length")),
    )


def qwen3moe_config_from_gguf(keys: dict[str, Any], tensors: dict[str, np.ndarray]) -> StrataConfig:
    a = "qwen3moe"
    d = int(_get(keys, f"{a}.embedding_length"))
    heads = int(_get(keys, f"{a}.attention.head_count"))
    head_dim = int(_get(keys, f"{a}.attention.key_length", d // heads))
    return StrataConfig(
        vocab_size=int(tensors["token_embd.weight"].shape[0]),
        d=d,
        n_layers=int(_get(keys, f"{a}.block_count")),
        n_heads=heads,
        n_kv_heads=int(_get(keys, f"{a}.attention.head_count_kv")),
        head_dim=head_dim,
        gated=False,
        sink_count=0,
        sliding_window=0,
        indexer_heads=0,
        indexer_dim=0,
        indexer_top_k=0,
        rope_theta=float(_get(keys, f"{a}.rope.freq_base")),
        rope_dim=head_dim,
        n_experts=int(_get(keys, f"{a}.expert_count")),
        n_experts_used=int(_get(keys, f"{a}.expert_used_count")),
        expert_ffn=int(_get(keys, f"{a}.expert_feed_forward_length")),
        shared_ffn=0,
        hc_count=1,
        hc_sinkhorn_iters=0,
        rms_eps=float(_get(keys, f"{a}.attention.layer_norm_rms_epsilon")),
        mtp=False,
        context_length=int(_get(keys, f"{a}.context_length")),
    )


def load_model(path: str | Path) -> StrataModel:
    """A StrataModel with the file's weights: `strata` keeps int8 K/V cells, `qwen3moe` float ones."""
    keys, tensors = read_gguf(path)
    arch = keys.get("general.architecture")
    if arch == "strata":
        model = StrataModel(strata_config_from_gguf(keys, tensors), kv_int8=True)
    elif arch == "qwen3moe":
        if "output.weight" not in tensors:  # tied embeddings (llama.cpp omits output.weight)
            tensors["output.weight"] = tensors["token_embd.weight"]
        model = StrataModel(qwen3moe_config_from_gguf(keys, tensors), kv_int8=False)
    else:
        raise ValueError(f"{path}: unsupported general.architecture {arch!r}")
    load_gguf_tensors(model, tensors)
    return model.eval()
