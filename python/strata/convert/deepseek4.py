"""Hugging Face DeepSeek-V4 (``DeepseekV4ForCausalLM``, ``model_type = deepseek_v4``) -> llama.cpp's
``deepseek4`` GGUF (docs/models.md, section ``deepseek4``).

Tensors are read by their names in DeepSeek's own checkpoint layout (``layers.N.attn.wq_a.weight``,
``layers.N.ffn.experts.E.w1.weight``, ``hc_head_fn``, ``mtp.0.*`` ...), which is also what transformers'
``save_pretrained`` writes (with a ``model.`` prefix, ``embed_tokens`` / ``hc_head.hc_fn`` /
``attn.norm`` spellings, normalised below; transformers drops the MTP layer). The keys and tensor
names are llama.cpp's (``deepseek4_layout``), checked by loading converted files in llama-cpp-python.

Like llama.cpp's converter, the main file leaves the MTP layer out; ``mtp=True`` writes the MTP file
(llama.cpp's ``--mtp``: the MTP layer as block L with ``nextn.*``, see ``deepseek4_layout.mtp_plan``).

Not handled: FP8 / FP4 block-scaled checkpoint tensors (DeepSeek's released files; a converter must
dequantise them first).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFWriter

from strata.convert.deepseek4_layout import (
    ARCH,
    HC_STREAMS,
    MTP_PREFIX,
    add_keys,
    expert_sources,
    keeps_f32,
    main_plan,
    mtp_plan,
    mtp_source,
    tensor_shape,
)
from strata.convert.gguf_header import add_file_keys
from strata.convert.qwen3moe import TensorSource
from strata.convert.safetensors_reader import CheckpointDir
from strata.convert.tokenizer_keys import apply_tokenizer
from strata.convert.weight_types import encode, parse_weight_type, storage_type
from strata.errors import ConfigError, FormatError

# The compression ratios llama.cpp's deepseek4 graph implements (CSA = 4 with the lightning
# indexer, HCA = 128), and the attention layer type each one is in transformers' config.
LAYER_RATIOS = {"sliding_attention": 0, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}


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
        len(ratios) >= layers and all(r in (0, 4, 128) for r in ratios),
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
        # DeepSeek's compress_ratios has one more entry, the MTP layer's; transformers' layer_types not
        "mtp_ratio": ratios[layers] if len(ratios) > layers else None,
        "nextn": int(cfg.get("num_nextn_predict_layers", 0) or 0),
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
    # DeepSeek's release names the attention's K=V norm `attn.kv_norm`; transformers saves `attn.norm`
    _KV_NORM = (".attn.kv_norm.weight", ".attn.norm.weight")

    def __init__(self, src: TensorSource, names: list[str]) -> None:
        self._src = src
        self._map: dict[str, str] = {}
        for name in names:
            short = name[len("model.") :] if name.startswith("model.") else name
            if short.endswith(self._KV_NORM[0]):
                short = short[: -len(self._KV_NORM[0])] + self._KV_NORM[1]
            self._map[self._ALIASES.get(short, short)] = name

    def __contains__(self, name: object) -> bool:
        return name in self._map

    def names(self) -> list[str]:
        return list(self._map)

    def get(self, name: str) -> np.ndarray:
        if name not in self._map:
            raise FormatError(f"checkpoint has no tensor {name} (nor model.{name})")
        return self._src.get(self._map[name])


def _mtp_ratio(hp: dict[str, Any], src: _CheckpointNames) -> int:
    """The MTP layer's compression ratio: DeepSeek's compress_ratios[L] where the config has it, else
    what its tensors show (a compressor, with or without an indexer)."""
    has = {
        "compressor": f"{MTP_PREFIX}attn.compressor.wkv.weight" in src,
        "indexer": f"{MTP_PREFIX}attn.indexer.wq_b.weight" in src,
    }
    found = (4 if has["indexer"] else 128) if has["compressor"] else 0
    if hp["mtp_ratio"] is not None and hp["mtp_ratio"] != found:
        raise FormatError(
            f"the config gives the MTP layer compression ratio {hp['mtp_ratio']}, its tensors say {found}"
        )
    return found


def _loader(src: _CheckpointNames, hp: dict[str, Any], gname: str, cname: str) -> Callable[[], np.ndarray]:
    """How to read one plan entry: a tensor, a stack of per-expert tensors, or the MTP's [e_proj | h_proj]."""
    if cname.endswith(".eh_proj"):
        stem = cname[: -len("eh_proj")]
        return lambda: np.concatenate(
            [src.get(stem + "e_proj.weight"), src.get(stem + "h_proj.weight")], axis=1
        )
    stack = expert_sources(cname, hp["experts"])
    if stack is not None:
        return functools.partial(_stack, src, stack)
    if gname == "output.weight" and hp["tied"] and "head.weight" not in src:
        cname = "embed.weight"  # tied embeddings: llama.cpp needs an explicit output.weight
    return functools.partial(src.get, cname)


def _stack(src: _CheckpointNames, names: list[str]) -> np.ndarray:
    return np.stack([src.get(n) for n in names])


def convert_deepseek4(
    source: str | Path,
    path: str | Path,
    tokenizer: Any = None,
    weight_type: str = "F32",
    expert_type: str | None = None,
    name: str | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    mtp: bool = False,
) -> Path:
    """Convert a DeepSeek-V4 model directory (config.json + *.safetensors, read without torch) to GGUF:
    the main model, or with `mtp` the MTP file (needs the checkpoint's ``mtp.0.*`` tensors).

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

    if mtp:
        if not any(n.startswith(MTP_PREFIX) for n in src.names()):
            raise FormatError(
                f"{model_dir}: no {MTP_PREFIX}* tensors (transformers drops the MTP layer on save; convert "
                "DeepSeek's own checkpoint)"
            )
        if hp["nextn"] > 1:
            raise ConfigError(
                f"num_nextn_predict_layers = {hp['nextn']}: llama.cpp's deepseek4 loads one MTP layer"
            )
        hp["mtp_ratio"] = _mtp_ratio(hp, src)
        plan = [(g, mtp_source(c, hp["layers"])) for g, c in mtp_plan(hp)]
    else:
        plan = main_plan(hp)
    loads = [(g, _loader(src, hp, g, c)) for g, c in plan]

    path = Path(path)
    writer = GGUFWriter(str(path), ARCH, use_temp_file=True)
    try:
        add_file_keys(writer, name or model_dir.name, weight_type)
        add_keys(writer, hp, mtp=mtp)
        apply_tokenizer(writer, tokenizer)
        for done, (gname, load) in enumerate(loads, 1):
            arr = load()
            want = tensor_shape(gname, hp)
            if arr.shape != want:
                raise FormatError(f"{gname}: shape {arr.shape}, the config implies {want}")
            if gname.endswith("tid2eid.weight"):
                if arr.size and (arr.min() < 0 or arr.max() >= hp["experts"]):
                    raise FormatError(f"{gname}: expert ids outside 0..{hp['experts'] - 1}")
                writer.add_tensor(gname, np.ascontiguousarray(arr, dtype=np.int32))
            elif keeps_f32(gname, arr.ndim):
                writer.add_tensor(gname, np.ascontiguousarray(arr, dtype=np.float32))
            else:
                qtype = storage_type(arr.shape, wanted_experts if gname.endswith("_exps.weight") else wanted)
                data, raw = encode(np.asarray(arr, dtype=np.float32), qtype)
                writer.add_tensor(gname, data, raw_dtype=raw)
            if progress is not None:
                progress(done, len(loads), gname)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    return path
