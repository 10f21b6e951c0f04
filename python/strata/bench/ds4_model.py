"""A random DeepSeek-V4 (llama.cpp's ``deepseek4``) with V4-Flash's per-layer structure, scaled down so
its routed experts far exceed an expert cache yet the file fits this machine's disk (docs/benchmarks.md,
section DeepSeek-V4).

Kept from V4-Flash: 4 hyper-connection streams with 20 Sinkhorn steps; the attention schedule (two
sliding-window layers, then CSA with the lightning indexer and HCA alternating); the first three layers
hash-routed by a token -> experts table, the rest routed by sqrt-softplus scores plus a selection bias;
low-rank q; one shared K = V head with sinks; the grouped low-rank output projection; a shared expert;
6 experts used per token; swiglu limit 10, routed scale 1.5. Scaled: width, layers, heads, ranks,
expert count and width, vocabulary.

Written straight with gguf's writer, one tensor at a time (no transformers, no quantization): every
matrix is Q8_0 or Q4_0 blocks of random bytes with one fp16 scale per tensor, giving weights of the
N(0, 1/in) scale of the tests' random models (``tests/python/test_deepseek4.py``, which keep activations
O(1) over hundreds of tokens); norms and mixers are F32 near 1 or 0, as there. Seeded: the same shape
and seed give the same bytes. The text is noise; routing, bytes read and speed are what it is for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter

from strata.bench.files import write_atomically
from strata.convert.deepseek4_layout import ARCH, add_keys, keeps_f32, main_plan, tensor_shape
from strata.convert.gguf_header import add_file_keys
from strata.convert.tokenizer_keys import apply_tokenizer, byte_level_tokenizer

BLOCK = 32
# (bytes per 32 weights, standard deviation of the raw quant values): Q8_0 = fp16 scale + 32 int8 taken
# uniformly from [-128, 127]; Q4_0 = fp16 scale + 16 bytes of nibbles, value (q - 8) in [-8, 7].
BLOCK_TYPES = {"Q8_0": (34, 73.9), "Q4_0": (18, 4.61)}


@dataclass(frozen=True)
class Ds4Shape:
    """The generated model's shape; the defaults give ~2.6 GB (Q8_0), ~2.5 GB of it routed experts.

    V4-Flash for comparison: 43 layers, d 4096, 64 heads of 512 (RoPE on 64), q rank 1024, 8 output
    groups of rank 1024, 64 indexer heads of 128 with top-k 512, window 128, 256 experts of 2048 with
    6 used, vocabulary 129280."""

    layers: int = 12
    d: int = 1024
    heads: int = 16
    head_dim: int = 128
    rope_dim: int = 32
    q_lora: int = 256
    o_groups: int = 4
    o_lora: int = 256
    index_heads: int = 16
    index_dim: int = 64
    index_topk: int = 32
    window: int = 128
    experts: int = 128
    experts_used: int = 6
    expert_ffn: int = 512
    vocab: int = 8192
    hash_layers: int = 3
    expert_type: str = "Q8_0"

    def ratios(self) -> list[int]:
        """V4-Flash's schedule: sliding (0), sliding, then CSA (4) and HCA (128) alternating."""
        return [0 if i < 2 else (4 if i % 2 == 0 else 128) for i in range(self.layers)]

    def hparams(self) -> dict[str, Any]:
        """The converter's hyper-parameter dict (``convert/deepseek4.py``) for this shape."""
        return {
            "d": self.d, "layers": self.layers, "heads": self.heads, "head_dim": self.head_dim,
            "rope_dim": self.rope_dim, "q_lora": self.q_lora, "rope_theta": 10000.0,
            "compress_theta": 160000.0, "compress_rope": {"rope_type": "default"}, "ratios": self.ratios(),
            "n_hash": self.hash_layers, "experts": self.experts, "experts_used": self.experts_used,
            "expert_ffn": self.expert_ffn, "shared": 1, "scale": 1.5, "norm_topk": True, "swiglu_limit": 10.0,
            "window": self.window, "o_groups": self.o_groups, "o_lora": self.o_lora,
            "index_heads": self.index_heads, "index_dim": self.index_dim, "index_topk": self.index_topk,
            "hc_iters": 20, "hc_eps": 1e-6, "context": 4096, "rms_eps": 1e-6, "vocab": self.vocab,
            "tied": False, "mtp_ratio": None, "nextn": 0,
        }

    def check(self) -> None:
        """What llama.cpp's deepseek4 and the block formats need of the shape."""
        problems = []
        if self.expert_type not in BLOCK_TYPES:
            problems.append(f"expert_type {self.expert_type!r} (Q8_0 or Q4_0)")
        if self.layers < 4:
            problems.append("layers >= 4 (llama.cpp needs both a CSA and an HCA layer)")
        if not 0 <= self.hash_layers < self.layers:
            problems.append("0 <= hash_layers < layers")
        if self.heads % self.o_groups:
            problems.append("heads a multiple of o_groups")
        if not 0 < self.experts_used <= self.experts:
            problems.append("0 < experts_used <= experts")
        if self.rope_dim % 2 or not 0 < self.rope_dim <= self.head_dim:
            problems.append("rope_dim even and <= head_dim")
        dims = (self.d, self.expert_ffn, self.q_lora, self.o_lora, self.head_dim, self.index_dim)
        if any(n % BLOCK for n in dims):
            problems.append(f"d, expert_ffn, q_lora, o_lora, head_dim, index_dim multiples of {BLOCK}")
        if problems:
            raise ValueError("DeepSeek-V4 bench shape: need " + "; ".join(problems))

    def expert_bytes(self) -> int:
        per_expert = 3 * self.expert_ffn * self.d // BLOCK * BLOCK_TYPES[self.expert_type][0]
        return per_expert * self.experts * self.layers

    def file_name(self, seed: int) -> str:
        return (f"ds4-bench-l{self.layers}-d{self.d}-e{self.experts}x{self.expert_ffn}-"
                f"{self.expert_type.lower()}-s{seed}.gguf")

    def with_changes(self, **changes: Any) -> Ds4Shape:
        return dataclasses.replace(self, **changes)


