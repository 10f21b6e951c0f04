"""strata vs llama.cpp (through llama-cpp-python) on the same ``qwen3moe`` GGUF.

Builds random Qwen3-MoE models (a tiny one, and one sized like a small real MoE), converts them with
``strata.convert.convert_qwen3moe`` (byte-level tokenizer keys, so llama.cpp loads them), and runs each
file through both engines with the same thread counts:

- logit agreement on one prompt, every position: max |Δ|, max |Δ| / std of llama.cpp's logits,
  top-1 agreement, KL(p_llama.cpp || p_strata) of the softmaxes;
- prefill tok/s (N prompt tokens in one call, logits of the last row only) and decode tok/s (M greedy
  steps, one token per call), best of R repeats, engines interleaved so load on a shared machine
  falls on both alike;
- per decode run: context switches per token and busy CPUs (the process's CPU seconds / wall seconds),
  and the weight bytes a token reads x tok/s as a fraction of the measured read bandwidth.

The machine is printed and recorded with the figures: CPU model, strata's ISA path, last-level cache
size, read bandwidth per thread count (strata.bench.machine). A ``NAME:Q4_K_M`` model is the NAME:Q8_0 file
requantized by llama.cpp's own quantizer (``llama_model_quantize``, ``LLAMA_FTYPE_MOSTLY_Q4_K_M``: Q4_K
experts, Q6_K output and some down/V tensors, as ``llama-quantize Q4_K_M`` writes it); ``NAME:Q5_K_M``
(Q5_K experts, Q6_K output and some down/V tensors), ``NAME:Q4_K_S``, ``NAME:Q6_K``, ``NAME:Q2_K``,
``NAME:Q3_K_M``, ``NAME:IQ4_XS`` (``LLAMA_FTYPE_MOSTLY_IQ4_XS``: IQ4_XS experts and attention, Q6_K
output), ``NAME:IQ4_NL``, ``NAME:IQ3_S`` and ``NAME:IQ3_M`` likewise (llama.cpp refuses IQ3_XXS and the
IQ2 / IQ1 types without an importance matrix, which this bench does not make). A model whose file
is smaller than 4x the last-level cache would measure the cache, not memory: the bench then adds the
``medium`` shape in the same format (or says it cannot).

K/V precision: by default (``--kv auto``) each engine keeps its own default cache type: strata's
``Config.kv_type`` auto (fp16 cells for ``qwen3moe`` on x86-64 CPUs with AVX2+FMA+F16C, f32 elsewhere;
docs/engine.md)
and llama.cpp's f16 (``type_k = type_v = F16``). ``--kv f32`` or ``--kv f16`` stores both engines' cells in
that type; ``--llama-kv`` sets llama.cpp's alone. The tables name the types used. Flash attention off
(llama-cpp-python's default). Measures only; it never fails on speed. Before measuring, llama.cpp runs
each model once in a child process: when that child dies (llama.cpp's AMX kernels faulted on a VM that
advertises AMX, session 23) the bench stops with the signal and how to rebuild llama-cpp-python.

llama_cpp is imported only when a comparison runs; building the models needs numpy and gguf only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from strata.bench.files import write_atomically
from strata.bench.machine import (
    ProcessMeter,
    active_isa,
    cpu_model,
    decode_bytes_per_token,
    kv_bytes_per_token,
    llc_bytes,
    read_bandwidth_gbs,
)
from strata.convert import WEIGHT_TYPES, byte_level_tokenizer, convert_qwen3moe

# ---------------------------------------------------------------------------------------------
# Random Qwen3-MoE models
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MoeShape:
    name: str
    d: int
    layers: int
    experts: int
    experts_used: int
    expert_ffn: int
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int
    context: int = 4096

    def config(self) -> dict[str, Any]:
        """The Hugging Face ``Qwen3MoeConfig`` fields the converter reads."""
        return {
            "model_type": "qwen3_moe", "vocab_size": self.vocab, "hidden_size": self.d,
            "intermediate_size": 4 * self.d, "moe_intermediate_size": self.expert_ffn,
            "num_hidden_layers": self.layers, "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads, "head_dim": self.head_dim, "num_experts": self.experts,
            "num_experts_per_tok": self.experts_used, "norm_topk_prob": True,
            "max_position_embeddings": self.context, "rms_norm_eps": 1e-6, "rope_theta": 1_000_000.0,
            "tie_word_embeddings": False, "hidden_act": "silu",
        }

    def params(self) -> int:
        d, dh = self.d, self.head_dim
        attn = d * dh * (2 * self.heads + 2 * self.kv_heads) + 2 * dh + 2 * d
        moe = self.experts * (d + 3 * d * self.expert_ffn)
        return self.layers * (attn + moe) + 2 * self.vocab * d + d

    def active_params(self) -> int:
        """Weights one decode token reads: attention, router, K experts, the head (not the embedding row)."""
        d, dh = self.d, self.head_dim
        attn = d * dh * (2 * self.heads + 2 * self.kv_heads)
        moe = self.experts * d + self.experts_used * 3 * d * self.expert_ffn
        return self.layers * (attn + moe) + self.vocab * d


TINY = MoeShape("tiny", d=64, layers=2, experts=8, experts_used=2, expert_ffn=32, vocab=512, heads=4,
                kv_heads=2, head_dim=16, context=512)
# About a quarter of Qwen3-30B-A3B / OLMoE per dimension: 64 experts, top-8, GQA 16/4, head_dim 128.
SMALL = MoeShape("small", d=1024, layers=12, experts=64, experts_used=8, expert_ffn=512, vocab=32000,
                 heads=16, kv_heads=4, head_dim=128)
# SMALL's widths with 2 layers and 16 experts: small enough to store as F32 (~0.5 GB), where the two
# engines should agree to float rounding at realistic dimensions (head_dim 128, rope base 1e6, vocab 32k).
SMALL2 = MoeShape("small2", d=1024, layers=2, experts=16, experts_used=8, expert_ffn=512, vocab=32000,
                  heads=16, kv_heads=4, head_dim=128)
# For machines whose last-level cache is large (a 300 MiB L3 makes a Q4 `small` only ~2.5x the cache):
# 1.5x SMALL's width and expert ffn, 16 layers: 3.85 G parameters (~4.1 GB Q8_0, ~2.2 GB Q4_0).
MEDIUM = MoeShape("medium", d=1536, layers=16, experts=64, experts_used=8, expert_ffn=768, vocab=32000,
                  heads=16, kv_heads=4, head_dim=128)
SHAPES = {s.name: s for s in (TINY, SMALL, SMALL2, MEDIUM)}
DEFAULT_MODELS = "tiny:F32,tiny:Q8_0,small2:F32,small2:Q8_0,small:Q8_0,small:Q4_0,small:Q4_K_M"
# Formats made by llama.cpp's quantizer from the Q8_0 file (gguf.quants, the converter's, has no K-quants
# nor IQ4_XS encoder).
LLAMA_QUANTIZED = {
    "Q2_K": "LLAMA_FTYPE_MOSTLY_Q2_K",
    "Q3_K_M": "LLAMA_FTYPE_MOSTLY_Q3_K_M",
    "Q4_K_S": "LLAMA_FTYPE_MOSTLY_Q4_K_S",
    "Q4_K_M": "LLAMA_FTYPE_MOSTLY_Q4_K_M",
    "Q5_K_M": "LLAMA_FTYPE_MOSTLY_Q5_K_M",
    "Q6_K": "LLAMA_FTYPE_MOSTLY_Q6_K",
    "IQ4_XS": "LLAMA_FTYPE_MOSTLY_IQ4_XS",
    "IQ4_NL": "LLAMA_FTYPE_MOSTLY_IQ4_NL",
    "IQ3_S": "LLAMA_FTYPE_MOSTLY_IQ3_S",
    "IQ3_M": "LLAMA_FTYPE_MOSTLY_IQ3_M",
}
# A decode benchmark model must be at least this many times the last-level cache.
LLC_FACTOR = 4


class _LazyRandomState(Mapping[str, npt.NDArray[np.float32]]):
    """A Qwen3-MoE state dict whose tensors are drawn when asked for (seeded by name), so a 1 GB model
    never sits in memory whole. Matrices ~ N(0, 1/fan_in) and norms 1 + 0.1·N(0, 1): activations stay
    O(1) through the layers, so a difference between engines shows in the logits."""

    def __init__(self, shape: MoeShape, seed: int) -> None:
        self._shape = shape
        self._seed = seed
        s, dq, dkv = shape, shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
        shapes: dict[str, tuple[int, ...]] = {
            "model.embed_tokens.weight": (s.vocab, s.d),
            "model.norm.weight": (s.d,),
            "lm_head.weight": (s.vocab, s.d),
        }
        for i in range(s.layers):
            p = f"model.layers.{i}"
            shapes.update({
                f"{p}.input_layernorm.weight": (s.d,),
                f"{p}.self_attn.q_proj.weight": (dq, s.d),
                f"{p}.self_attn.k_proj.weight": (dkv, s.d),
                f"{p}.self_attn.v_proj.weight": (dkv, s.d),
                f"{p}.self_attn.o_proj.weight": (s.d, dq),
                f"{p}.self_attn.q_norm.weight": (s.head_dim,),
                f"{p}.self_attn.k_norm.weight": (s.head_dim,),
                f"{p}.post_attention_layernorm.weight": (s.d,),
                f"{p}.mlp.gate.weight": (s.experts, s.d),
                # transformers 5's fused expert layout: [E, 2F, d] (gate rows first) and [E, d, F]
                f"{p}.mlp.experts.gate_up_proj": (s.experts, 2 * s.expert_ffn, s.d),
                f"{p}.mlp.experts.down_proj": (s.experts, s.d, s.expert_ffn),
            })
        self._shapes = shapes

    def __getitem__(self, name: str) -> npt.NDArray[np.float32]:
        shape = self._shapes[name]
        rng = np.random.default_rng([self._seed, zlib.crc32(name.encode())])
        x = rng.standard_normal(shape, dtype=np.float32)
        if len(shape) == 1:
            return 1.0 + np.float32(0.1) * x
        x *= np.float32(shape[-1] ** -0.5)
        return x

    def __iter__(self) -> Iterator[str]:
        return iter(self._shapes)

    def __len__(self) -> int:
        return len(self._shapes)


class _Config:
    def __init__(self, values: dict[str, Any]) -> None:
        self._values = values

    def to_dict(self) -> dict[str, Any]:
        return dict(self._values)


class RandomQwen3Moe:
    """Quacks like a ``Qwen3MoeForCausalLM`` for ``convert_qwen3moe``: ``.config.to_dict()`` and
    ``.state_dict()``."""

    def __init__(self, shape: MoeShape, seed: int = 0) -> None:
        self.config = _Config(shape.config())
        self._state = _LazyRandomState(shape, seed)

    def state_dict(self) -> Mapping[str, npt.NDArray[np.float32]]:
        return self._state


def build_gguf(shape: MoeShape, path: Path, weight_type: str = "Q8_0", seed: int = 0) -> Path:
    """A random ``qwen3moe`` GGUF of this shape, byte-level tokenizer keys included (llama.cpp needs them)."""
    write_atomically(path, lambda part: convert_qwen3moe(
        RandomQwen3Moe(shape, seed), part, tokenizer=byte_level_tokenizer(shape.vocab),
        weight_type=weight_type, name=f"random-qwen3moe-{shape.name}"))
    return path


def llama_quantize(src: Path, dst: Path, weight_type: str, threads: int = 0) -> Path:
    """dst = src requantized by llama.cpp (``llama_model_quantize``) to the file type `weight_type`, with
    `threads` threads (0 = llama.cpp's choice, every hardware thread: building a model is not timed)."""
    import ctypes

    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = int(getattr(llama_cpp, LLAMA_QUANTIZED[weight_type]))
    params.allow_requantize = True
    params.nthread = threads

    def quantize(part: Path) -> None:
        rc = llama_cpp.llama_model_quantize(str(src).encode(), str(part).encode(), ctypes.byref(params))
        if rc != 0 or not part.is_file():
            raise RuntimeError(f"llama_model_quantize({src} -> {weight_type}) failed with {rc}")

    write_atomically(dst, quantize)
    return dst


def cached_gguf(shape: MoeShape, workdir: Path, weight_type: str, seed: int,
                log: Callable[[str], None] = print) -> Path:
    s = shape
    path = workdir / (f"qwen3moe-{s.name}-d{s.d}-L{s.layers}-E{s.experts}k{s.experts_used}-F{s.expert_ffn}"
                      f"-V{s.vocab}-{weight_type.lower()}-s{seed}.gguf")
    if not path.is_file() and weight_type in LLAMA_QUANTIZED:
        src = cached_gguf(shape, workdir, "Q8_0", seed, log)
        log(f"quantizing {src.name} to {weight_type} with llama.cpp ...")
        t0 = time.perf_counter()
        llama_quantize(src, path, weight_type)
        log(f"  done in {time.perf_counter() - t0:.1f} s, {path.stat().st_size / 2**20:.0f} MiB")
    if not path.is_file():
        log(f"building {path} ({shape.params() / 1e6:.0f} M parameters) ...")
        t0 = time.perf_counter()
        build_gguf(shape, path, weight_type, seed)
        log(f"  built in {time.perf_counter() - t0:.1f} s, {path.stat().st_size / 2**20:.0f} MiB")
    return path


# ---------------------------------------------------------------------------------------------
# Logit agreement
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Agreement:
    positions: int
    max_abs_diff: float
    mean_abs_diff: float
    logit_std: float
    max_abs_diff_rel: float  # max |Δ| / std of the reference logits
    top1_agreement: float  # fraction of positions whose argmax is the same
    mean_kl: float  # KL(p_ref || p_other), nats, mean over positions
    max_kl: float


def _log_softmax(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def logit_agreement(reference: npt.ArrayLike, other: npt.ArrayLike) -> Agreement:
    """Compare two [positions, vocab] logit arrays; `reference` (llama.cpp) sets the scale."""
    ref = np.asarray(reference, dtype=np.float64)
    oth = np.asarray(other, dtype=np.float64)
    if ref.shape != oth.shape or ref.ndim != 2:
        raise ValueError(f"logit arrays must both be [positions, vocab], got {ref.shape} and {oth.shape}")
    diff = float(np.abs(ref - oth).max())
    std = float(ref.std())
    lp, lq = _log_softmax(ref), _log_softmax(oth)
    kl = (np.exp(lp) * (lp - lq)).sum(axis=-1)
    return Agreement(
        positions=int(ref.shape[0]), max_abs_diff=diff, mean_abs_diff=float(np.abs(ref - oth).mean()),
        logit_std=std,
        max_abs_diff_rel=diff / std if std > 0 else float("inf"),
        top1_agreement=float((ref.argmax(-1) == oth.argmax(-1)).mean()),
        mean_kl=float(kl.mean()), max_kl=float(kl.max()),
    )


# ---------------------------------------------------------------------------------------------
# The two engines behind one small interface
# ---------------------------------------------------------------------------------------------


class StrataRunner:
    name = "strata"

    def __init__(self, path: Path, n_threads: int, n_ctx: int, kv: str = "auto") -> None:
        from strata import _strata
        from strata.config import Config

        # The environment's settings (STRATA_REPACK, ...) with the K/V type on top.
        config = Config.parse_env()[0].replace(kv_type=kv)
        self._engine = _strata.Engine(str(path), n_threads=n_threads, max_ctx=n_ctx, encode_mtp=False,
                                      settings=config.native())
        self.kv_type = str(self._engine.hparams["kv_type"])  # what `auto` resolved to

    def all_logits(self, tokens: Sequence[int]) -> npt.NDArray[np.float32]:
        return np.asarray(self._engine.eval(np.asarray(tokens, dtype=np.int64), start_pos=0, logits="all"))

    def prefill(self, tokens: Sequence[int]) -> int:
        """Run the prompt from position 0; the greedy next token."""
        return int(np.argmax(self._engine.eval(np.asarray(tokens, dtype=np.int64), start_pos=0)))

    def step(self, token: int) -> int:
        return int(np.argmax(self._engine.eval(np.array([token], dtype=np.int64))))


def llama_kv_type(kv: str) -> str:
    """llama.cpp's cache type for a --kv value: ``auto`` is its default, f16."""
    return "f16" if kv == "auto" else kv


def _ggml_type(name: str) -> int:
    import llama_cpp

    return int({"f32": llama_cpp.GGML_TYPE_F32, "f16": llama_cpp.GGML_TYPE_F16}[llama_kv_type(name)])


class LlamaRunner:
    name = "llama.cpp"

    def __init__(self, path: Path, n_threads: int, n_ctx: int, logits_all: bool, kv: str = "auto") -> None:
        import llama_cpp

        self._llama_cpp = llama_cpp
        self._llm = llama_cpp.Llama(
            model_path=str(path), n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx, n_threads=n_threads,
            n_threads_batch=n_threads, logits_all=logits_all, verbose=False, n_gpu_layers=0,
            type_k=_ggml_type(kv), type_v=_ggml_type(kv), flash_attn=False,
        )
        self._vocab = self._llm.n_vocab()

    def all_logits(self, tokens: Sequence[int]) -> npt.NDArray[np.float32]:
        self._llm.reset()
        self._llm.eval(list(tokens))
        return np.array(self._llm.scores[: len(tokens)], dtype=np.float32)

    def _last(self) -> int:
        # Llama.eval keeps logits only with logits_all; with one output row the context holds it.
        ptr = self._llama_cpp.llama_get_logits_ith(self._llm.ctx, -1)
        return int(np.argmax(np.ctypeslib.as_array(ptr, shape=(self._vocab,))))

    def prefill(self, tokens: Sequence[int]) -> int:
        self._llm.reset()
        self._llm.eval(list(tokens))
        return self._last()

    def step(self, token: int) -> int:
        self._llm.eval([token])
        return self._last()


Runner = StrataRunner | LlamaRunner


# llama.cpp in a child process, as the comparison starts it (LlamaRunner): every row's logits of a batch,
# then a single-token step (the batched and one-row kernels the comparison reaches first).
_PREFLIGHT = """
import sys
from pathlib import Path
from strata.bench.llama_compare import LlamaRunner
runner = LlamaRunner(Path(sys.argv[1]), int(sys.argv[2]), 256, logits_all=True, kv=sys.argv[3])
runner.all_logits([(7 * i + 3) % 257 for i in range(64)])
runner.step(1)
"""
AMX_ADVICE = ("On a VM whose CPU flags advertise AMX, llama.cpp's AMX kernels are a known cause; rebuild "
              "llama-cpp-python without them: CMAKE_ARGS=\"-DGGML_NATIVE=OFF -DGGML_AVX512=ON "
              "-DGGML_AVX512_VNNI=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF\" "
              "pip install --force-reinstall --no-cache-dir llama-cpp-python")


def llama_preflight(path: Path, threads: int, kv: str = "auto", script: str | None = None,
                    timeout_s: float = 900.0) -> str | None:
    """Runs llama.cpp once on `path` in a child process (`script`: the code it runs, for tests). None when
    it exits cleanly; else what happened (the signal that killed it, its last error line, or a timeout), so
    that a crash inside llama.cpp ends the benchmark with a message instead of taking this process down."""
    cmd = [sys.executable, "-c", _PREFLIGHT if script is None else script, str(path), str(threads), kv]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return f"llama.cpp did not finish a 64-token evaluation of {path.name} within {timeout_s:.0f} s"
    if done.returncode == 0:
        return None
    if done.returncode < 0:
        try:
            name = signal.Signals(-done.returncode).name
        except ValueError:
            name = f"signal {-done.returncode}"
        return f"llama.cpp was killed by {name} evaluating {path.name}"
    last = next((line for line in reversed(done.stderr.strip().splitlines()) if line.strip()), "")
    return f"llama.cpp failed evaluating {path.name} (exit {done.returncode}): {last[-300:]}"


# ---------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------


@dataclass
class Speed:
    prefill_s: list[float] = field(default_factory=list)
    decode_s: list[float] = field(default_factory=list)
    decode_switches: list[int] = field(default_factory=list)  # context switches during the decode steps
    decode_busy: list[float] = field(default_factory=list)  # busy CPUs during the decode steps
    greedy: list[int] = field(default_factory=list)

    def best_decode(self) -> int:
        return int(np.argmin(self.decode_s))

    def tok_s(self, n_prompt: int, n_decode: int) -> tuple[float, float]:
        return n_prompt / min(self.prefill_s), n_decode / min(self.decode_s)


def time_once(runner: Runner, prompt: Sequence[int], n_decode: int, speed: Speed) -> None:
    t0 = time.perf_counter()
    token = runner.prefill(prompt)
    t1 = time.perf_counter()
    greedy = [token]
    meter = ProcessMeter()
    meter.start()
    for _ in range(n_decode):
        token = runner.step(token)
        greedy.append(token)
    counters = meter.stop()
    speed.prefill_s.append(t1 - t0)
    speed.decode_s.append(counters.wall_s)
    speed.decode_switches.append(counters.switches)
    speed.decode_busy.append(counters.busy_cpus())
    speed.greedy = greedy


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def prompt_tokens(n: int, vocab: int, seed: int) -> list[int]:
    """Random ids among the byte tokens and the one merge (0..256), the "text" part of the vocabulary."""
    return [int(t) for t in np.random.default_rng(seed).integers(0, min(vocab, 257), n)]


# ---------------------------------------------------------------------------------------------
# One model, all measurements
# ---------------------------------------------------------------------------------------------


@dataclass
class SpeedRow:
    threads: int
    strata_prefill: float
    llama_prefill: float
    strata_decode: float
    llama_decode: float
    greedy_agree: int  # leading decode tokens both engines chose alike (of n_decode + 1)
    strata_runs: dict[str, list[float] | list[int]]
    llama_runs: dict[str, list[float] | list[int]]
    # Of the best decode run of each engine:
    strata_switches_per_token: float = 0.0
    llama_switches_per_token: float = 0.0
    strata_busy_cpus: float = 0.0
    llama_busy_cpus: float = 0.0
    read_bandwidth_gbs: float = 0.0  # measured with the same thread count
    bytes_per_token: int = 0  # weight bytes one decode token reads
    # K/V cell bytes one decode step reads on average (machine.kv_bytes_per_token), per engine's cell type
    strata_kv_bytes_per_token: int = 0
    llama_kv_bytes_per_token: int = 0

    def bandwidth_fraction(self, decode_tok_s: float, kv_bytes: int = 0) -> float:
        """(weight bytes + kv_bytes) per token x tok/s / the read bandwidth; kv_bytes = 0 is issue 12's figure
        (weights only)."""
        if self.read_bandwidth_gbs <= 0:
            return 0.0
        return (self.bytes_per_token + kv_bytes) * decode_tok_s / (self.read_bandwidth_gbs * 1e9)


@dataclass
class ModelReport:
    model: str
    path: str
    file_mib: float
    shape: dict[str, Any] | None
    agreement: Agreement
    speed: list[SpeedRow]
    # The K/V cell types the engines ran with ("" in files written before they were recorded).
    strata_kv: str = ""
    llama_kv: str = ""


def compare_model(path: Path, label: str, shape: MoeShape | None, threads: Sequence[int], n_prompt: int,
                  n_decode: int, n_agree: int, repeats: int, seed: int, kv: str,
                  log: Callable[[str], None] = print,
                  bandwidth: Callable[[int], float] | None = None, strata_kv: str = "auto") -> ModelReport:
    """`kv`: llama.cpp's K/V type (auto = f16); `strata_kv`: strata's (Config.kv_type; auto = the engine's).
    `bandwidth(threads)` measures the read bandwidth in GB/s; it runs just before and just after each thread
    count's timed runs, and the larger figure is the floor (load on a shared machine only lowers it)."""
    n_ctx = max(n_prompt + n_decode, n_agree) + 8
    n_ctx = (n_ctx + 255) // 256 * 256
    log(f"{path.name}: logit agreement over {n_agree} positions ...")
    ref = LlamaRunner(path, threads[-1], n_ctx, logits_all=True, kv=kv)
    vocab = ref._vocab
    agree_prompt = prompt_tokens(n_agree, vocab, seed + 1)
    ref_logits = ref.all_logits(agree_prompt)
    del ref
    ours_runner = StrataRunner(path, threads[-1], n_ctx, strata_kv)
    strata_cells = ours_runner.kv_type
    ours = ours_runner.all_logits(agree_prompt)
    del ours_runner
    agreement = logit_agreement(ref_logits, ours)

    prompt = prompt_tokens(n_prompt, vocab, seed + 2)
    bytes_per_token = decode_bytes_per_token(path)
    kv_value_bytes = {"f32": 4, "f16": 2}
    strata_kv_bytes = kv_bytes_per_token(path, n_prompt, n_decode, kv_value_bytes[strata_cells])
    llama_kv_bytes = kv_bytes_per_token(path, n_prompt, n_decode, kv_value_bytes[llama_kv_type(kv)])
    rows = []
    for t in threads:
        log(f"{path.name}: {t} thread(s), prefill {n_prompt} + decode {n_decode}, best of {repeats} ...")
        bw_before = bandwidth(t) if bandwidth else 0.0
        runners: list[Runner] = [StrataRunner(path, t, n_ctx, strata_kv),
                                 LlamaRunner(path, t, n_ctx, False, kv)]
        speeds = [Speed(), Speed()]
        for r in runners:  # warm-up: page the weights in, first-touch the K/V and scratch
            time_once(r, prompt[: min(16, n_prompt)], 2, Speed())
        for _ in range(repeats):
            for r, s in zip(runners, speeds, strict=True):
                time_once(r, prompt, n_decode, s)
        (sp, sd), (lp, ld) = (s.tok_s(n_prompt, n_decode) for s in speeds)
        bs, bl = (s.best_decode() for s in speeds)
        del runners
        bw = max(bw_before, bandwidth(t) if bandwidth else 0.0)
        rows.append(SpeedRow(
            threads=t, strata_prefill=sp, llama_prefill=lp, strata_decode=sd, llama_decode=ld,
            greedy_agree=_common_prefix(speeds[0].greedy, speeds[1].greedy),
            strata_runs={"prefill_s": speeds[0].prefill_s, "decode_s": speeds[0].decode_s,
                         "decode_switches": speeds[0].decode_switches, "decode_busy": speeds[0].decode_busy},
            llama_runs={"prefill_s": speeds[1].prefill_s, "decode_s": speeds[1].decode_s,
                        "decode_switches": speeds[1].decode_switches, "decode_busy": speeds[1].decode_busy},
            strata_switches_per_token=speeds[0].decode_switches[bs] / n_decode,
            llama_switches_per_token=speeds[1].decode_switches[bl] / n_decode,
            strata_busy_cpus=speeds[0].decode_busy[bs], llama_busy_cpus=speeds[1].decode_busy[bl],
            read_bandwidth_gbs=bw, bytes_per_token=bytes_per_token,
            strata_kv_bytes_per_token=strata_kv_bytes, llama_kv_bytes_per_token=llama_kv_bytes,
        ))
    return ModelReport(
        model=label, path=str(path), file_mib=path.stat().st_size / 2**20,
        shape=None if shape is None else {**asdict(shape), "params": shape.params(),
                                          "active_params": shape.active_params()},
        agreement=agreement, speed=rows, strata_kv=strata_cells, llama_kv=llama_kv_type(kv),
    )


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {"platform": platform.platform(), "cpus": os.cpu_count(),
                            "python": sys.version.split()[0], "cpu": cpu_model(), "isa": active_isa(),
                            "llc_bytes": llc_bytes()}
    try:
        info["loadavg"] = list(os.getloadavg())
    except OSError:
        pass
    try:
        import llama_cpp

        info["llama_cpp_python"] = llama_cpp.__version__
        info["llama_cpp_system_info"] = llama_cpp.llama_print_system_info().decode().strip()
    except ImportError:
        pass
    return info


def _model_line(r: ModelReport) -> str:
    cells = f"; K/V cells strata {r.strata_kv}, llama.cpp {r.llama_kv}" if r.strata_kv else ""
    if r.shape is None:
        return f"{r.model}: {r.file_mib:.0f} MiB{cells}"
    s = r.shape
    return (f"{r.model}: d={s['d']}, {s['layers']} layers, {s['experts']} experts top-{s['experts_used']}, "
            f"expert ffn {s['expert_ffn']}, {s['heads']}/{s['kv_heads']} heads x {s['head_dim']}, "
            f"vocab {s['vocab']}; {s['params'] / 1e6:.0f} M params "
            f"({s['active_params'] / 1e6:.0f} M per token), "
            f"{r.file_mib:.0f} MiB{cells}")


AGREE_COLUMNS = ("model", "positions", "max |Δ|", "mean |Δ|", "logit std", "max |Δ| / std", "top-1 agree",
                 "mean KL", "max KL")
SPEED_COLUMNS = ("model", "threads", "prefill strata", "prefill llama.cpp", "ratio", "decode strata",
                 "decode llama.cpp", "ratio", "greedy agree")
FLOOR_COLUMNS = ("model", "threads", "MB/token", "read GB/s", "strata % of bw", "llama.cpp % of bw",
                 "K/V MB/token", "strata % with K/V", "llama.cpp % with K/V", "strata switches/tok",
                 "llama.cpp switches/tok", "strata busy CPUs", "llama.cpp busy CPUs")
SCALING_COLUMNS = ("model", "threads", "decode strata", "decode llama.cpp", "read bandwidth",
                   "prefill strata", "prefill llama.cpp")


def agreement_rows(reports: Sequence[ModelReport]) -> list[list[str]]:
    return [[r.model, str(a.positions), f"{a.max_abs_diff:.3g}", f"{a.mean_abs_diff:.2g}",
             f"{a.logit_std:.3g}", f"{a.max_abs_diff_rel:.3g}", f"{100 * a.top1_agreement:.1f}%",
             f"{a.mean_kl:.2g}", f"{a.max_kl:.2g}"] for r in reports for a in [r.agreement]]


def _rate(x: float) -> str:
    return f"{x:.1f}" if x < 1000 else f"{x:.0f}"


def speed_rows(reports: Sequence[ModelReport], n_decode: int) -> list[list[str]]:
    return [[r.model, str(s.threads), _rate(s.strata_prefill), _rate(s.llama_prefill),
             f"{s.strata_prefill / s.llama_prefill:.2f}", _rate(s.strata_decode), _rate(s.llama_decode),
             f"{s.strata_decode / s.llama_decode:.2f}", f"{s.greedy_agree}/{n_decode + 1}"]
            for r in reports for s in r.speed]


def _kv_mb(strata_bytes: int, llama_bytes: int) -> str:
    a, b = f"{strata_bytes / 1e6:.1f}", f"{llama_bytes / 1e6:.1f}"
    return a if a == b else f"{a} / {b}"


def floor_rows(reports: Sequence[ModelReport]) -> list[list[str]]:
    return [[r.model, str(s.threads), f"{s.bytes_per_token / 1e6:.0f}", f"{s.read_bandwidth_gbs:.1f}",
             f"{100 * s.bandwidth_fraction(s.strata_decode):.0f}%",
             f"{100 * s.bandwidth_fraction(s.llama_decode):.0f}%",
             _kv_mb(s.strata_kv_bytes_per_token, s.llama_kv_bytes_per_token),
             f"{100 * s.bandwidth_fraction(s.strata_decode, s.strata_kv_bytes_per_token):.0f}%",
             f"{100 * s.bandwidth_fraction(s.llama_decode, s.llama_kv_bytes_per_token):.0f}%",
             f"{s.strata_switches_per_token:.1f}", f"{s.llama_switches_per_token:.1f}",
             f"{s.strata_busy_cpus:.2f}", f"{s.llama_busy_cpus:.2f}"]
            for r in reports for s in r.speed]


def _times(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if a > 0 and b > 0 else "-"


def scaling_rows(reports: Sequence[ModelReport]) -> list[list[str]]:
    """Each model's rows above one thread as multiples of its one-thread row (no rows without one): what a
    second thread buys each engine, next to what it buys a plain read of memory (the most a memory-bound
    decode can gain)."""
    rows = []
    for r in reports:
        one = next((s for s in r.speed if s.threads == 1), None)
        if one is None:
            continue
        rows += [[r.model, str(s.threads), _times(s.strata_decode, one.strata_decode),
                  _times(s.llama_decode, one.llama_decode),
                  _times(s.read_bandwidth_gbs, one.read_bandwidth_gbs),
                  _times(s.strata_prefill, one.strata_prefill), _times(s.llama_prefill, one.llama_prefill)]
                 for s in r.speed if s.threads > 1]
    return rows


def plain_table(columns: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    widths = [max(len(columns[i]), *(len(r[i]) for r in rows)) for i in range(len(columns))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return "\n".join([line(columns), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    align = ["---" if i < left else "---:" for i in range(len(columns))]
    body = [[c.replace("|", "\\|") for c in r] for r in [list(columns), *rows]]  # "max |Δ|" in a cell
    return "\n".join("| " + " | ".join(r) + " |" for r in [body[0], align, *body[1:]])


def render(reports: Sequence[ModelReport], n_prompt: int, n_decode: int, markdown: bool) -> str:
    table = markdown_table if markdown else plain_table
    parts = [*(_model_line(r) for r in reports), "",
             "logit agreement (reference: llama.cpp; KL(p_llama.cpp || p_strata) in nats)",
             table(AGREE_COLUMNS, agreement_rows(reports)), "",
             f"speed, tok/s (prefill: {n_prompt} tokens in one call; decode: {n_decode} greedy steps; "
             "best run; ratio = strata / llama.cpp)",
             table(SPEED_COLUMNS, speed_rows(reports, n_decode), left=2), "",
             "decode against the bandwidth floor (weight bytes per token x tok/s / measured read bandwidth,"
             " same threads; 'with K/V' adds the K/V cells a step reads, strata / llama.cpp where their cell"
             " types differ) and the pool's behaviour (context switches per token, busy CPUs),"
             " best decode run",
             table(FLOOR_COLUMNS, floor_rows(reports), left=2)]
    scaling = scaling_rows(reports)
    if scaling:
        parts += ["", "thread scaling: each engine's tok/s at T threads over its tok/s at one thread, and "
                  "the same for the measured read bandwidth (what a memory-bound decode can gain)",
                  table(SCALING_COLUMNS, scaling, left=2)]
    return "\n".join(parts)


def load_report(path: Path) -> tuple[dict[str, Any], list[ModelReport]]:
    """A ``--json`` file of an earlier run: its settings (with the machine's CPU as "cpu") and model reports
    (a file written before a field existed gets that field's default)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    speed_fields = {f.name for f in fields(SpeedRow)}
    reports = []
    for m in doc["models"]:
        reports.append(ModelReport(
            model=m["model"], path=m["path"], file_mib=m["file_mib"], shape=m["shape"],
            agreement=Agreement(**m["agreement"]),
            speed=[SpeedRow(**{k: v for k, v in row.items() if k in speed_fields}) for row in m["speed"]],
            strata_kv=str(m.get("strata_kv", "")), llama_kv=str(m.get("llama_kv", ""))))
    return {**doc.get("settings", {}), "cpu": doc.get("machine", {}).get("cpu", "?")}, reports


def plot(reports: Sequence[ModelReport], path: Path, title: str,
         prompts: Sequence[int] | None = None) -> None:
    """Decode and prefill tok/s of both engines and decode against the bandwidth floor, one group of bars
    per (model, prompt, threads). `prompts[i]` is report i's prompt length (labels only)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, rows = [], []
    for i, r in enumerate(reports):
        for s in r.speed:
            prompt = f", {prompts[i]} tok" if prompts else ""
            labels.append(f"{r.model}{prompt}, {s.threads}T")
            rows.append(s)
    x = np.arange(len(rows))
    w = 0.38
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8 + 0.1 * len(rows)))
    panels = [("decode tok/s", [s.strata_decode for s in rows], [s.llama_decode for s in rows]),
              ("prefill tok/s", [s.strata_prefill for s in rows], [s.llama_prefill for s in rows])]
    for ax, (name, ours, theirs) in zip(axes[:2], panels, strict=True):
        ax.barh(x - w / 2, ours, w, label="strata")
        ax.barh(x + w / 2, theirs, w, label="llama.cpp")
        for xi, a, b in zip(x, ours, theirs, strict=True):
            ax.text(a, xi - w / 2, f" {a / b:.2f}x", va="center", fontsize=6)
        ax.set_xlabel(name)
    ax = axes[2]
    ours_w = [100 * s.bandwidth_fraction(s.strata_decode) for s in rows]
    ours_kv = [100 * s.bandwidth_fraction(s.strata_decode, s.strata_kv_bytes_per_token) for s in rows]
    ax.barh(x - w / 2, ours_w, w, label="strata, weights")
    ax.barh(x - w / 2, [b - a for a, b in zip(ours_w, ours_kv, strict=True)], w, left=ours_w,
            label="strata, + K/V", alpha=0.5)
    ax.barh(x + w / 2, [100 * s.bandwidth_fraction(s.llama_decode) for s in rows], w,
            label="llama.cpp, weights")
    ax.axvline(85, color="grey", linestyle=":", linewidth=1)
    ax.set_xlim(0, max(105.0, *ours_kv) * 1.02)
    ax.set_xlabel("decode: % of the measured read bandwidth")
    for ax in axes:
        ax.set_yticks(x)
        ax.set_yticklabels(labels if ax is axes[0] else [], fontsize=7)
        ax.invert_yaxis()
        ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, frameon=False)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def _int_list(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", type=Path, action="append", default=None, metavar="GGUF",
                   help="compare this qwen3moe GGUF (repeatable) instead of building random ones")
    p.add_argument("--models", default=DEFAULT_MODELS, metavar="NAME:TYPE,...",
                   help=f"random models to build and compare, NAME one of {', '.join(SHAPES)}, TYPE a weight "
                        f"type (default --weight-type); default {DEFAULT_MODELS}")
    workdir = Path(os.environ.get("TMPDIR", "/tmp")) / "strata-llama-bench"
    p.add_argument("--workdir", type=Path, default=workdir,
                   help="where built GGUFs are kept (reused when present)")
    p.add_argument("--weight-type", default="Q8_0", help="weight type of a --models entry without one (Q8_0)")
    p.add_argument("--threads", type=_int_list, default=[1, 2], metavar="T1,T2", help="thread counts (1,2)")
    p.add_argument("--prompt", type=int, default=128, help="prefill tokens (128)")
    p.add_argument("--decode", type=int, default=32, help="decode steps (32)")
    p.add_argument("--agree-tokens", type=int, default=64, help="positions compared for logit agreement (64)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per engine; the best counts (3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kv", choices=("auto", "f32", "f16"), default="auto",
                   help="K/V cell type of both engines (strata's Config.kv_type, llama.cpp's type_k / "
                        "type_v); auto = each engine's default: strata's auto (f16 for qwen3moe on x86-64, "
                        "else f32), llama.cpp's f16")
    p.add_argument("--llama-kv", choices=("f32", "f16"), default=None,
                   help="llama.cpp's K/V cache type alone (default: --kv)")
    p.add_argument("--markdown", action="store_true", help="print the tables as markdown")
    p.add_argument("--json", type=Path, default=None, metavar="OUT", help="write the full report as JSON")
    p.add_argument("--plot", type=Path, default=None, metavar="PNG",
                   help="draw decode and prefill tok/s and the bandwidth floor of both engines (matplotlib)")
    p.add_argument("--title", default=None, help="the plot's title (default: the CPU)")
    p.add_argument("--from-json", type=Path, action="append", default=None, metavar="JSON",
                   help="measure nothing: print the tables (and --plot) of earlier --json files (repeatable)")


def replay(args: argparse.Namespace) -> int:
    """--from-json: the tables and plot of earlier runs, nothing measured."""
    reports: list[ModelReport] = []
    runs: list[tuple[int, int]] = []  # each report's (prompt, decode steps)
    cpus: list[str] = []
    for path in args.from_json:
        try:
            settings, rs = load_report(path)
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"error: {path}: not a bench llama --json file ({e})", file=sys.stderr)
            return 1
        reports += rs
        run_of = (int(settings.get("prompt", args.prompt)), int(settings.get("decode", args.decode)))
        runs += [run_of] * len(rs)
        cpus.append(str(settings["cpu"]))
    for prompt, decode in sorted(set(runs)):
        print(render([r for r, k in zip(reports, runs, strict=True) if k == (prompt, decode)], prompt, decode,
                     args.markdown))
    if args.plot is not None:
        title = args.title or f"strata vs llama.cpp (bench llama), {', '.join(dict.fromkeys(cpus))}"
        plot(reports, args.plot, title, [p for p, _ in runs])
    return 0


def run(args: argparse.Namespace) -> int:
    if args.from_json:
        return replay(args)
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        print("error: this benchmark needs llama-cpp-python (pip install llama-cpp-python)", file=sys.stderr)
        return 1
    if min(args.prompt, args.decode, args.agree_tokens, args.repeats) < 1:
        print("error: --prompt, --decode, --agree-tokens and --repeats must be >= 1", file=sys.stderr)
        return 2
    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    info = machine_info()
    llc = int(info["llc_bytes"])
    models: list[tuple[Path, str, MoeShape | None]] = []
    if args.model:
        for path in args.model:
            if not path.is_file():
                print(f"error: {path}: no such file", file=sys.stderr)
                return 1
            models.append((path, path.stem, None))
    else:
        entries = []
        for entry in (s.strip() for s in args.models.split(",") if s.strip()):
            name, _, wtype = entry.partition(":")
            wtype = (wtype or args.weight_type).upper()
            if name not in SHAPES:
                print(f"error: unknown model {name!r}; choose from {', '.join(SHAPES)}", file=sys.stderr)
                return 2
            if wtype not in WEIGHT_TYPES and wtype not in LLAMA_QUANTIZED:
                print(f"error: unknown weight type {wtype!r}; choose from "
                      f"{', '.join([*WEIGHT_TYPES, *LLAMA_QUANTIZED])}", file=sys.stderr)
                return 2
            entries.append((name, wtype))
        for name, wtype in entries:
            shape = SHAPES[name]
            path = cached_gguf(shape, args.workdir, wtype, args.seed, log)
            models.append((path, f"{name} {wtype}", shape))
            too_small = name == "small" and llc > 0 and path.stat().st_size < LLC_FACTOR * llc
            if too_small and ("medium", wtype) not in entries:
                log(f"{path.name} is < {LLC_FACTOR}x the {llc >> 20} MiB last-level cache: "
                    f"adding medium {wtype}")
                medium = cached_gguf(MEDIUM, args.workdir, wtype, args.seed, log)
                models.append((medium, f"medium {wtype}", MEDIUM))
    # llama.cpp first runs each model in a child process: a crash inside it (e.g. its AMX kernels on a VM
    # that advertises AMX) is reported here rather than killing the benchmark without a word.
    for path, _, _ in models:
        log(f"{path.name}: llama.cpp in a child process first ...")
        failure = llama_preflight(path, max(args.threads), args.llama_kv or args.kv)
        if failure is not None:
            print(f"error: {failure}; nothing was measured. {AMX_ADVICE}", file=sys.stderr)
            return 1
    log(f"measuring the read bandwidth at {', '.join(map(str, args.threads))} thread(s) ...")
    bandwidth = {t: read_bandwidth_gbs(t, llc) for t in args.threads}

    def measure(t: int) -> float:  # every measurement also raises the machine-wide best
        gbs = read_bandwidth_gbs(t, llc)
        bandwidth[t] = max(bandwidth.get(t, 0.0), gbs)
        return gbs

    reports = [compare_model(path, label, shape, args.threads, args.prompt, args.decode, args.agree_tokens,
                             args.repeats, args.seed, args.llama_kv or args.kv, log, measure, args.kv)
               for path, label, shape in models]
    info["read_bandwidth_gbs"] = bandwidth
    info_after = machine_info()
    bw = ", ".join(f"{g:.1f} GB/s at {t} thread(s)" for t, g in bandwidth.items())  # best measured
    print(f"machine: {info['cpu']}, {info['cpus']} CPUs, ISA path {info['isa']}, last-level cache "
          f"{llc >> 20} MiB, read bandwidth {bw}; load average before {info.get('loadavg', ['?'])[0]}, after "
          f"{info_after.get('loadavg', ['?'])[0]}; llama-cpp-python {info.get('llama_cpp_python')}, "
          f"K/V asked: strata {args.kv}, llama.cpp {args.llama_kv or args.kv} (used: on each model's line)")
    for path, label, _ in models:
        size = path.stat().st_size
        if llc > 0 and size < LLC_FACTOR * llc:
            print(f"note: {label} ({size >> 20} MiB) is < {LLC_FACTOR}x the last-level cache: "
                  "its decode measures the cache, not memory")
    print(render(reports, args.prompt, args.decode, args.markdown))
    if args.json is not None:
        doc = {
            "machine": info, "loadavg_after": info_after.get("loadavg"),
            "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
                         if k not in ("func", "version", "command", "bench_tool") and not callable(v)},
            "models": [asdict(r) for r in reports],
        }
        args.json.write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
    if args.plot is not None:
        plot(reports, args.plot, args.title or f"strata vs llama.cpp (bench llama), {info['cpu']}",
             [args.prompt] * len(reports))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    add_arguments(parser)
    return run(parser.parse_args(argv))


def register(tools: Any) -> None:
    """``strata bench llama`` (see strata.cli.bench_cmd.BENCH_TOOLS)."""
    p = tools.add_parser(
        "llama",
        help="strata vs llama.cpp (llama-cpp-python) on the same qwen3moe GGUF",
        description=(__doc__ or "").split("\n\n")[0] + " See docs/benchmarks.md.",
    )
    add_arguments(p)
    p.set_defaults(func=run)
