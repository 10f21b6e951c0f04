"""Hugging Face DeepSeek-V4 (``DeepseekV4ForCausalLM``, ``model_type = deepseek_v4``) -> llama.cpp's
``deepseek4`` GGUF (docs/models.md, section ``deepseek4``).

The gguf package on PyPI (0.19) has no DEEPSEEK4 constants, so the keys and tensor names are
written out here, as llama.cpp's ``src/models/deepseek4.cpp`` loads them (checked by loading the
converted file in llama-cpp-python 0.3.36). Tensors are read by their names in DeepSeek's own
checkpoint layout (``layers.N.attn.wq_a.weight``, ``layers.N.ffn.experts.E.w1.weight``,
``hc_head_fn`` ...), which is also what transformers' ``save_pretrained`` writes (with a ``model.``
prefix and ``embed_tokens`` / ``hc_head.hc_fn`` spellings, normalised below).

Not handled: FP8 / FP4 block-scaled checkpoint tensors (DeepSeek's released files; a converter
must dequantise them first) and the MTP layer (``mtp.0.*``; transformers drops it on load, so a
directory saved by transformers has none and converts with ``nextn_predict_layers = 0``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFWriter

from strata.convert.gguf_header import add_file_keys, add_moe_shape_keys
from strata.convert.qwen3moe import TensorSource
from strata.convert.safetensors_reader import CheckpointDir
from strata.convert.tokenizer_keys import apply_tokenizer
from strata.convert.weight_types import encode, parse_weight_type, storage_type
from strata.errors import ConfigError, FormatError

ARCH = "deepseek4"
# llama.cpp's llama_expert_gating_func_type value for sqrt(softplus(logit)) scoring.
GATING_SQRT_SOFTPLUS = 4
# The compression ratios llama.cpp's deepseek4 graph implements (CSA = 4 with the lightning
# indexer, HCA = 128), and the attention layer type each one is in transformers' config.
LAYER_RATIOS = {"sliding_attention": 0, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}
HC_STREAMS = 4  # llama.cpp asserts hc_mult == 4


def _need(cond: bool, what: str) -> None:
    if not cond:
        raise ConfigError(f"DeepSeek-V4 config: {what}")


def _compress_rope(cfg: dict[str, Any]) -> dict[str, Any]:
    """The compressed layers' RoPE parameters (transformers 5 nests them under rope_parameters.compress)."""
    rp = cfg.get("rope_parameters") or {}
    if isinstance(rp.get("compress"), dict):
        return dict(rp["compress"])
    scaling = dict(cfg.get("rope_scaling") or {})
    scaling.setdefault("rope_type", scaling.get("type", "default"))
    return scaling


