"""A random `strata` model whose experts are big enough to exceed an expert cache (docs/experts.md).

The routed experts are written as Q8_0 blocks made of random bytes (a constant fp16 scale per tensor
and uniformly random int8 quants, so the weights have the N(0, 1/in) scale the random-model recipe
uses) straight to the file one tensor at a time: a multi-GB file costs little memory and no
quantization. Every other tensor follows ``random_strata_tensors``' recipe and is stored as Q8_0
(matrices) or F32. The result is a valid model the engine runs; its text is noise, which is all the
expert-store benchmark needs (routing, misses, bytes and speed).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_VERSION, GGMLQuantizationType, GGUFWriter

from strata.convert.strata_layout import (
    ARCH,
    StrataHParams,
    is_expert_tensor,
    strata_keys,
    strata_tensor_specs,
)
from strata.convert.tokenizer_keys import apply_tokenizer, byte_level_tokenizer
from strata.convert.weight_types import FILE_TYPES, encode, storage_type

Q8_0_BLOCK = 32
Q8_0_BYTES = 34  # fp16 scale + 32 int8


@dataclass(frozen=True)
class ExpertModelShape:
    """The shape of the generated model; the defaults give about 2.9 GB."""

    layers: int = 12
    d: int = 1024
    experts: int = 64
    experts_used: int = 6
    expert_ffn: int = 1024
    shared_ffn: int = 1024
    heads: int = 8
    kv_heads: int = 2
    head_dim: int = 128
    vocab: int = 1024
    mtp: bool = True
    router_scale: float = 1.0  # router logits' scale: > 1 makes routing peakier, as trained routers are

    def hparams(self) -> StrataHParams:
        return StrataHParams(
            vocab_size=self.vocab, d=self.d, n_layers=self.layers, n_heads=self.heads,
            n_kv_heads=self.kv_heads, head_dim=self.head_dim, gated=True, sink_count=4, sliding_window=256,
            indexer_heads=2, indexer_dim=32, indexer_top_k=64, rope_theta=10000.0, rope_dim=64,
            n_experts=self.experts, n_experts_used=self.experts_used, expert_ffn=self.expert_ffn,
            shared_ffn=self.shared_ffn, hc_count=4, hc_sinkhorn_iters=3, hc_eps=1e-6, rms_eps=1e-6,
            mtp=self.mtp, mtp_vocab_ids=None, context_length=4096,
        )

    def expert_bytes(self) -> int:
        """Bytes of all routed experts (Q8_0), the MTP block's included."""
        per_expert = 3 * self.expert_ffn * self.d // Q8_0_BLOCK * Q8_0_BYTES
        return per_expert * self.experts * (self.layers + int(self.mtp))

    @classmethod
    def for_size(cls, gigabytes: float) -> ExpertModelShape:
        """The default shape with as many layers as bring the experts near `gigabytes` GB (>= 2 layers)."""
        base = cls()
        per_layer = base.expert_bytes() / (base.layers + 1)
        layers = max(2, round(gigabytes * 1e9 / per_layer) - 1)
        return cls(layers=layers)

    @classmethod
    def demo_scale(cls) -> ExpertModelShape:
        """About the size of the shipped demo model (experts ~17 MB): 4 layers + MTP, 32 experts, 4 used."""
        return cls(layers=4, d=256, experts=32, experts_used=4, expert_ffn=128, shared_ffn=128, heads=4,
                   head_dim=64, vocab=1024)

    def with_router_scale(self, scale: float) -> ExpertModelShape:
        return dataclasses.replace(self, router_scale=scale)


def _random_q8_0(rng: np.random.Generator, shape: tuple[int, ...], std: float) -> np.ndarray:
    """Q8_0 bytes for a float tensor of `shape` (numpy order, last dim a multiple of 32) whose values
    are uniform int8 times a constant scale with standard deviation `std`."""
    rows = int(np.prod(shape[:-1]))
    blocks = shape[-1] // Q8_0_BLOCK
    raw = np.frombuffer(rng.bytes(rows * blocks * Q8_0_BYTES), dtype=np.uint8)
    out = raw.reshape(rows, blocks, Q8_0_BYTES).copy()
    scale = np.float16(std / 73.9)  # std of uniform int8 in [-128, 127] is ~73.9
    out[:, :, 0:2] = np.frombuffer(scale.tobytes(), dtype=np.uint8)
    return out.reshape(*shape[:-1], blocks * Q8_0_BYTES)


def _small_tensor(rng: np.random.Generator, name: str, shape: tuple[int, ...],
                  hp: StrataHParams) -> np.ndarray:
    if name.endswith("vocab_ids"):
        return np.asarray(hp.mtp_vocab, dtype=np.int32)
    if name == "token_embd.weight":
        return rng.standard_normal(shape, dtype=np.float32)
    if name.endswith("_base.weight"):
        return 0.5 * rng.standard_normal(shape, dtype=np.float32)
    if len(shape) == 1:
        return 1.0 + 0.1 * rng.standard_normal(shape, dtype=np.float32)
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(shape[-1] ** -0.5)


def make_expert_model(path: str | Path, shape: ExpertModelShape | None = None, seed: int = 0) -> Path:
    """Write the model to `path` and return it."""
    shape = shape or ExpertModelShape()
    hp = shape.hparams()
    if hp.d % Q8_0_BLOCK or hp.expert_ffn % Q8_0_BLOCK:
        raise ValueError("d and expert_ffn must be multiples of 32 (Q8_0 blocks)")
    specs = strata_tensor_specs(hp)
    rng = np.random.default_rng(seed)
    q8 = GGMLQuantizationType.Q8_0
    path = Path(path)
    writer = GGUFWriter(str(path), ARCH)
    try:
        writer.add_name(f"strata-expert-bench-{seed}")
        writer.add_file_type(int(FILE_TYPES["Q8_0"]))
        writer.add_quantization_version(GGML_QUANT_VERSION)
        for key, value, vtype in strata_keys(hp):
            {"u32": writer.add_uint32, "f32": writer.add_float32, "bool": writer.add_bool}[vtype](key, value)
        apply_tokenizer(writer, byte_level_tokenizer(hp.vocab_size))
        # Small tensors are made now; expert tensors are described now and generated while writing.
        small: dict[str, tuple[np.ndarray, GGMLQuantizationType | None]] = {}
        for name, spec in specs.items():
            if is_expert_tensor(name):
                nbytes = int(np.prod(spec.shape[:-1])) * (spec.shape[-1] // Q8_0_BLOCK) * Q8_0_BYTES
                writer.add_tensor_info(name, spec.shape, np.dtype(np.float32), nbytes, raw_dtype=q8)
                continue
            arr = _small_tensor(rng, name, spec.shape, hp)
            if name.endswith("ffn_gate_inp.weight"):
                arr = arr * np.float32(shape.router_scale)
            if spec.kind == "weight":
                data, raw = encode(arr, storage_type(spec.shape, q8))
            else:
                data, raw = arr, None
            small[name] = (data, raw)
            # The same description add_tensor gives.
            writer.add_tensor_info(name, data.shape, data.dtype, data.nbytes, raw_dtype=raw)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for name, spec in specs.items():
            if is_expert_tensor(name):
                writer.write_tensor_data(_random_q8_0(rng, spec.shape, spec.shape[-1] ** -0.5))
            else:
                writer.write_tensor_data(small[name][0])
    finally:
        writer.close()
    return path
