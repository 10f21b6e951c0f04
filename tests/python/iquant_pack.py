"""Simple encoders for IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M and IQ4_NL, used by the tests to
build IQ-expert models (gguf-py decodes these formats but cannot write them). The codebooks come from
``gguf.quants`` (not from strata), so a file built here is decoded by two independent implementations.

Not llama.cpp's quantizers (no importance weights, no joint scale/grid search): per block the
group scales are fit to the values' maxima, every run of values takes the signs of its elements
(IQ2_XXS / IQ2_XS / IQ3_XXS: the smallest one flipped when their even-parity rule requires it;
IQ2_S and IQ3_S store 8 free sign bits per 8 values) and the grid entry nearest to its magnitudes.
IQ1_S / IQ1_M: the scales are fit to the RMS of their group (the ternary grid's level sits near
1.2 RMS for Gaussian values), and each run takes the grid entry nearest to x / scale − delta for
both delta signs, keeping the sign with the smaller error (per group of 32 for IQ1_S, per run of 8
for IQ1_M).
IQ4_NL: per block of 32, each value takes the codebook entry nearest to x / d with d = (signed value
of largest magnitude) / 127, then d is refit by least squares.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from gguf import quants as gq

QK_K = 256
F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]
IQ1_DELTA = 0.125  # gguf.quants.IQ1_S.delta: grid value g stands for g ± IQ1_DELTA
IQ1_LEVEL = 1.2  # IQ1 scale / RMS of its values (measured best for Gaussian rows: 1.1 to 1.3 within 1%)


def _grid(cls: type) -> F32:
    cls.init_grid()  # type: ignore[attr-defined]
    g = cls.grid  # type: ignore[attr-defined]
    return np.asarray(g, dtype=np.float32).reshape(g.shape[-2], g.shape[-1])


def _signs(runs: F32) -> tuple[npt.NDArray[np.uint8], F32]:
    """7-bit sign fields of runs of 8 (N, 8) and the magnitudes to encode (the flipped element's
    magnitude becomes 0: it is represented with the wrong sign, so it is best kept small)."""
    neg = runs < 0
    odd = neg.sum(axis=1) % 2 == 1
    smallest = np.argmin(np.abs(runs), axis=1)
    rows = np.nonzero(odd)[0]
    neg[rows, smallest[rows]] = ~neg[rows, smallest[rows]]
    mags = np.abs(runs)
    mags[rows, smallest[rows]] = 0.0
    field = (neg[:, :7] * (1 << np.arange(7))).sum(axis=1).astype(np.uint8)
    return field, mags


def _free_signs(runs: F32) -> tuple[npt.NDArray[np.uint8], F32]:
    """Sign bytes of runs of 8 (N, 8), bit j set where element j is negative, and the magnitudes."""
    field = ((runs < 0) * (1 << np.arange(8))).sum(axis=1).astype(np.uint8)
    return field, np.abs(runs)


def _nearest(mags: F32, grid: F32, chunk: int = 4096) -> npt.NDArray[np.int64]:
    """Index of the grid row nearest (squared error) to each row of mags."""
    out = np.empty(len(mags), dtype=np.int64)
    g2 = (grid**2).sum(axis=1)
    for i in range(0, len(mags), chunk):
        m = mags[i : i + chunk]
        out[i : i + chunk] = np.argmin(g2[None, :] - 2.0 * m @ grid.T, axis=1)
    return out


def _block_scales(amax: F32, top: float, unit: float) -> tuple[U8, F32, npt.NDArray[np.int64]]:
    """fp16 d bytes (B, 2), d, and nibbles s (B, G) with d·(0.5 + s)·unit ≈ amax / top."""
    want = amax / top
    d16 = (want.max(axis=1) / ((0.5 + 15) * unit)).astype(np.float16)
    d = d16.astype(np.float32)
    s = np.zeros(want.shape, dtype=np.int64)
    ok = d > 0
    s[ok] = np.clip(np.rint(want[ok] / (d[ok, None] * unit) - 0.5), 0, 15).astype(np.int64)
    return d16.view(np.uint8).reshape(-1, 2), d, s


def quantize_iq2_xxs(x: F32) -> U8:
    grid = _grid(gq.IQ2_XXS)
    b = x.reshape(-1, 8, 32)  # 8 groups of 32 per block, one scale nibble each
    d_b, d, s = _block_scales(np.abs(b).max(axis=2), 43.0, 0.25)
    db = d[:, None] * (0.5 + s.astype(np.float32)) * 0.25
    runs = (b / np.where(db > 0, db, 1.0)[:, :, None]).reshape(-1, 8).astype(np.float32)
    field, mags = _signs(runs)
    idx = _nearest(mags, grid).reshape(-1, 8, 4).astype(np.uint32)
    fields = field.reshape(-1, 8, 4).astype(np.uint32)
    # per group two little-endian uint32: the 4 grid indices, then the sign fields and the scale
    a0 = idx[:, :, 0] | idx[:, :, 1] << 8 | idx[:, :, 2] << 16 | idx[:, :, 3] << 24
    a1 = fields[:, :, 0] | fields[:, :, 1] << 7 | fields[:, :, 2] << 14 | fields[:, :, 3] << 21
    a1 |= s.astype(np.uint32) << 28
    qs = np.stack([a0, a1], axis=2).astype("<u4").view(np.uint8).reshape(-1, 64)
    return np.concatenate([d_b, qs], axis=1)


def quantize_iq2_xs(x: F32) -> U8:
    grid = _grid(gq.IQ2_XS)
    b = x.reshape(-1, 16, 16)  # 16 halves of 16 per block, one scale nibble each
    d_b, d, s = _block_scales(np.abs(b).max(axis=2), 43.0, 0.25)
    db = d[:, None] * (0.5 + s.astype(np.float32)) * 0.25
    runs = (b.reshape(-1, 16, 2, 8) / np.where(db > 0, db, 1.0)[:, :, None, None]).reshape(-1, 8)
    field, mags = _signs(runs.astype(np.float32))
    idx = _nearest(mags, grid)
    qs = (idx.astype(np.uint16) | (field.astype(np.uint16) << 9)).reshape(-1, 32)
    scales = (s[:, 0::2] | (s[:, 1::2] << 4)).astype(np.uint8)
    return np.concatenate([d_b, qs.view(np.uint8), scales], axis=1)


def quantize_iq2_s(x: F32) -> U8:
    grid = _grid(gq.IQ2_S)
    b = x.reshape(-1, 16, 16)  # 16 halves of 16 per block, one scale nibble each
    d_b, d, s = _block_scales(np.abs(b).max(axis=2), 43.0, 0.25)
    db = d[:, None] * (0.5 + s.astype(np.float32)) * 0.25
    runs = (b.reshape(-1, 16, 2, 8) / np.where(db > 0, db, 1.0)[:, :, None, None]).reshape(-1, 8)
    signs, mags = _free_signs(runs.astype(np.float32))
    idx = _nearest(mags, grid).reshape(-1, 8, 4)  # 10 bits: the low 8 in qs, the top 2 in qh
    qh = ((idx >> 8) << np.array([0, 2, 4, 6])).sum(axis=2).astype(np.uint8)
    scales = (s[:, 0::2] | (s[:, 1::2] << 4)).astype(np.uint8)
    qs = (idx & 255).astype(np.uint8).reshape(-1, 32)
    return np.concatenate([d_b, qs, signs.reshape(-1, 32), qh, scales], axis=1)


def quantize_iq3_xxs(x: F32) -> U8:
    grid = _grid(gq.IQ3_XXS)
    b = x.reshape(-1, 8, 32)  # 8 groups of 32 per block, one scale nibble each
    d_b, d, s = _block_scales(np.abs(b).max(axis=2), 62.0, 0.5)
    db = d[:, None] * (0.5 + s.astype(np.float32)) * 0.5
    runs = (b / np.where(db > 0, db, 1.0)[:, :, None]).reshape(-1, 8).astype(np.float32)
    field, mags = _signs(runs)
    idx = _nearest(mags.reshape(-1, 4), grid).reshape(-1, 64).astype(np.uint8)
    fields = field.reshape(-1, 8, 4).astype(np.uint32)
    aux = fields[:, :, 0] | fields[:, :, 1] << 7 | fields[:, :, 2] << 14 | fields[:, :, 3] << 21
    aux |= s.astype(np.uint32) << 28
    return np.concatenate([d_b, idx, aux.astype("<u4").view(np.uint8).reshape(-1, 32)], axis=1)


def quantize_iq3_s(x: F32) -> U8:
    grid = _grid(gq.IQ3_S)
    b = x.reshape(-1, 8, 32)  # 8 groups of 32 per block, one scale nibble each
    d_b, d, s = _block_scales(np.abs(b).max(axis=2), 15.0, 2.0)  # d·(1 + 2s) = d·(0.5 + s)·2
    db = d[:, None] * (1 + 2 * s).astype(np.float32)
    runs = (b / np.where(db > 0, db, 1.0)[:, :, None]).reshape(-1, 8).astype(np.float32)
    signs, mags = _free_signs(runs)
    idx = _nearest(mags.reshape(-1, 4), grid).reshape(-1, 64)
    qh = np.packbits((idx >> 8).astype(np.uint8).reshape(-1, 8, 8), axis=2, bitorder="little").reshape(-1, 8)
    scales = (s[:, 0::2] | (s[:, 1::2] << 4)).astype(np.uint8)
    return np.concatenate([d_b, (idx & 255).astype(np.uint8), qh, signs.reshape(-1, 32), scales], axis=1)


def _odd_scales(want: F32) -> tuple[npt.NDArray[np.float16], F32, npt.NDArray[np.int64]]:
    """fp16 d (B,), d, and 3-bit s (B, G) with d·(2s + 1) ≈ want (the IQ1 scales)."""
    d16 = (want.max(axis=1) / 15.0).astype(np.float16)
    d = d16.astype(np.float32)
    s = np.zeros(want.shape, dtype=np.int64)
    ok = d > 0
    s[ok] = np.clip(np.rint((want[ok] / d[ok, None] - 1) / 2), 0, 7).astype(np.int64)
    return d16, d, s


def _iq1_runs(runs: F32, grid: F32) -> tuple[F32, npt.NDArray[np.int64]]:
    """Runs of 8 in units of their scale (..., 8) against grid + delta for delta = +1/8 and -1/8:
    the squared errors (2, ...) and nearest grid indices (2, ...) of each choice."""
    errs, idxs = [], []
    for delta in (IQ1_DELTA, -IQ1_DELTA):
        t = (runs - delta).reshape(-1, 8).astype(np.float32)
        idx = _nearest(t, grid)
        errs.append(((grid[idx] - t) ** 2).sum(axis=1).reshape(runs.shape[:-1]))
        idxs.append(idx.reshape(runs.shape[:-1]))
    return np.stack(errs), np.stack(idxs)


def quantize_iq1_s(x: F32) -> U8:
    grid = _grid(gq.IQ1_S)
    b = x.reshape(-1, 8, 32)  # 8 groups of 32 per block: one scale, one delta sign each
    d16, d, s = _odd_scales(IQ1_LEVEL * np.sqrt((b**2).mean(axis=2)))
    dl = d[:, None] * (2 * s + 1).astype(np.float32)
    err, idx = _iq1_runs((b / np.where(dl > 0, dl, 1.0)[:, :, None]).reshape(-1, 8, 4, 8), grid)
    neg = err[1].sum(axis=2) < err[0].sum(axis=2)  # the group's delta: the sign with less error
    idx = np.where(neg[:, :, None], idx[1], idx[0])
    # qh[g]: the 4 runs' top 3 index bits, then the scale (bits 12..14) and the delta sign (bit 15)
    qh = ((idx >> 8) << np.array([0, 3, 6, 9])).sum(axis=2) | (s << 12) | (neg.astype(np.int64) << 15)
    return np.concatenate([d16.view(np.uint8).reshape(-1, 2), (idx & 255).astype(np.uint8).reshape(-1, 32),
                           qh.astype("<u2").view(np.uint8).reshape(-1, 16)], axis=1)


def quantize_iq1_m(x: F32) -> U8:
    grid = _grid(gq.IQ1_M)
    b = x.reshape(-1, 16, 16)  # 16 halves of 16 per block, one scale each; a delta sign per run of 8
    d16, d, s = _odd_scales(IQ1_LEVEL * np.sqrt((b**2).mean(axis=2)))
    dl = d[:, None] * (2 * s + 1).astype(np.float32)
    err, idx = _iq1_runs((b / np.where(dl > 0, dl, 1.0)[:, :, None]).reshape(-1, 32, 8), grid)
    neg = err[1] < err[0]
    idx = np.where(neg, idx[1], idx[0])
    nibbles = (idx >> 8) | (neg.astype(np.int64) << 3)  # run k: nibble k % 2 of qh[k / 2]
    qh = (nibbles[:, 0::2] | (nibbles[:, 1::2] << 4)).astype(np.uint8)
    # scale word w: the 3-bit scales of halves 4w .. 4w + 3, and in its top nibble bits 4w .. 4w + 3 of d
    words = (s.reshape(-1, 4, 4) << np.array([0, 3, 6, 9])).sum(axis=2)
    words |= ((d16.view(np.uint16).astype(np.int64)[:, None] >> np.array([0, 4, 8, 12])) & 0xF) << 12
    scales = words.astype("<u2").view(np.uint8).reshape(-1, 8)
    return np.concatenate([(idx & 255).astype(np.uint8), qh, scales], axis=1)


def quantize_iq4_nl(x: F32) -> U8:
    values = np.asarray(gq.IQ4_NL.kvalues, dtype=np.float32)
    big = np.argmax(np.abs(x), axis=1)
    d = x[np.arange(len(x)), big] / np.float32(127.0)
    safe = np.where(d == 0, np.float32(1.0), d)
    q = np.abs(x[:, :, None] / safe[:, None, None] - values[None, None, :]).argmin(axis=2)
    v = values[q]
    den = (v * v).sum(axis=1)
    d = np.where(d == 0, np.float32(0.0), (x * v).sum(axis=1) / np.where(den == 0, 1, den)).astype(np.float16)
    nib = q.astype(np.uint8)
    qs = nib[:, :16] | (nib[:, 16:] << np.uint8(4))
    return np.concatenate([d.reshape(-1, 1).view(np.uint8), qs], axis=1)


ENCODERS = {
    "IQ2_XXS": quantize_iq2_xxs,
    "IQ2_XS": quantize_iq2_xs,
    "IQ2_S": quantize_iq2_s,
    "IQ3_XXS": quantize_iq3_xxs,
    "IQ3_S": quantize_iq3_s,
    "IQ1_S": quantize_iq1_s,
    "IQ1_M": quantize_iq1_m,
    "IQ4_NL": quantize_iq4_nl,
}
BLOCK = {"IQ4_NL": 32}


def quantize(array: npt.ArrayLike, type_name: str) -> U8:
    """``array`` (..., n) with n a multiple of the block (256; 32 for IQ4_NL) -> (..., row bytes)."""
    x = np.ascontiguousarray(array, dtype=np.float32)
    block = BLOCK.get(type_name, QK_K)
    if x.shape[-1] % block:
        raise ValueError(f"rows of {x.shape[-1]} are not a multiple of {block}")
    blocks = ENCODERS[type_name](x.reshape(-1, block))
    return np.ascontiguousarray(blocks.reshape(*x.shape[:-1], -1))
