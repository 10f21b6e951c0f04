"""Simple round-to-nearest encoders for Q3_K, Q4_K, Q5_K and Q6_K, used by the tests to build
K-quant mixes of tiny models (gguf-py can decode these formats but not write them).

They are not llama.cpp's quantizers (no error-weighted scale search): per group a min/max or
absmax scale, the group scales quantized against one fp16 super-block scale, then each value
rounded to the nearest level. Their output is decoded by ``gguf.quants.dequantize`` in the tests,
so a layout mistake here shows as a large round-trip error, not as a silent pass.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

QK_K = 256
F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]


def _fp16(v: F32) -> tuple[U8, F32]:
    """fp16 bytes of v (B,) and the float32 value they decode to."""
    h = v.astype(np.float16)
    return h.view(np.uint8).reshape(-1, 2), h.astype(np.float32)


def _safe_div(a: F32, b: F32) -> F32:
    out = np.zeros(np.broadcast(a, b).shape, dtype=np.float32)
    np.divide(a, b, out=out, where=b != 0)
    return out


def _pack_k4_scales(sc: U8, m: U8) -> U8:
    """The 12 scale bytes of Q4_K / Q5_K from 8 six-bit scales and mins per block (B, 8)."""
    s = np.zeros((sc.shape[0], 12), dtype=np.uint8)
    s[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    s[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    s[:, 8:12] = (sc[:, 4:8] & 0xF) | ((m[:, 4:8] & 0xF) << 4)
    return s


def _affine(x: F32, nmax: int) -> tuple[U8, U8, U8, U8, U8]:
    """(d bytes, dmin bytes, scales (B,8), mins (B,8), q (B,256)) for x = d·sc·q − dmin·m."""
    g = x.reshape(-1, 8, 32)
    lo = np.minimum(g.min(axis=2), 0.0)
    scale = (g.max(axis=2) - lo) / nmax
    d_b, d = _fp16(scale.max(axis=1) / 63)
    dm_b, dmin = _fp16((-lo).max(axis=1) / 63)
    sc = np.clip(np.rint(_safe_div(scale, d[:, None])), 0, 63).astype(np.uint8)
    m = np.clip(np.rint(_safe_div(-lo, dmin[:, None])), 0, 63).astype(np.uint8)
    eff = d[:, None] * sc.astype(np.float32)
    shifted = g + (dmin[:, None] * m.astype(np.float32))[:, :, None]
    q = np.clip(np.rint(_safe_div(shifted, eff[:, :, None])), 0, nmax).astype(np.uint8)
    return d_b, dm_b, sc, m, q.reshape(-1, QK_K)


def _nibbles(q: U8) -> U8:
    """Q4_K's qs: byte 32k + l holds value 64k + l (low nibble) and 64k + 32 + l (high)."""
    q4 = (q & 0xF).reshape(-1, 4, 2, 32)
    return (q4[:, :, 0, :] | (q4[:, :, 1, :] << 4)).reshape(-1, 128)


def quantize_q4_k(x: F32) -> U8:
    d_b, dm_b, sc, m, q = _affine(x, 15)
    return np.concatenate([d_b, dm_b, _pack_k4_scales(sc, m), _nibbles(q)], axis=1)


def quantize_q5_k(x: F32) -> U8:
    d_b, dm_b, sc, m, q = _affine(x, 31)
    high = (q >> 4).reshape(-1, 8, 32)  # bit g of qh[l] is bit 4 of value 32g + l
    qh = np.zeros((q.shape[0], 32), dtype=np.uint8)
    for g in range(8):
        qh |= high[:, g, :] << g
    return np.concatenate([d_b, dm_b, _pack_k4_scales(sc, m), qh, _nibbles(q)], axis=1)


I32 = npt.NDArray[np.int32]


