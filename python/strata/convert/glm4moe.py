"""Hugging Face ``Glm4MoeForCausalLM`` (GLM-4.5 / 4.6 / Air) -> llama.cpp's ``glm4moe`` GGUF
(docs/gguf.md §4).

Keys follow llama.cpp's convert_hf_to_gguf.py (Glm4MoeModel) and tensor names come from the
``gguf`` package's own name map for ``MODEL_ARCH.GLM4_MOE`` (``blk.N.post_attention_norm`` for the
pre-FFN norm, ``blk.N.exp_probs_b.bias`` for the router's score-correction bias,
``blk.N.nextn.*`` for the MTP layer). GLM uses NEOX RoPE on the first half of each head
(``partial_rotary_factor``), so q/k rows are written as they are. The MTP (nextn) layer is written
when the checkpoint has its tensors (``model.layers.{L}.*``); transformers' own module has none, so a
directory saved by transformers converts with ``nextn_predict_layers = 0``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from gguf import (
    MODEL_ARCH,
    ExpertGatingFuncType,
    GGUFWriter,
    get_tensor_name_map,
)

from strata.convert.gguf_header import add_file_keys, add_moe_shape_keys
from strata.convert.qwen3moe import TensorSource, open_hf_source
from strata.convert.tokenizer_keys import apply_tokenizer
from strata.convert.weight_types import encode, parse_weight_type, storage_type
from strata.errors import ConfigError, FormatError

ARCH = "glm4moe"


def _rope(cfg: dict[str, Any]) -> tuple[float, float]:
    """(rope_theta, partial_rotary_factor) from a transformers 4 or 5 config."""
    rope = cfg.get("rope_parameters") or {}
    scaling = cfg.get("rope_scaling") or {}
    kind = rope.get("rope_type", scaling.get("rope_type", scaling.get("type", "default")))
    if kind not in (None, "default"):
        raise ConfigError(f"GLM-4-MoE config: rope type {kind!r} is not supported (only the default RoPE)")
    theta = rope.get("rope_theta", cfg.get("rope_theta"))
    if theta is None:
        raise ConfigError("GLM-4-MoE config: no rope_theta")
    factor = rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 0.5))
    return float(theta), float(factor)


def glm4moe_hparams(cfg: dict[str, Any]) -> dict[str, Any]:
    """Check that the Hugging Face config is what the `glm4moe` architecture can express."""

    def need(cond: bool, what: str) -> None:
        if not cond:
            raise ConfigError(f"GLM-4-MoE config: {what}")

    need(cfg.get("model_type", "glm4_moe") == "glm4_moe", f"model_type is {cfg.get('model_type')!r}")
    need(cfg.get("hidden_act", "silu") == "silu", "hidden_act must be silu")
    n_group, topk_group = int(cfg.get("n_group", 1)), int(cfg.get("topk_group", 1))
    need(n_group == topk_group,
         f"grouped routing (n_group = {n_group}, topk_group = {topk_group}) is not supported")
    heads = int(cfg["num_attention_heads"])
    d = int(cfg["hidden_size"])
    head_dim = int(cfg.get("head_dim") or d // heads)
    theta, factor = _rope(cfg)
    rope_dim = int(head_dim * factor)
    need(rope_dim % 2 == 0 and 0 < rope_dim <= head_dim,
         f"rotary dims {rope_dim} must be even and <= {head_dim}")
    layers = int(cfg["num_hidden_layers"])
    dense = int(cfg.get("first_k_dense_replace", 0))
    need(0 <= dense < layers, f"first_k_dense_replace = {dense} must leave a MoE layer of {layers}")
    return {
        "d": d,
        "layers": layers,
        "heads": heads,
        "kv_heads": int(cfg.get("num_key_value_heads", heads)),
        "head_dim": head_dim,
        "rope_dim": rope_dim,
        "rope_theta": theta,
        "ffn": int(cfg["intermediate_size"]),
        "experts": int(cfg["n_routed_experts"]),
        "experts_used": int(cfg["num_experts_per_tok"]),
        "expert_ffn": int(cfg["moe_intermediate_size"]),
        "shared": int(cfg.get("n_shared_experts", 0)),
        "dense": dense,
        "scale": float(cfg.get("routed_scaling_factor", 1.0)),
        "norm_topk": bool(cfg.get("norm_topk_prob", True)),
        "qk_norm": bool(cfg.get("use_qk_norm", False)),
        "bias": bool(cfg.get("attention_bias", False)),
        "nextn": int(cfg.get("num_nextn_predict_layers", 0)),
        "context": int(cfg.get("max_position_embeddings", 4096)),
        "rms_eps": float(cfg.get("rms_norm_eps", 1e-5)),
        "tied": bool(cfg.get("tie_word_embeddings", False)),
        "vocab": int(cfg["vocab_size"]),
    }


Thunk = Callable[[], np.ndarray]


def _expert_stacks(src: TensorSource, p: str, e: int, f: int) -> list[tuple[str, Thunk]]:
    """(HF name of the stacked tensor, loader of [E, rows, cols]) for gate, up and down: on-disk
    per-expert tensors, or the fused ``experts.gate_up_proj`` of transformers 5 modules in memory."""
    fused = f"{p}.mlp.experts.gate_up_proj"
    if fused in src:

        def gate_up(half: int) -> np.ndarray:
            arr = src.get(fused)
            if arr.shape[:2] != (e, 2 * f):
                raise FormatError(f"{fused}: shape {arr.shape}, want ({e}, {2 * f}, d)")
            return arr[:, half * f:(half + 1) * f]

        return [(f"{p}.mlp.experts.gate_proj.weight", lambda: gate_up(0)),
                (f"{p}.mlp.experts.up_proj.weight", lambda: gate_up(1)),
                (f"{p}.mlp.experts.down_proj.weight", lambda: src.get(f"{p}.mlp.experts.down_proj"))]

    def stack(w: str) -> Thunk:
        return lambda: np.stack([src.get(f"{p}.mlp.experts.{x}.{w}.weight") for x in range(e)])

    return [(f"{p}.mlp.experts.{w}.weight", stack(w)) for w in ("gate_proj", "up_proj", "down_proj")]


def _block_plan(src: TensorSource, i: int, hp: dict[str, Any], mtp: bool) -> list[tuple[str, Thunk]]:
    """(HF name, loader) of every tensor of block i: its decoder layer, and the nextn tensors when mtp."""
    p = f"model.layers.{i}"
    names = [f"{p}.input_layernorm.weight", f"{p}.post_attention_layernorm.weight"]
    names += [f"{p}.self_attn.{proj}.weight" for proj in ("q_proj", "k_proj", "v_proj", "o_proj")]
    if hp["bias"]:
        names += [f"{p}.self_attn.{proj}.bias" for proj in ("q_proj", "k_proj", "v_proj")]
    if hp["qk_norm"]:
        names += [f"{p}.self_attn.q_norm.weight", f"{p}.self_attn.k_norm.weight"]
    if i < hp["dense"]:
        names += [f"{p}.mlp.{w}.weight" for w in ("gate_proj", "up_proj", "down_proj")]
    else:
        names += [f"{p}.mlp.gate.weight", f"{p}.mlp.gate.e_score_correction_bias"]
        if hp["shared"]:
            names += [f"{p}.mlp.shared_experts.{w}.weight" for w in ("gate_proj", "up_proj", "down_proj")]
    if mtp:
        names += [f"{p}.{t}.weight" for t in ("eh_proj", "enorm", "hnorm", "shared_head.norm")]
        names += [f"{p}.{t}.weight" for t in ("embed_tokens", "shared_head.head") if f"{p}.{t}.weight" in src]
    plan: list[tuple[str, Thunk]] = [(n, functools.partial(src.get, n)) for n in names]
    if i >= hp["dense"]:
        plan += _expert_stacks(src, p, hp["experts"], hp["expert_ffn"])
    return plan


def _expected_shape(gguf_name: str, hp: dict[str, Any]) -> tuple[int, ...]:
    """The numpy shape the config implies for a tensor (docs/gguf.md §4)."""
    d, dh, e, f = hp["d"], hp["head_dim"], hp["experts"], hp["expert_ffn"]
    q, kv, fs, fd = hp["heads"] * dh, hp["kv_heads"] * dh, f * hp["shared"], hp["ffn"]
    leaf = gguf_name.split(".", 2)[-1] if gguf_name.startswith("blk.") else gguf_name
    shapes = {
        "token_embd.weight": (hp["vocab"], d), "output.weight": (hp["vocab"], d), "output_norm.weight": (d,),
        "attn_norm.weight": (d,), "post_attention_norm.weight": (d,),
        "attn_q.weight": (q, d), "attn_k.weight": (kv, d), "attn_v.weight": (kv, d),
        "attn_output.weight": (d, q),
        "attn_q.bias": (q,), "attn_k.bias": (kv,), "attn_v.bias": (kv,),
        "attn_q_norm.weight": (dh,), "attn_k_norm.weight": (dh,),
        "ffn_gate.weight": (fd, d), "ffn_up.weight": (fd, d), "ffn_down.weight": (d, fd),
        "ffn_gate_inp.weight": (e, d), "exp_probs_b.bias": (e,),
        "ffn_gate_exps.weight": (e, f, d), "ffn_up_exps.weight": (e, f, d), "ffn_down_exps.weight": (e, d, f),
        "ffn_gate_shexp.weight": (fs, d), "ffn_up_shexp.weight": (fs, d), "ffn_down_shexp.weight": (d, fs),
        "nextn.eh_proj.weight": (d, 2 * d), "nextn.enorm.weight": (d,), "nextn.hnorm.weight": (d,),
        "nextn.shared_head_norm.weight": (d,), "nextn.embed_tokens.weight": (hp["vocab"], d),
        "nextn.shared_head_head.weight": (hp["vocab"], d),
    }
    return shapes[leaf]


def _keeps_f32(gguf_name: str, arr: np.ndarray) -> bool:
    """Norms, biases and the router stay F32 (llama.cpp does the same)."""
    return arr.ndim == 1 or gguf_name.endswith("ffn_gate_inp.weight")


def _has_mtp(src: TensorSource, hp: dict[str, Any]) -> bool:
    return hp["nextn"] > 0 and f"model.layers.{hp['layers']}.eh_proj.weight" in src


def convert_glm4moe(
    source: str | Path | Any,
    path: str | Path,
    tokenizer: Any = None,
    weight_type: str = "F32",
    expert_type: str | None = None,
    name: str | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> Path:
    """Convert a Hugging Face GLM-4-MoE model to GGUF.

    source: a model directory (config.json + *.safetensors, sharded or not, read without torch) or
    an in-memory ``Glm4MoeForCausalLM``. Tied embeddings are written as an explicit output.weight.
    progress: called as ``progress(done, total, tensor_name)`` after each tensor is encoded.
    """
    cfg, src, default_name = open_hf_source(source, "glm4moe")
    hp = glm4moe_hparams(cfg)
    mtp = _has_mtp(src, hp)
    n_blocks = hp["layers"] + (1 if mtp else 0)
    names = get_tensor_name_map(MODEL_ARCH.GLM4_MOE, n_blocks)
    wanted = parse_weight_type(weight_type)
    wanted_experts = parse_weight_type(expert_type) if expert_type else wanted

    path = Path(path)
    writer = GGUFWriter(str(path), ARCH, use_temp_file=True)
    try:
        add_file_keys(writer, name or default_name, weight_type)
        add_moe_shape_keys(writer, hp, blocks=n_blocks, ffn=hp["ffn"], kv_heads=hp["kv_heads"],
                           rope_dim=hp["rope_dim"])
        writer.add_expert_shared_count(hp["shared"])
        writer.add_leading_dense_block_count(hp["dense"])
        writer.add_expert_gating_func(ExpertGatingFuncType.SIGMOID)
        writer.add_expert_weights_scale(hp["scale"])
        writer.add_expert_weights_norm(hp["norm_topk"])
        writer.add_nextn_predict_layers(1 if mtp else 0)
        apply_tokenizer(writer, tokenizer)

        embed = src.get("model.embed_tokens.weight")
        if embed.shape != (hp["vocab"], hp["d"]):
            want = (hp["vocab"], hp["d"])
            raise FormatError(f"model.embed_tokens.weight: shape {embed.shape}, the config implies {want}")
        plan: list[tuple[str, Thunk]] = [("model.embed_tokens.weight", lambda: embed)]
        for i in range(n_blocks):
            plan += _block_plan(src, i, hp, mtp and i == hp["layers"])
        plan += [("model.norm.weight", lambda: src.get("model.norm.weight")),
                 ("lm_head.weight", lambda: embed if hp["tied"] else src.get("lm_head.weight"))]
        done = [0]

        def add(hf_name: str, arr: np.ndarray) -> None:
            if hf_name.endswith(".e_score_correction_bias"):
                gname = hf_name.split(".mlp.")[0].replace("model.layers.", "blk.") + ".exp_probs_b.bias"
            else:
                found = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
                if found is None:
                    raise FormatError(f"tensor {hf_name} has no glm4moe name in gguf's tensor map")
                gname = found
            arr = np.ascontiguousarray(arr, dtype=np.float32)
            want = _expected_shape(gname, hp)
            if arr.shape != want:
                raise FormatError(f"{hf_name}: shape {arr.shape}, the config implies {want}")
            if _keeps_f32(gname, arr):
                writer.add_tensor(gname, arr)
            else:
                qtype = storage_type(arr.shape, wanted_experts if gname.endswith("_exps.weight") else wanted)
                data, raw = encode(arr, qtype)
                writer.add_tensor(gname, data, raw_dtype=raw)
            done[0] += 1
            if progress is not None:
                progress(done[0], len(plan), gname)

        for hf_name, load in plan:
            add(hf_name, load())
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    return path
