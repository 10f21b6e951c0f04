"""The `strata` GGUF layout: hyper-parameters, their keys, and the tensors they imply (docs/gguf.md §1).

``StrataHParams`` mirrors ``strata_train.config.StrataConfig`` field for field (a test keeps them in
step) without importing it: the converter must work without torch and without the training package.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from strata.errors import ConfigError

ARCH = "strata"

# How a tensor is stored: "weight" follows the requested weight type (quantized if asked);
# "f32" always float32 (norms, hyper-connection, router, shared-expert gate, indexer weights);
# "i32" is vocab_ids.
Kind = Literal["weight", "f32", "i32"]


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]  # numpy order ([out, in] for a linear map); GGUF stores it reversed
    kind: Kind


@dataclass(frozen=True)
class StrataHParams:
    vocab_size: int
    d: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    gated: bool
    sink_count: int
    sliding_window: int
    indexer_heads: int
    indexer_dim: int
    indexer_top_k: int
    rope_theta: float
    rope_dim: int
    n_experts: int
    n_experts_used: int
    expert_ffn: int
    shared_ffn: int
    hc_count: int
    hc_sinkhorn_iters: int
    hc_eps: float
    rms_eps: float
    mtp: bool
    mtp_vocab_ids: tuple[int, ...] | None
    context_length: int

    @classmethod
    def from_any(cls, config: Any) -> StrataHParams:
        """From a StrataConfig (or any object with these attributes), a dataclass or a mapping."""
        if isinstance(config, StrataHParams):
            return config
        if isinstance(config, Mapping):
            values = dict(config)
        elif dataclasses.is_dataclass(config) and not isinstance(config, type):
            values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
        else:
            fields = dataclasses.fields(cls)
            values = {f.name: getattr(config, f.name) for f in fields if hasattr(config, f.name)}
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [n for n in names if n not in values]
        if missing:
            raise ConfigError(f"strata hyper-parameters: missing {missing}")
        ids = values["mtp_vocab_ids"]
        values["mtp_vocab_ids"] = None if ids is None else tuple(int(i) for i in ids)
        hp = cls(**{n: values[n] for n in names})
        hp.validate()
        return hp

    def validate(self) -> None:
        def need(cond: bool, what: str) -> None:
            if not cond:
                raise ConfigError(f"strata hyper-parameters: {what}")

        for name in ("vocab_size", "d", "n_layers", "n_heads", "n_kv_heads", "head_dim", "rope_dim",
                     "n_experts", "n_experts_used", "expert_ffn", "hc_count", "context_length"):
            need(_is_int(getattr(self, name)) and getattr(self, name) >= 1, f"{name} must be an int >= 1")
        for name in ("sink_count", "sliding_window", "indexer_heads", "indexer_dim", "indexer_top_k",
                     "shared_ffn", "hc_sinkhorn_iters"):
            need(_is_int(getattr(self, name)) and getattr(self, name) >= 0, f"{name} must be an int >= 0")
        need(self.n_heads % self.n_kv_heads == 0, "n_heads must be a multiple of n_kv_heads")
        need(self.rope_dim % 2 == 0 and self.rope_dim <= self.head_dim,
             "rope_dim must be even and <= head_dim")
        need(self.n_experts_used <= self.n_experts, "n_experts_used must be <= n_experts")
        need(self.hc_count == 1 or self.hc_sinkhorn_iters >= 1,
             "hc_sinkhorn_iters must be >= 1 when hc_count > 1")
        need(self.sliding_window > 0 or (self.sink_count == 0 and self.indexer_heads == 0),
             "sinks and the indexer need a sliding window")
        need((self.indexer_heads == 0) == (self.indexer_top_k == 0) == (self.indexer_dim == 0),
             "indexer_heads, indexer_dim and indexer_top_k must be all 0 or all >= 1")
        if self.mtp_vocab_ids is not None:
            need(self.mtp, "mtp_vocab_ids given but mtp is off")
            ids = self.mtp_vocab_ids
            need(len(ids) >= 1 and len(set(ids)) == len(ids), "mtp_vocab_ids must be non-empty and unique")
            need(all(0 <= i < self.vocab_size for i in ids), "mtp_vocab_ids: an id outside [0, vocab_size)")

    @property
    def block_count(self) -> int:
        return self.n_layers + int(self.mtp)

    @property
    def mtp_vocab(self) -> list[int]:
        if not self.mtp:
            return []
        return list(range(self.vocab_size)) if self.mtp_vocab_ids is None else list(self.mtp_vocab_ids)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# (key under "strata.", value, GGUF type); every key of docs/gguf.md §1 except nextn.vocab_size.
KEYS: tuple[tuple[str, Callable[[StrataHParams], Any], str], ...] = (
    ("context_length", lambda h: h.context_length, "u32"),
    ("embedding_length", lambda h: h.d, "u32"),
    ("block_count", lambda h: h.block_count, "u32"),
    ("nextn_predict_layers", lambda h: int(h.mtp), "u32"),
    ("attention.head_count", lambda h: h.n_heads, "u32"),
    ("attention.head_count_kv", lambda h: h.n_kv_heads, "u32"),
    ("attention.key_length", lambda h: h.head_dim, "u32"),
    ("attention.value_length", lambda h: h.head_dim, "u32"),
    ("attention.layer_norm_rms_epsilon", lambda h: h.rms_eps, "f32"),
    ("attention.gated", lambda h: h.gated, "bool"),
    ("attention.sink_count", lambda h: h.sink_count, "u32"),
    ("attention.sliding_window", lambda h: h.sliding_window, "u32"),
    ("attention.indexer.head_count", lambda h: h.indexer_heads, "u32"),
    ("attention.indexer.key_length", lambda h: h.indexer_dim, "u32"),
    ("attention.indexer.top_k", lambda h: h.indexer_top_k, "u32"),
    ("rope.freq_base", lambda h: h.rope_theta, "f32"),
    ("rope.dimension_count", lambda h: h.rope_dim, "u32"),
    ("expert_count", lambda h: h.n_experts, "u32"),
    ("expert_used_count", lambda h: h.n_experts_used, "u32"),
    ("expert_feed_forward_length", lambda h: h.expert_ffn, "u32"),
    ("expert_shared_feed_forward_length", lambda h: h.shared_ffn, "u32"),
    ("hyper_connection.count", lambda h: h.hc_count, "u32"),
    ("hyper_connection.sinkhorn_iterations", lambda h: h.hc_sinkhorn_iters, "u32"),
    ("hyper_connection.epsilon", lambda h: h.hc_eps, "f32"),
)


def strata_keys(hp: StrataHParams) -> list[tuple[str, Any, str]]:
    """(full key, value, type) in file order."""
    out = [(f"{ARCH}.{k}", fn(hp), t) for k, fn, t in KEYS]
    if hp.mtp:
        out.append((f"{ARCH}.nextn.vocab_size", len(hp.mtp_vocab), "u32"))
    return out


def _block_specs(prefix: str, hp: StrataHParams, with_indexer: bool) -> dict[str, TensorSpec]:
    d, dh, e, f, fs, n = hp.d, hp.head_dim, hp.n_experts, hp.expert_ffn, hp.shared_ffn, hp.hc_count
    w: Kind = "weight"
    s: dict[str, TensorSpec] = {
        "attn_norm.weight": TensorSpec((d,), "f32"),
        "attn_q.weight": TensorSpec((hp.n_heads * dh * (2 if hp.gated else 1), d), w),
        "attn_k.weight": TensorSpec((hp.n_kv_heads * dh, d), w),
        "attn_v.weight": TensorSpec((hp.n_kv_heads * dh, d), w),
        "attn_q_norm.weight": TensorSpec((dh,), "f32"),
        "attn_k_norm.weight": TensorSpec((dh,), "f32"),
        "attn_output.weight": TensorSpec((d, hp.n_heads * dh), w),
    }
    if with_indexer and hp.indexer_heads > 0:
        s["indexer.attn_q.weight"] = TensorSpec((hp.indexer_heads * hp.indexer_dim, d), w)
        s["indexer.attn_k.weight"] = TensorSpec((hp.indexer_dim, d), w)
        s["indexer.weights.weight"] = TensorSpec((hp.indexer_heads, d), "f32")
    s["ffn_norm.weight"] = TensorSpec((d,), "f32")
    s["ffn_gate_inp.weight"] = TensorSpec((e, d), "f32")
    s["ffn_gate_exps.weight"] = TensorSpec((e, f, d), w)
    s["ffn_up_exps.weight"] = TensorSpec((e, f, d), w)
    s["ffn_down_exps.weight"] = TensorSpec((e, d, f), w)
    if fs > 0:
        s["ffn_gate_shexp.weight"] = TensorSpec((fs, d), w)
        s["ffn_up_shexp.weight"] = TensorSpec((fs, d), w)
        s["ffn_down_shexp.weight"] = TensorSpec((d, fs), w)
        s["ffn_gate_inp_shexp.weight"] = TensorSpec((1, d), "f32")
    if n > 1:
        for sub in ("hc_attn", "hc_ffn"):
            s[f"{sub}_fn.weight"] = TensorSpec(((2 + n) * n, n * d), "f32")
            s[f"{sub}_base.weight"] = TensorSpec(((2 + n) * n,), "f32")
            s[f"{sub}_scale.weight"] = TensorSpec((3,), "f32")
    return {f"{prefix}.{k}": v for k, v in s.items()}


def strata_tensor_specs(hp: StrataHParams) -> dict[str, TensorSpec]:
    """Every tensor of a `strata` file with its shape and storage kind, in file order."""
    d, n = hp.d, hp.hc_count
    specs: dict[str, TensorSpec] = {"token_embd.weight": TensorSpec((hp.vocab_size, d), "weight")}
    for i in range(hp.n_layers):
        specs.update(_block_specs(f"blk.{i}", hp, with_indexer=True))
    if n > 1:
        specs["output_hc_fn.weight"] = TensorSpec((n, n * d), "f32")
        specs["output_hc_base.weight"] = TensorSpec((n,), "f32")
        specs["output_hc_scale.weight"] = TensorSpec((1,), "f32")
    specs["output_norm.weight"] = TensorSpec((d,), "f32")
    specs["output.weight"] = TensorSpec((hp.vocab_size, d), "weight")
    if hp.mtp:
        m = f"blk.{hp.n_layers}"
        specs.update(_block_specs(m, hp, with_indexer=False))
        specs[f"{m}.nextn.enorm.weight"] = TensorSpec((d,), "f32")
        specs[f"{m}.nextn.hnorm.weight"] = TensorSpec((d,), "f32")
        specs[f"{m}.nextn.fc_embedding.weight"] = TensorSpec((d, d), "weight")
        specs[f"{m}.nextn.fc_hidden.weight"] = TensorSpec((d, d), "weight")
        if n > 1:
            specs[f"{m}.nextn.hc_head_fn.weight"] = TensorSpec((n, n * d), "f32")
            specs[f"{m}.nextn.hc_head_base.weight"] = TensorSpec((n,), "f32")
            specs[f"{m}.nextn.hc_head_scale.weight"] = TensorSpec((1,), "f32")
        specs[f"{m}.nextn.shared_head_norm.weight"] = TensorSpec((d,), "f32")
        specs[f"{m}.nextn.vocab_ids"] = TensorSpec((len(hp.mtp_vocab),), "i32")
    return specs


def is_expert_tensor(name: str) -> bool:
    return name.endswith("_exps.weight")