def _random_blocks(rng: np.random.Generator, shape: tuple[int, ...], std: float, qtype: str) -> np.ndarray:
    """Block bytes for a float tensor of `shape` (numpy order, last dim a multiple of 32) whose values are
    uniform quants times one fp16 scale, with standard deviation `std`."""
    nbytes, quant_std = BLOCK_TYPES[qtype]
    rows, blocks = int(np.prod(shape[:-1])), shape[-1] // BLOCK
    raw = np.frombuffer(rng.bytes(rows * blocks * nbytes), dtype=np.uint8)
    out = raw.reshape(rows, blocks, nbytes).copy()
    out[:, :, 0:2] = np.frombuffer(np.float16(std / quant_std).tobytes(), dtype=np.uint8)
    return out.reshape(*shape[:-1], blocks * nbytes)


def _small_f32(rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """The tests' random-model recipe: vectors near 1 (near 0 for mixer biases and sinks, a spread
    selection bias), matrices N(0, 1/in)."""
    if name.endswith("exp_probs_b.bias"):
        return (0.3 * rng.standard_normal(shape)).astype(np.float32)
    if len(shape) == 1:
        centre = 0.0 if ("_base." in name or "sinks" in name) else 1.0
        return (centre + 0.1 * rng.standard_normal(shape)).astype(np.float32)
    return (rng.standard_normal(shape) * shape[-1] ** -0.5).astype(np.float32)


def _describe(shape: Ds4Shape) -> Iterator[tuple[str, tuple[int, ...], str]]:
    """(name, numpy shape, storage) of every tensor in file order; storage is F32, I32 or a block type."""
    hp = shape.hparams()
    for name, _ in main_plan(hp):
        dims = tensor_shape(name, hp)
        if name.endswith("tid2eid.weight"):
            yield name, dims, "I32"
        elif keeps_f32(name, len(dims)):
            yield name, dims, "F32"
        else:
            yield name, dims, shape.expert_type


def make_ds4_model(path: str | Path, shape: Ds4Shape | None = None, seed: int = 0) -> Path:
    """Write the model to `path` and return it."""
    shape = shape or Ds4Shape()
    shape.check()
    tensors = list(_describe(shape))
    path = Path(path)
    writer = GGUFWriter(str(path), ARCH)
    try:
        add_file_keys(writer, f"ds4-bench-{seed}", shape.expert_type)
        add_keys(writer, shape.hparams())
        apply_tokenizer(writer, byte_level_tokenizer(shape.vocab))
        for name, dims, kind in tensors:
            if kind in BLOCK_TYPES:
                nbytes = int(np.prod(dims[:-1])) * (dims[-1] // BLOCK) * BLOCK_TYPES[kind][0]
                writer.add_tensor_info(name, dims, np.dtype(np.float32), nbytes,
                                       raw_dtype=GGMLQuantizationType[kind])
            else:
                dtype = np.dtype(np.int32 if kind == "I32" else np.float32)
                writer.add_tensor_info(name, dims, dtype, int(np.prod(dims)) * dtype.itemsize)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        rng = np.random.default_rng(seed)
        for name, dims, kind in tensors:  # generated in file order: the seed fixes every byte
            if kind in BLOCK_TYPES:
                writer.write_tensor_data(_random_blocks(rng, dims, dims[-1] ** -0.5, kind))
            elif kind == "I32":  # each token's experts: distinct ids
                table = np.argsort(rng.random((shape.vocab, shape.experts)), axis=1)[:, : shape.experts_used]
                writer.write_tensor_data(np.ascontiguousarray(table, dtype=np.int32))
            else:
                writer.write_tensor_data(_small_f32(rng, name, dims))
    finally:
        writer.close()
    return path


def cached_ds4_model(workdir: str | Path, shape: Ds4Shape | None = None, seed: int = 0) -> Path:
    """The model in `workdir` under a name that encodes its shape, written once (via a .part file)."""
    shape = shape or Ds4Shape()
    out = Path(workdir) / shape.file_name(seed)
    if not out.exists():
        write_atomically(out, lambda part: make_ds4_model(part, shape, seed))
    return out
