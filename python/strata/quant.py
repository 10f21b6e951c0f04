"""Quantized block formats (byte-compatible with ggml) and the CPU kernels over them.

Formats with dequantize and dot kernels: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL, Q2_K,
Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M. Quantizers: F32,
F16, BF16, Q8_0, Q5_0, Q5_1, Q4_0 with ``method="ggml"`` (ggml's reference rule, byte-identical to
``gguf.quants.quantize``) and Q4_0 with ``method="lloyd"`` (a per-block Lloyd fit of the scale,
never worse than the ggml rule; SPEC R-11). See docs/quantization.md.

Quantized data is a ``uint8`` array whose last axis holds one row's blocks, as ``gguf`` stores it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from strata import _strata

_q = _strata.quant

Method = Literal["ggml", "lloyd"]


def types() -> list[str]:
    """Names of the formats with dequantize and dot kernels."""
    return list(_q.types())


def row_bytes(type_name: str, n: int) -> int:
    """Bytes of one row of ``n`` elements (``n`` must be a multiple of the type's block)."""
    return int(_q.row_bytes(type_name, n))


def block_size(type_name: str) -> int:
    return int(_q.block_size(type_name))


def activation_type(type_name: str) -> str:
    """The form activations are converted to for this weight type's dots: F32, Q8_0 or Q8_K."""
    return str(_q.activation_type(type_name))


def has_quantizer(type_name: str, method: Method = "ggml") -> bool:
    return bool(_q.has_quantizer(type_name, method))


def quantize(array: npt.ArrayLike, type_name: str, method: Method = "ggml") -> npt.NDArray[np.uint8]:
    """Quantize a float array along its last axis; returns ``(..., row_bytes)`` uint8."""
    data = np.ascontiguousarray(array, dtype=np.float32)
    return np.asarray(_q.quantize(data, type_name, method))


def _as_bytes(data: npt.ArrayLike | bytes) -> npt.NDArray[np.uint8]:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return np.frombuffer(data, dtype=np.uint8)
    arr = np.asarray(data)
    if arr.dtype != np.uint8:
        raise _strata.InvalidArgument(f"quantized data must be uint8 bytes, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr)


def dequantize(data: npt.ArrayLike | bytes, type_name: str, shape: Sequence[int]) -> npt.NDArray[np.float32]:
    """Decode quantized bytes to float32 of ``shape`` (bitwise equal to ``gguf.quants.dequantize``)."""
    return np.asarray(_q.dequantize(_as_bytes(data), type_name, [int(d) for d in shape]))


def dot(row: npt.ArrayLike | bytes, type_name: str, x: npt.ArrayLike) -> float:
    """One quantized row times ``x`` with the active ISA's kernel (exactly a GEMV row)."""
    return float(_q.dot(_as_bytes(row), type_name, np.ascontiguousarray(x, dtype=np.float32)))


def gemv(
    weights: npt.ArrayLike | bytes,
    type_name: str,
    shape: tuple[int, int],
    x: npt.ArrayLike,
    *,
    threaded: bool = True,
) -> npt.NDArray[np.float32]:
    """``y = W @ x`` for W of ``shape`` (rows, cols) in ``type_name``; ``x`` may be (cols,) or (nx, cols)."""
    rows, cols = (int(d) for d in shape)
    xs = np.ascontiguousarray(x, dtype=np.float32)
    return np.asarray(_q.gemm(_as_bytes(weights), type_name, rows, cols, xs, threaded))


def activation_values(x: npt.ArrayLike, type_name: str) -> npt.NDArray[np.float32]:
    """The activation values the kernels of ``type_name`` actually multiply with (q8 form decoded)."""
    return np.asarray(_q.activation_values(np.ascontiguousarray(x, dtype=np.float32), type_name))


def read_bandwidth(nbytes: int, threads: int, reps: int = 3) -> float:
    """This machine's streaming read bandwidth in GB/s (best of ``reps`` passes over ``nbytes``)."""
    return float(_q.read_bandwidth(int(nbytes), int(threads), int(reps)))


__all__ = [
    "Method",
    "activation_type",
    "activation_values",
    "block_size",
    "dequantize",
    "dot",
    "gemv",
    "has_quantizer",
    "quantize",
    "read_bandwidth",
    "row_bytes",
    "types",
]