def _symmetric(x: F32, levels: int, scale_max: int) -> tuple[U8, F32, I32, I32]:
    """(d bytes, d, group scales (B,16), q (B,256)) for x = d·sc·q, q in [−levels, levels − 1]."""
    g = x.reshape(-1, 16, 16)
    amax = np.abs(g).max(axis=2)
    # The group scale amax / c for the c (of a few) with the least squared rounding error.
    best_err = np.full(amax.shape, np.inf, dtype=np.float32)
    scale = amax / levels
    for c in np.linspace(levels - 1, levels + 0.5, 7, dtype=np.float32):
        trial = amax / c
        q = np.clip(np.rint(_safe_div(g, trial[:, :, None])), -levels, levels - 1)
        err = ((g - q * trial[:, :, None]) ** 2).sum(axis=2)
        scale = np.where(err < best_err, trial, scale)
        best_err = np.minimum(err, best_err)
    d_b, d = _fp16(scale.max(axis=1) / scale_max)
    sc = np.clip(np.rint(_safe_div(scale, d[:, None])), -scale_max - 1, scale_max).astype(np.int32)
    eff = d[:, None] * sc.astype(np.float32)
    q = np.clip(np.rint(_safe_div(g, eff[:, :, None])), -levels, levels - 1).astype(np.int32)
    return d_b, d, sc, q.reshape(-1, QK_K)


def quantize_q6_k(x: F32) -> U8:
    d_b, _, sc, q = _symmetric(x, 32, 127)
    u = (q + 32).astype(np.uint8).reshape(-1, 2, 4, 32)  # [half h, quarter k, l]: value 128h + 32k + l
    lo, hi = u & 0xF, u >> 4
    ql = np.concatenate([lo[:, :, 0] | lo[:, :, 2] << 4, lo[:, :, 1] | lo[:, :, 3] << 4], axis=2)
    qh = hi[:, :, 0] | hi[:, :, 1] << 2 | hi[:, :, 2] << 4 | hi[:, :, 3] << 6
    scales = sc.astype(np.int8).view(np.uint8)
    return np.concatenate([ql.reshape(-1, 128), qh.reshape(-1, 64), scales, d_b], axis=1)


def quantize_q3_k(x: F32) -> U8:
    d_b, _, sc, q = _symmetric(x, 4, 31)
    u = (q + 4).astype(np.uint8).reshape(-1, 2, 4, 32)  # [h, s, l] = value 128h + 32s + l
    qs = np.zeros((u.shape[0], 2, 32), dtype=np.uint8)
    hmask = np.zeros((u.shape[0], 32), dtype=np.uint8)
    for h in range(2):
        for s in range(4):
            qs[:, h] |= (u[:, h, s] & 3) << (2 * s)
            hmask |= (u[:, h, s] >> 2) << (4 * h + s)
    v = (sc + 32).astype(np.uint8)  # 6-bit stored scales
    scales = np.zeros((u.shape[0], 12), dtype=np.uint8)
    for j in range(16):
        scales[:, j % 8] |= (v[:, j] & 0xF) << (4 * (j // 8))
        scales[:, 8 + j % 4] |= (v[:, j] >> 4) << (2 * (j // 4))
    return np.concatenate([hmask, qs.reshape(-1, 64), scales, d_b], axis=1)


ENCODERS = {"Q3_K": quantize_q3_k, "Q4_K": quantize_q4_k, "Q5_K": quantize_q5_k, "Q6_K": quantize_q6_k}


def quantize(array: npt.ArrayLike, type_name: str) -> U8:
    """``array`` (..., n) with n a multiple of 256 -> (..., row bytes) in ``type_name``."""
    x = np.ascontiguousarray(array, dtype=np.float32)
    if x.shape[-1] % QK_K:
        raise ValueError(f"rows of {x.shape[-1]} are not a multiple of {QK_K}")
    blocks = ENCODERS[type_name](x.reshape(-1, QK_K))
    return np.ascontiguousarray(blocks.reshape(*x.shape[:-1], -1))
