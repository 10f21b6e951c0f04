"""Dot and GEMV kernels on every ISA this machine runs, against float64 dots of gguf's decoding.

Per format, with W decoded by ``gguf.quants.dequantize`` and a = the activation values the kernel
multiplies (``quant.activation_values``: x itself for F32/F16/BF16, its Q8_0 or Q8_K form
otherwise), on every ISA (forced with ``strata._strata.force_isa``):

1. Kernel arithmetic: ``|dot − Σ w·a| ≤ 2e-5 · Σ|w·a|``. Block integer sums are exact; only the
   f32 accumulation order differs.
2. Against the exact activation x (the stated tolerance; the q8 rounding of x dominates):
   ``|dot − Σ w·x| ≤ Σ|w_j|·e_j + 2e-5 · Σ|w·x|`` with e_j the worst-case activation rounding:
     F32 / F16 / BF16: e_j = 0
     Q8_0 activations (Q4_0, Q5_0, Q5_1, Q8_0, IQ4_NL): e_j = amax_32(j)/254 + 2^-11·(|x_j| + amax_32(j)/254)
       (half a step of d = amax/127, plus d's rounding to fp16)
     Q8_K activations (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
       IQ1_S, IQ1_M):
       e_j = amax_256(j)/254
   (each with a 1e-5 relative and 2^-22·|x_j| allowance for f32 rounding at exact ties)
   and, as a relative figure, ``|dot − Σ w·x| / Σ|w·x|`` stays below 2e-2 (Q8_0 form), 3e-2 (Q8_K
   form) and 1e-5 (float formats) on these Gaussian inputs.
3. GEMV rows are bitwise equal to single dots; a batch of activation rows equals one GEMV per row.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import quants as gq

import strata
from strata import _strata, quant
from test_quant_parity import random_blocks

TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q5_0", "Q4_K", "Q6_K", "Q2_K", "IQ4_XS",
         "Q3_K", "Q5_K", "IQ2_XS", "IQ3_XXS", "Q5_1", "IQ4_NL", "IQ2_XXS", "IQ3_S", "IQ2_S", "IQ1_S", "IQ1_M"]
REL_TOL = {"F32": 1e-5, "Q8_0": 2e-2, "Q8_K": 3e-2}


@pytest.fixture(params=list(_strata.supported_isas()))
def isa(request: pytest.FixtureRequest) -> Iterator[str]:
    saved = _strata.active_isa()
    _strata.force_isa(request.param)
    yield str(request.param)
    _strata.force_isa(saved)


def decode(data: npt.NDArray[np.uint8], type_name: str, rows: int, cols: int) -> npt.NDArray[np.float64]:
    if type_name == "F32":
        return data.view(np.float32).reshape(rows, cols).astype(np.float64)
    if type_name == "F16":
        return data.view(np.float16).reshape(rows, cols).astype(np.float64)
    return np.asarray(gq.dequantize(data, QT[type_name])).reshape(rows, cols).astype(np.float64)


def activation_error_bound(x: npt.NDArray[np.float32], act: str) -> npt.NDArray[np.float64]:
    """Worst-case |a_j − x_j| of the activation form (see the module docstring)."""
    xd = x.astype(np.float64)
    if act == "F32":
        return np.zeros_like(xd)
    block = 32 if act == "Q8_0" else 256
    amax = np.repeat(np.abs(xd).reshape(-1, block).max(axis=1), block)
    half_step = amax / 254.0
    # (1 + 1e-5) and 2^-22·|x| cover the f32 rounding of the scale and of d·q at exact ties.
    if act == "Q8_0":
        return half_step * (1 + 1e-5) + 2.0**-11 * (np.abs(xd) + half_step) + 2.0**-22 * np.abs(xd)
    return half_step * (1 + 1e-5) + 2.0**-22 * np.abs(xd)


@pytest.mark.parametrize("type_name", TYPES)
def test_dot_matches_float64_reference(type_name: str, isa: str) -> None:
    rng = np.random.default_rng(sum(map(ord, type_name + isa)))
    act = quant.activation_type(type_name)
    for cols in [256, 512, 2048] if quant.block_size(type_name) == 256 else [32, 96, 256, 352, 800, 2048]:
        rows = 4
        data = random_blocks(type_name, rows, cols, rng)
        w = decode(data, type_name, rows, cols)
        x = rng.standard_normal(cols).astype(np.float32)
        a = quant.activation_values(x, type_name).astype(np.float64)
        bound = activation_error_bound(x, act)
        assert (np.abs(a - x) <= bound + 1e-30).all()
        for r in range(rows):
            got = quant.dot(data[r], type_name, x)
            exact_a = float(w[r] @ a)
            assert abs(got - exact_a) <= 2e-5 * float(np.abs(w[r] * a).sum()) + 1e-30, (cols, r)
            exact_x = float(w[r] @ x.astype(np.float64))
            scale_x = float(np.abs(w[r] * x).sum())
            assert abs(got - exact_x) <= float(np.abs(w[r]) @ bound) + 2e-5 * scale_x, (cols, r)
            assert abs(got - exact_x) <= REL_TOL[act] * scale_x, (cols, r)


@pytest.mark.parametrize("type_name", TYPES)
def test_gemv_rows_equal_single_dots(type_name: str, isa: str) -> None:
    rng = np.random.default_rng(7)
    cols = 512
    rows = 300
    data = random_blocks(type_name, rows, cols, rng)
    x = rng.standard_normal(cols).astype(np.float32)
    y = quant.gemv(data, type_name, (rows, cols), x)
    y1 = quant.gemv(data, type_name, (rows, cols), x, threaded=False)
    assert y.shape == (rows,) and y.dtype == np.float32
    assert np.array_equal(y.view(np.uint32), y1.view(np.uint32))
    dots = np.array([quant.dot(data[r], type_name, x) for r in range(rows)], dtype=np.float32)
    assert np.array_equal(y.view(np.uint32), dots.view(np.uint32))
    xs = rng.standard_normal((3, cols)).astype(np.float32)
    ys = quant.gemv(data, type_name, (rows, cols), xs)
    assert ys.shape == (3, rows)
    for i in range(3):
        yi = quant.gemv(data, type_name, (rows, cols), xs[i])
        assert np.array_equal(ys[i].view(np.uint32), yi.view(np.uint32))


def test_quantized_gemv_tracks_float_gemv() -> None:
    """End to end: quantize a Gaussian matrix, multiply, compare with the f32 product (RMS error)."""
    rng = np.random.default_rng(9)
    w = rng.standard_normal((64, 1024)).astype(np.float32)
    x = rng.standard_normal(1024).astype(np.float32)
    ref = w.astype(np.float64) @ x.astype(np.float64)
    rms_ref = float(np.sqrt((ref**2).mean()))
    # Relative RMS error of the output: 4-bit blocks ~1e-1, 5-bit ~5e-2, 8-bit ~1e-2.
    for type_name, method, tol in [
        ("Q8_0", "ggml", 0.015),
        ("Q5_0", "ggml", 0.06),
        ("Q4_0", "ggml", 0.12),
        ("Q4_0", "lloyd", 0.12),
        ("F16", "ggml", 1e-3),
        ("BF16", "ggml", 6e-3),
    ]:
        q = quant.quantize(w, type_name, method)  # type: ignore[arg-type]
        y = quant.gemv(q, type_name, w.shape, x)
        rel = float(np.sqrt(((y - ref) ** 2).mean())) / rms_ref
        assert rel < tol, (type_name, method, rel)


def test_gemv_rejects_bad_arguments() -> None:
    rng = np.random.default_rng(1)
    data = random_blocks("Q4_0", 4, 64, rng)
    x = np.ones(64, dtype=np.float32)
    with pytest.raises(strata.InvalidArgument, match="columns"):
        quant.gemv(data, "Q4_0", (4, 64), np.ones(32, dtype=np.float32))
    with pytest.raises(strata.InvalidArgument, match="bytes, expected"):
        quant.gemv(data, "Q4_0", (5, 64), x)
    with pytest.raises(strata.InvalidArgument, match="not a multiple"):
        quant.gemv(data, "Q4_0", (8, 48), np.ones(48, dtype=np.float32))
    with pytest.raises(strata.InvalidArgument, match="one-dimensional"):
        quant.dot(data[0], "Q4_0", np.ones((1, 64), dtype=np.float32))
    with pytest.raises(strata.InvalidArgument, match="unknown ISA"):
        _strata.force_isa("avx9000")