def deepseek4_hparams(cfg: dict[str, Any]) -> dict[str, Any]:
    """Check that the Hugging Face config is what llama.cpp's `deepseek4` can express."""
    try:
        return _hparams(cfg)
    except KeyError as exc:
        raise ConfigError(f"DeepSeek-V4 config: no {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"DeepSeek-V4 config: {exc}") from None


def _hparams(cfg: dict[str, Any]) -> dict[str, Any]:
    _need(cfg.get("model_type", "deepseek_v4") == "deepseek_v4", f"model_type is {cfg.get('model_type')!r}")
    _need(cfg.get("hidden_act", "silu") == "silu", "hidden_act must be silu")
    _need(
        not cfg.get("quantization_config"),
        "quantization_config is set: FP8 / FP4 block-scaled checkpoints are not converted "
        "(dequantise them to BF16 first)",
    )
    _need(
        cfg.get("scoring_func", "sqrtsoftplus") == "sqrtsoftplus",
        f"scoring_func {cfg.get('scoring_func')!r}: llama.cpp's deepseek4 only has sqrtsoftplus",
    )
    layers = int(cfg["num_hidden_layers"])
    rates = {
        **{"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
        **(cfg.get("compress_rates") or {}),
    }
    _need(
        rates == {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
        f"compress_rates {rates}: llama.cpp's deepseek4 implements only 4 (CSA) and 128 (HCA)",
    )
    if cfg.get("layer_types") is not None:
        types = list(cfg["layer_types"])
        _need(all(t in LAYER_RATIOS for t in types), f"unknown layer_types {types}")
        ratios = [LAYER_RATIOS[t] for t in types]
    else:
        ratios = [int(r) for r in cfg.get("compress_ratios") or []]
    _need(
        len(ratios) >= layers and all(r in (0, 4, 128) for r in ratios[:layers]),
        f"need a compression ratio in (0, 4, 128) per layer, got {ratios}",
    )
    if cfg.get("mlp_layer_types") is not None:
        mlp = list(cfg["mlp_layer_types"])[:layers]
        n_hash = sum(1 for t in mlp if t == "hash_moe")
        _need(
            mlp == ["hash_moe"] * n_hash + ["moe"] * (layers - n_hash),
            f"mlp_layer_types {mlp}: hash-routed layers must be a leading run (llama.cpp's hash_layer_count)",
        )
    else:
        n_hash = int(cfg.get("num_hash_layers", 3))
    _need(int(cfg.get("hc_mult", 4)) == HC_STREAMS, f"hc_mult = {cfg.get('hc_mult')}: llama.cpp needs 4")
    _need(int(cfg.get("num_key_value_heads", 1)) == 1, "num_key_value_heads must be 1 (shared-KV MQA)")
    _need(
        int(cfg.get("n_shared_experts", 1)) == 1,
        "n_shared_experts must be 1 (transformers' shared MLP is one expert wide whatever the count)",
    )
    _need(
        not cfg.get("attention_bias") and not cfg.get("mlp_bias"), "attention / MLP biases are not supported"
    )
    heads, head_dim = int(cfg["num_attention_heads"]), int(cfg["head_dim"])
    rope_dim = int(
        cfg.get("qk_rope_head_dim") or round(head_dim * float(cfg.get("partial_rotary_factor") or 0.125))
    )
    _need(
        0 < rope_dim <= head_dim and rope_dim % 2 == 0,
        f"rotary dims {rope_dim} must be even and <= {head_dim}",
    )
    groups = int(cfg["o_groups"])
    _need(heads % groups == 0, f"num_attention_heads {heads} is not a multiple of o_groups {groups}")
    compress_rope = _compress_rope(cfg)
    kind = compress_rope.get("rope_type", "default")
    _need(kind in ("default", "yarn"), f"compressed-layer rope type {kind!r} (default or yarn only)")
    main = (cfg.get("rope_parameters") or {}).get("main") or {}
    _need(main.get("rope_type", "default") == "default", "the sliding layers' RoPE must be the default one")
    return {
        "d": int(cfg["hidden_size"]),
        "layers": layers,
        "heads": heads,
        "head_dim": head_dim,
        "rope_dim": rope_dim,
        "q_lora": int(cfg["q_lora_rank"]),
        "rope_theta": float(main.get("rope_theta", cfg.get("rope_theta", 10000.0))),
        "compress_theta": float(compress_rope.get("rope_theta", cfg.get("compress_rope_theta", 160000.0))),
        "compress_rope": compress_rope,
        "ratios": ratios[:layers],
        "n_hash": n_hash,
        "experts": int(cfg["n_routed_experts"]),
        "experts_used": int(cfg["num_experts_per_tok"]),
        "expert_ffn": int(cfg["moe_intermediate_size"]),
        "shared": int(cfg.get("n_shared_experts", 1)),
        "scale": float(cfg.get("routed_scaling_factor", 1.0)),
        "norm_topk": bool(cfg.get("norm_topk_prob", True)),
        "swiglu_limit": float(cfg.get("swiglu_limit", 0.0) or 0.0),
        "window": int(cfg["sliding_window"]),
        "o_groups": groups,
        "o_lora": int(cfg["o_lora_rank"]),
        "index_heads": int(cfg["index_n_heads"]),
        "index_dim": int(cfg["index_head_dim"]),
        "index_topk": int(cfg["index_topk"]),
        "hc_iters": int(cfg.get("hc_sinkhorn_iters", 20)),
        "hc_eps": float(cfg.get("hc_eps", 1e-6)),
        "context": int(cfg.get("max_position_embeddings", 4096)),
        "rms_eps": float(cfg.get("rms_norm_eps", 1e-6)),
        "vocab": int(cfg["vocab_size"]),
        "tied": bool(cfg.get("tie_word_embeddings", False)),
    }


class _CheckpointNames:
    """The directory's tensors under DeepSeek's checkpoint names, whichever spelling the file uses."""

    _ALIASES = {
        "embed_tokens.weight": "embed.weight",
        "lm_head.weight": "head.weight",
        "hc_head.hc_fn": "hc_head_fn",
        "hc_head.hc_base": "hc_head_base",
        "hc_head.hc_scale": "hc_head_scale",
    }

    def __init__(self, src: TensorSource, names: list[str]) -> None:
        self._src = src
        self._map: dict[str, str] = {}
        for name in names:
            short = name[len("model.") :] if name.startswith("model.") else name
            self._map[self._ALIASES.get(short, short)] = name

    def __contains__(self, name: object) -> bool:
        return name in self._map

    def get(self, name: str) -> np.ndarray:
        if name not in self._map:
            raise FormatError(f"checkpoint has no tensor {name} (nor model.{name})")
        return self._src.get(self._map[name])


def _stack(src: _CheckpointNames, names: list[str]) -> np.ndarray:
    return np.stack([src.get(n) for n in names])


def _attn_plan(i: int, ratio: int) -> list[tuple[str, str]]:
    """(GGUF name, checkpoint name) of block i's attention tensors."""
    b, a = f"blk.{i}", f"layers.{i}.attn"
    plan = [
        (f"{b}.attn_norm.weight", f"layers.{i}.attn_norm.weight"),
        (f"{b}.attn_sinks.weight", f"{a}.attn_sink"),
        (f"{b}.attn_q_a.weight", f"{a}.wq_a.weight"),
        (f"{b}.attn_q_a_norm.weight", f"{a}.q_norm.weight"),
        (f"{b}.attn_q_b.weight", f"{a}.wq_b.weight"),
        (f"{b}.attn_kv.weight", f"{a}.wkv.weight"),
        (f"{b}.attn_kv_a_norm.weight", f"{a}.norm.weight"),
        (f"{b}.attn_output_a.weight", f"{a}.wo_a.weight"),
        (f"{b}.attn_output_b.weight", f"{a}.wo_b.weight"),
    ]
    for part in ("attn", "ffn"):
        plan += [(f"{b}.hc_{part}_{w}.weight", f"layers.{i}.hc_{part}_{w}") for w in ("fn", "base", "scale")]
    if ratio:
        plan += [
            (f"{b}.attn_compressor_kv.weight", f"{a}.compressor.wkv.weight"),
            (f"{b}.attn_compressor_gate.weight", f"{a}.compressor.wgate.weight"),
            (f"{b}.attn_compressor_ape.weight", f"{a}.compressor.ape"),
            (f"{b}.attn_compressor_norm.weight", f"{a}.compressor.norm.weight"),
        ]
    if ratio == 4:
        plan += [
            (f"{b}.indexer.proj.weight", f"{a}.indexer.weights_proj.weight"),
            (f"{b}.indexer.attn_q_b.weight", f"{a}.indexer.wq_b.weight"),
            (f"{b}.indexer_compressor_kv.weight", f"{a}.indexer.compressor.wkv.weight"),
            (f"{b}.indexer_compressor_gate.weight", f"{a}.indexer.compressor.wgate.weight"),
            (f"{b}.indexer_compressor_ape.weight", f"{a}.indexer.compressor.ape"),
            (f"{b}.indexer_compressor_norm.weight", f"{a}.indexer.compressor.norm.weight"),
        ]
    return plan


def _ffn_plan(i: int, hashed: bool) -> list[tuple[str, str]]:
    b, f = f"blk.{i}", f"layers.{i}.ffn"
    plan = [
        (f"{b}.ffn_norm.weight", f"layers.{i}.ffn_norm.weight"),
        (f"{b}.ffn_gate_inp.weight", f"{f}.gate.weight"),
    ]
    plan.append(
        (f"{b}.ffn_gate_tid2eid.weight", f"{f}.gate.tid2eid")
        if hashed
        else (f"{b}.exp_probs_b.bias", f"{f}.gate.bias")
    )
    plan += [
        (f"{b}.ffn_{g}_shexp.weight", f"{f}.shared_experts.{w}.weight")
        for g, w in (("gate", "w1"), ("up", "w3"), ("down", "w2"))
    ]
    return plan


def _expected_shape(gname: str, hp: dict[str, Any]) -> tuple[int, ...]:
    """The numpy shape the config implies for a tensor (llama.cpp's create_tensor shapes, reversed)."""
    d, dh, e, f, hc = hp["d"], hp["head_dim"], hp["experts"], hp["expert_ffn"], HC_STREAMS
    mix, q, di = (2 + hc) * hc, hp["heads"] * dh, hp["index_dim"]
    leaf = gname.split(".", 2)[-1] if gname.startswith("blk.") else gname
    coff = (2 if hp["ratios"][int(gname.split(".")[1])] == 4 else 1) if gname.startswith("blk.") else 0
    shapes = {
        "token_embd.weight": (hp["vocab"], d),
        "output.weight": (hp["vocab"], d),
        "output_norm.weight": (d,),
        "output_hc_fn.weight": (hc, hc * d),
        "output_hc_base.weight": (hc,),
        "output_hc_scale.weight": (1,),
        "attn_norm.weight": (d,),
        "attn_sinks.weight": (hp["heads"],),
        "attn_q_a.weight": (hp["q_lora"], d),
        "attn_q_a_norm.weight": (hp["q_lora"],),
        "attn_q_b.weight": (q, hp["q_lora"]),
        "attn_kv.weight": (dh, d),
        "attn_kv_a_norm.weight": (dh,),
        "attn_output_a.weight": (hp["o_groups"] * hp["o_lora"], q // hp["o_groups"]),
        "attn_output_b.weight": (d, hp["o_groups"] * hp["o_lora"]),
        "hc_attn_fn.weight": (mix, hc * d),
        "hc_attn_base.weight": (mix,),
        "hc_attn_scale.weight": (3,),
        "hc_ffn_fn.weight": (mix, hc * d),
        "hc_ffn_base.weight": (mix,),
        "hc_ffn_scale.weight": (3,),
        "attn_compressor_kv.weight": (coff * dh, d),
        "attn_compressor_gate.weight": (coff * dh, d),
        "attn_compressor_ape.weight": (4 if coff == 2 else 128, coff * dh),
        "attn_compressor_norm.weight": (dh,),
        "indexer.proj.weight": (hp["index_heads"], d),
        "indexer.attn_q_b.weight": (hp["index_heads"] * di, hp["q_lora"]),
        "indexer_compressor_kv.weight": (2 * di, d),
        "indexer_compressor_gate.weight": (2 * di, d),
        "indexer_compressor_ape.weight": (4, 2 * di),
        "indexer_compressor_norm.weight": (di,),
        "ffn_norm.weight": (d,),
        "ffn_gate_inp.weight": (e, d),
        "exp_probs_b.bias": (e,),
        "ffn_gate_tid2eid.weight": (hp["vocab"], hp["experts_used"]),
        "ffn_gate_exps.weight": (e, f, d),
        "ffn_up_exps.weight": (e, f, d),
        "ffn_down_exps.weight": (e, d, f),
        "ffn_gate_shexp.weight": (f * hp["shared"], d),
        "ffn_up_shexp.weight": (f * hp["shared"], d),
        "ffn_down_shexp.weight": (d, f * hp["shared"]),
    }
    return shapes[leaf]


def _keeps_f32(gname: str, arr: np.ndarray) -> bool:
    """Norms, sinks, the hyper-connection mixers, the compressors' position biases and the router stay F32."""
    keep = ("ffn_gate_inp.weight", "_ape.weight", "_fn.weight", "indexer.proj.weight")
    return arr.ndim == 1 or gname.endswith(keep)


def _add_keys(writer: GGUFWriter, hp: dict[str, Any]) -> None:
    arch, n = ARCH, hp["layers"]

    def u32(key: str, value: int) -> None:
        writer.add_uint32(f"{arch}.{key}", int(value))

    def f32(key: str, value: float) -> None:
        writer.add_float32(f"{arch}.{key}", float(value))

    add_moe_shape_keys(writer, hp, blocks=n, ffn=hp["expert_ffn"], kv_heads=1, rope_dim=hp["rope_dim"])
    writer.add_expert_shared_count(hp["shared"])
    writer.add_expert_weights_scale(hp["scale"])
    writer.add_expert_weights_norm(hp["norm_topk"])
    u32("expert_gating_func", GATING_SQRT_SOFTPLUS)
    u32("nextn_predict_layers", 0)
    u32("attention.q_lora_rank", hp["q_lora"])
    u32("attention.sliding_window", hp["window"])
    u32("attention.output_group_count", hp["o_groups"])
    u32("attention.output_lora_rank", hp["o_lora"])
    f32("attention.compress_rope_freq_base", hp["compress_theta"])
    writer.add_array(f"{arch}.attention.compress_ratios", [int(r) for r in hp["ratios"]])
    u32("attention.indexer.head_count", hp["index_heads"])
    u32("attention.indexer.key_length", hp["index_dim"])
    u32("attention.indexer.top_k", hp["index_topk"])
    u32("hyper_connection.count", HC_STREAMS)
    u32("hyper_connection.sinkhorn_iterations", hp["hc_iters"])
    f32("hyper_connection.epsilon", hp["hc_eps"])
    u32("hash_layer_count", hp["n_hash"])
    writer.add_array(f"{arch}.swiglu_clamp_exp", [hp["swiglu_limit"]] * n)
    writer.add_array(f"{arch}.swiglu_clamp_shexp", [hp["swiglu_limit"]] * n)
    rope = hp["compress_rope"]
    if rope.get("rope_type") == "yarn":  # applies to the compressed (CSA / HCA) layers only
        writer.add_string(f"{arch}.rope.scaling.type", "yarn")
        f32("rope.scaling.factor", rope["factor"])
        u32("rope.scaling.original_context_length", rope["original_max_position_embeddings"])
        f32("rope.scaling.yarn_beta_fast", rope.get("beta_fast", 32.0))
        f32("rope.scaling.yarn_beta_slow", rope.get("beta_slow", 1.0))


def convert_deepseek4(
    source: str | Path,
    path: str | Path,
    tokenizer: Any = None,
    weight_type: str = "F32",
    expert_type: str | None = None,
    name: str | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> Path:
    """Convert a DeepSeek-V4 model directory (config.json + *.safetensors, read without torch) to GGUF.

    progress: called as ``progress(done, total, tensor_name)`` after each tensor is encoded.
    """
    if not isinstance(source, (str, Path)):
        raise ConfigError("DeepSeek-V4 converts from a model directory (save the transformers model first)")

    model_dir = Path(source)
    if not (model_dir / "config.json").is_file():
        raise FormatError(f"{model_dir}: no config.json")
    cfg = json.loads((model_dir / "config.json").read_text())
    hp = deepseek4_hparams(cfg)
    ckpt = CheckpointDir(model_dir)
    src = _CheckpointNames(ckpt, ckpt.keys())
    wanted = parse_weight_type(weight_type)
    wanted_experts = parse_weight_type(expert_type) if expert_type else wanted

    plan: list[tuple[str, Callable[[], np.ndarray]]] = []

    def take(gname: str, cname: str) -> None:
        plan.append((gname, lambda: src.get(cname)))

    take("token_embd.weight", "embed.weight")
    for i in range(hp["layers"]):
        for gname, cname in _attn_plan(i, hp["ratios"][i]) + _ffn_plan(i, i < hp["n_hash"]):
            take(gname, cname)
        for g, w in (("gate", "w1"), ("up", "w3"), ("down", "w2")):
            names = [f"layers.{i}.ffn.experts.{x}.{w}.weight" for x in range(hp["experts"])]
            plan.append((f"blk.{i}.ffn_{g}_exps.weight", functools.partial(_stack, src, names)))
    take("output_hc_fn.weight", "hc_head_fn")
    take("output_hc_base.weight", "hc_head_base")
    take("output_hc_scale.weight", "hc_head_scale")
    take("output_norm.weight", "norm.weight")
    take("output.weight", "embed.weight" if hp["tied"] and "head.weight" not in src else "head.weight")

    path = Path(path)
    writer = GGUFWriter(str(path), ARCH, use_temp_file=True)
    try:
        add_file_keys(writer, name or model_dir.name, weight_type)
        _add_keys(writer, hp)
        apply_tokenizer(writer, tokenizer)
        for done, (gname, load) in enumerate(plan, 1):
            arr = load()
            want = _expected_shape(gname, hp)
            if arr.shape != want:
                raise FormatError(f"{gname}: shape {arr.shape}, the config implies {want}")
            if gname.endswith("tid2eid.weight"):
                if arr.size and (arr.min() < 0 or arr.max() >= hp["experts"]):
                    raise FormatError(f"{gname}: expert ids outside 0..{hp['experts'] - 1}")
                writer.add_tensor(gname, np.ascontiguousarray(arr, dtype=np.int32))
            elif _keeps_f32(gname, arr):
                writer.add_tensor(gname, np.ascontiguousarray(arr, dtype=np.float32))
            else:
                qtype = storage_type(arr.shape, wanted_experts if gname.endswith("_exps.weight") else wanted)
                data, raw = encode(np.asarray(arr, dtype=np.float32), qtype)
                writer.add_tensor(gname, data, raw_dtype=raw)
            if progress is not None:
                progress(done, len(plan), gname)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    return path
