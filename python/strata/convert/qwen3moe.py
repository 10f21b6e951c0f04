"""Hugging Face ``Qwen3MoeForCausalLM`` -> llama.cpp-style ``qwen3moe`` GGUF (docs/gguf.md §3).

Keys and tensor names follow llama.cpp's convert_hf_to_gguf.py (Qwen2MoeModel / Qwen3MoeModel):
``qwen3moe.*`` hyper-parameters, ``token_embd``, ``blk.N.attn_{norm,q,k,v,output,q_norm,k_norm}``,
``blk.N.ffn_{norm,gate_inp,gate_exps,up_exps,down_exps}``, ``output_norm``, ``output``. Qwen3 uses
NEOX RoPE (rotate_half), so q/k rows are written as they are (no permutation). Experts are stacked
into [E, F, d] / [E, d, F]; both checkpoint layouts are read: per-expert ``experts.E.*_proj.weight``
(what is on disk) and the fused ``experts.gate_up_proj`` / ``experts.down_proj`` of transformers 5
modules in memory.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from gguf import GGUFWriter

from strata.convert.arrays import to_numpy
from strata.convert.gguf_header import add_file_keys, add_moe_shape_keys
from strata.convert.safetensors_reader import CheckpointDir
from strata.convert.tokenizer_keys import apply_tokenizer
from strata.convert.weight_types import encode, parse_weight_type, storage_type
from strata.errors import ConfigError, FormatError

ARCH = "qwen3moe"


class TensorSource(Protocol):
    def __contains__(self, name: object) -> bool: ...
    def get(self, name: str) -> np.ndarray: ...


class _StateDict:
    def __init__(self, state: dict[str, Any]) -> None:
        self._state = state

    def __contains__(self, name: object) -> bool:
        return name in self._state

    def get(self, name: str) -> np.ndarray:
        if name not in self._state:
            raise FormatError(f"state dict has no tensor {name}")
        return to_numpy(self._state[name])


def open_hf_source(source: Any, fallback_name: str) -> tuple[dict[str, Any], TensorSource, str]:
    """(config, tensors, default name) of a Hugging Face model directory (config.json + safetensors,
    read without torch) or of an in-memory transformers model."""
    if isinstance(source, (str, Path)):
        model_dir = Path(source)
        config_path = model_dir / "config.json"
        if not config_path.is_file():
            raise FormatError(f"{model_dir}: no config.json")
        return json.loads(config_path.read_text()), CheckpointDir(model_dir), model_dir.name
    return source.config.to_dict(), _StateDict(source.state_dict()), fallback_name


def _rope_theta(cfg: dict[str, Any]) -> float:
    rope = cfg.get("rope_parameters") or {}
    scaling = cfg.get("rope_scaling") or {}
    kind = rope.get("rope_type", scaling.get("rope_type", scaling.get("type", "default")))
    if kind not in (None, "default"):
        raise ConfigError(f"rope type {kind!r} is not supported (only the default RoPE)")
    theta = rope.get("rope_theta", cfg.get("rope_theta"))
    if theta is None:
        raise ConfigError("config has no rope_theta")
    return float(theta)


def qwen3moe_hparams(cfg: dict[str, Any]) -> dict[str, Any]:
    """Check that the Hugging Face config is what the `qwen3moe` architecture can express."""
    def need(cond: bool, what: str) -> None:
        if not cond:
            raise ConfigError(f"Qwen3-MoE config: {what}")

    need(cfg.get("model_type", "qwen3_moe") == "qwen3_moe", f"model_type is {cfg.get('model_type')!r}")
    need(not cfg.get("mlp_only_layers"), "dense mlp_only_layers are not supported")
    need(int(cfg.get("decoder_sparse_step", 1)) == 1, "decoder_sparse_step must be 1 (every layer MoE)")
    need(not cfg.get("attention_bias", False), "attention_bias is not supported")
    need(bool(cfg.get("norm_topk_prob", False)), "norm_topk_prob must be true (llama.cpp renormalises)")
    need(not cfg.get("use_sliding_window", False), "sliding-window attention is not supported")
    need(cfg.get("hidden_act", "silu") == "silu", "hidden_act must be silu")
    heads = int(cfg["num_attention_heads"])
    d = int(cfg["hidden_size"])
    return {
        "d": d,
        "layers": int(cfg["num_hidden_layers"]),
        "heads": heads,
        "kv_heads": int(cfg.get("num_key_value_heads", heads)),
        "head_dim": int(cfg.get("head_dim") or d // heads),
        "ffn": int(cfg.get("intermediate_size", 0)),
        "experts": int(cfg.get("num_experts", cfg.get("num_local_experts", 0))),
        "experts_used": int(cfg["num_experts_per_tok"]),
        "expert_ffn": int(cfg["moe_intermediate_size"]),
        "context": int(cfg.get("max_position_embeddings", 4096)),
        "rope_theta": _rope_theta(cfg),
        "rms_eps": float(cfg.get("rms_norm_eps", 1e-6)),
        "tied": bool(cfg.get("tie_word_embeddings", False)),
        "vocab": int(cfg["vocab_size"]),
    }


def _layer_tensors(src: TensorSource, i: int, hp: dict[str, Any]) -> Iterator[tuple[str, np.ndarray, bool]]:
    """(GGUF name, array, stays F32) for block i."""
    p, b = f"model.layers.{i}", f"blk.{i}"
    yield f"{b}.attn_norm.weight", src.get(f"{p}.input_layernorm.weight"), True
    yield f"{b}.attn_q.weight", src.get(f"{p}.self_attn.q_proj.weight"), False
    yield f"{b}.attn_k.weight", src.get(f"{p}.self_attn.k_proj.weight"), False
    yield f"{b}.attn_v.weight", src.get(f"{p}.self_attn.v_proj.weight"), False
    yield f"{b}.attn_output.weight", src.get(f"{p}.self_attn.o_proj.weight"), False
    yield f"{b}.attn_q_norm.weight", src.get(f"{p}.self_attn.q_norm.weight"), True
    yield f"{b}.attn_k_norm.weight", src.get(f"{p}.self_attn.k_norm.weight"), True
    yield f"{b}.ffn_norm.weight", src.get(f"{p}.post_attention_layernorm.weight"), True
    yield f"{b}.ffn_gate_inp.weight", src.get(f"{p}.mlp.gate.weight"), True
    e, f = hp["experts"], hp["expert_ffn"]
    if f"{p}.mlp.experts.gate_up_proj" in src:  # transformers 5 fused layout: [E, 2F, d], gate rows first
        gate_up = src.get(f"{p}.mlp.experts.gate_up_proj")
        if gate_up.shape[:2] != (e, 2 * f):
            raise FormatError(f"{p}.mlp.experts.gate_up_proj: shape {gate_up.shape}, want ({e}, {2 * f}, d)")
        yield f"{b}.ffn_gate_exps.weight", gate_up[:, :f], False
        yield f"{b}.ffn_up_exps.weight", gate_up[:, f:], False
        yield f"{b}.ffn_down_exps.weight", src.get(f"{p}.mlp.experts.down_proj"), False
    else:
        for ours, theirs in (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj")):
            stacked = np.stack([src.get(f"{p}.mlp.experts.{x}.{theirs}.weight") for x in range(e)])
            yield f"{b}.ffn_{ours}_exps.weight", stacked, False


def _expected_shape(name: str, hp: dict[str, Any]) -> tuple[int, ...]:
    d, dh, e, f = hp["d"], hp["head_dim"], hp["experts"], hp["expert_ffn"]
    leaf = name.split(".", 2)[-1] if name.startswith("blk.") else name
    shapes = {
        "token_embd.weight": (hp["vocab"], d),
        "output.weight": (hp["vocab"], d),
        "output_norm.weight": (d,),
        "attn_norm.weight": (d,),
        "attn_q.weight": (hp["heads"] * dh, d),
        "attn_k.weight": (hp["kv_heads"] * dh, d),
        "attn_v.weight": (hp["kv_heads"] * dh, d),
        "attn_output.weight": (d, hp["heads"] * dh),
        "attn_q_norm.weight": (dh,),
        "attn_k_norm.weight": (dh,),
        "ffn_norm.weight": (d,),
        "ffn_gate_inp.weight": (e, d),
        "ffn_gate_exps.weight": (e, f, d),
        "ffn_up_exps.weight": (e, f, d),
        "ffn_down_exps.weight": (e, d, f),
    }
    return shapes[leaf]


def convert_qwen3moe(
    source: str | Path | Any,
    path: str | Path,
    tokenizer: Any = None,
    weight_type: str = "F32",
    expert_type: str | None = None,
    name: str | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> Path:
    """Convert a Hugging Face Qwen3-MoE model to GGUF.

    source: a model directory (config.json + *.safetensors, read without torch) or an in-memory
    ``Qwen3MoeForCausalLM``. Tied embeddings are written as an explicit output.weight.
    progress: called as ``progress(done, total, what)`` after each step (the embedding, each block,
    the output head), e.g. to drive a progress bar.
    """
    cfg, src, default_name = open_hf_source(source, "qwen3moe")
    hp = qwen3moe_hparams(cfg)
    wanted = parse_weight_type(weight_type)
    wanted_experts = parse_weight_type(expert_type) if expert_type else wanted

    path = Path(path)
    writer = GGUFWriter(str(path), ARCH, use_temp_file=True)
    try:
        add_file_keys(writer, name or default_name, weight_type)
        add_moe_shape_keys(writer, hp, blocks=hp["layers"], ffn=hp["ffn"] or None, kv_heads=hp["kv_heads"],
                           rope_dim=hp["head_dim"])
        apply_tokenizer(writer, tokenizer)

        def add(tname: str, arr: np.ndarray, stays_f32: bool) -> None:
            arr = np.ascontiguousarray(arr, dtype=np.float32)
            expect = _expected_shape(tname, hp)
            if arr.shape != expect:
                raise FormatError(f"{tname}: shape {arr.shape}, the config implies {expect}")
            if stays_f32:
                writer.add_tensor(tname, arr)
                return
            qtype = storage_type(arr.shape, wanted_experts if tname.endswith("_exps.weight") else wanted)
            data, raw = encode(arr, qtype)
            writer.add_tensor(tname, data, raw_dtype=raw)

        steps = hp["layers"] + 2
        embed = src.get("model.embed_tokens.weight")
        add("token_embd.weight", embed, False)
        if progress is not None:
            progress(1, steps, "token_embd")
        for i in range(hp["layers"]):
            for tname, arr, stays in _layer_tensors(src, i, hp):
                add(tname, arr, stays)
            if progress is not None:
                progress(i + 2, steps, f"blk.{i}")
        add("output_norm.weight", src.get("model.norm.weight"), True)
        lm_head = embed if hp["tied"] else src.get("lm_head.weight")
        add("output.weight", lm_head, False)
        if progress is not None:
            progress(steps, steps, "output")
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    return path
