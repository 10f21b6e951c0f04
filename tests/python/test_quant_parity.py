"""Block formats against the reference nobody here wrote: ``gguf.quants``.

- Our Q8_0 / Q5_0 / Q5_1 / Q4_0 (ggml rule) / F16 / BF16 quantizers are byte-identical to
  ``gguf.quants.quantize`` on random tensors (Gaussian, heavy-tailed, outliers, zero rows, ties).
- ``gguf.quants.dequantize`` equals our dequantization bitwise, on our quantizers' output and on
  random valid blocks of every format (random bytes with finite, moderate fp16 scales), including
  Q4_K, Q6_K, Q2_K, IQ4_XS, Q3_K, Q5_K, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M and
  IQ4_NL, which gguf-py cannot quantize.
- Every codebook entry of IQ2_XXS (256), IQ2_XS (512), IQ2_S (1024), IQ3_XXS (256), IQ3_S (512) and
  IQ1_S / IQ1_M (2048, one grid) decodes as gguf decodes it.
- The tests' IQ encoders (iquant_pack.py) write blocks that gguf and strata decode bitwise alike, close
  to the encoded values.
- Q4_0 with the Lloyd fit decodes with gguf too and is never worse than the ggml rule.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import quants as gq

import iquant_pack
import strata
from strata import quant

# Byte offsets of the fp16 scale fields inside one block, per format.
SCALE_FIELDS: dict[str, list[int]] = {
    "Q4_0": [0],
    "Q5_0": [0],
    "Q5_1": [0, 2],
    "Q8_0": [0],
    "IQ4_NL": [0],
    "Q2_K": [80, 82],
    "Q4_K": [0, 2],
    "Q6_K": [208],
    "IQ4_XS": [0],
    "Q3_K": [108],
    "Q5_K": [0, 2],
    "IQ2_XS": [0],
    "IQ3_XXS": [0],
    "IQ2_XXS": [0],
    "IQ3_S": [0],
    "IQ2_S": [0],
    "IQ1_S": [0],
    "IQ1_M": [],  # its fp16 d is spread over the scale words' top nibbles (random_blocks sets it)
}
BLOCK_TYPES = list(SCALE_FIELDS)
FLOAT_TYPES = ["F32", "F16", "BF16"]


def bits(a: npt.NDArray[np.float32]) -> npt.NDArray[np.uint32]:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def random_blocks(type_name: str, rows: int, cols: int, rng: np.random.Generator) -> npt.NDArray[np.uint8]:
    """Random but valid rows: random bytes, every fp16 scale finite with magnitude in [1e-3, 0.1]."""
    if type_name in FLOAT_TYPES:
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        return quant.quantize(x, type_name)
    bs, ts = quant.block_size(type_name), quant._q.type_size(type_name)
    nb = cols // bs
    raw = rng.integers(0, 256, size=(rows, nb, ts), dtype=np.uint8)

    def random_scale() -> npt.NDArray[np.float16]:
        mag = rng.uniform(1e-3, 0.1, size=(rows, nb)) * rng.choice([-1.0, 1.0], size=(rows, nb))
        return mag.astype(np.float16)

    for off in SCALE_FIELDS[type_name]:
        raw[:, :, off : off + 2] = random_scale().view(np.uint8).reshape(rows, nb, 2)
    if type_name == "IQ1_M":  # d's 4 nibbles, lowest first, top the 4 scale words (bytes 48..55)
        d = random_scale().view(np.uint16)[..., None]
        words = raw[:, :, 48:56].copy().view("<u2")
        words = (words & 0x0FFF) | (((d >> np.array([0, 4, 8, 12], dtype=np.uint16)) & 0xF) << 12)
        raw[:, :, 48:56] = words.astype("<u2").view(np.uint8)
    return raw.reshape(rows, nb * ts)


def sample_inputs(rng: np.random.Generator) -> list[npt.NDArray[np.float32]]:
    gauss = rng.standard_normal((8, 256)).astype(np.float32)
    heavy = rng.standard_t(2.0, size=(8, 256)).astype(np.float32)
    outliers = gauss.copy()
    outliers[:, ::37] *= 50.0
    zeros = np.zeros((2, 256), dtype=np.float32)
    ties = (rng.integers(-40, 40, size=(4, 256)) / 2.0).astype(np.float32)  # many exact .5 values
    tiny = (gauss * 1e-6).astype(np.float32)
    return [gauss, heavy, outliers, zeros, ties, tiny]


@pytest.mark.parametrize("type_name", ["Q8_0", "Q5_0", "Q5_1", "Q4_0", "F16", "BF16"])
def test_quantizers_are_byte_identical_to_gguf(type_name: str) -> None:
    rng = np.random.default_rng(0)
    for x in sample_inputs(rng):
        ours = quant.quantize(x, type_name)
        ref = np.ascontiguousarray(gq.quantize(x, QT[type_name])).view(np.uint8).reshape(ours.shape)
        assert ours.dtype == np.uint8
        assert np.array_equal(ours, ref)


@pytest.mark.parametrize("type_name", ["Q8_0", "Q5_0", "Q5_1", "Q4_0", "F16", "BF16", "F32"])
def test_dequantize_of_our_quantizers_equals_gguf(type_name: str) -> None:
    rng = np.random.default_rng(1)
    for x in sample_inputs(rng):
        q = quant.quantize(x, type_name)
        ours = quant.dequantize(q, type_name, x.shape)
        ref = gq.dequantize(q.view(np.float32) if type_name == "F32" else q, QT[type_name])
        if type_name == "F16":
            ref = gq.dequantize(q.view(np.float16), QT.F16)
        assert np.array_equal(bits(ours), bits(np.asarray(ref).reshape(x.shape)))


@pytest.mark.parametrize("type_name", BLOCK_TYPES + ["BF16"])
@pytest.mark.parametrize("cols", [256, 1024])
def test_dequantize_random_valid_blocks_equals_gguf(type_name: str, cols: int) -> None:
    rng = np.random.default_rng(hash((type_name, cols)) % 2**32)
    data = random_blocks(type_name, 16, cols, rng)
    ours = quant.dequantize(data, type_name, (16, cols))
    ref = gq.dequantize(data, QT[type_name])
    assert ref.shape == (16, cols)
    assert np.array_equal(bits(ours), bits(ref))
    assert np.isfinite(ours).all()


@pytest.mark.parametrize(
    ("type_name", "entries", "per_block"),
    [("IQ2_XXS", 256, 32), ("IQ2_XS", 512, 32), ("IQ2_S", 1024, 32), ("IQ3_XXS", 256, 64),
     ("IQ3_S", 512, 64), ("IQ1_S", 2048, 32), ("IQ1_M", 2048, 32)],
)
def test_every_codebook_entry_decodes_as_gguf(type_name: str, entries: int, per_block: int) -> None:
    """Blocks whose index fields walk the whole grid (random signs and scales around them)."""
    rng = np.random.default_rng(5)
    nblocks = entries // per_block
    data = random_blocks(type_name, 1, 256 * nblocks, rng).reshape(nblocks, -1)
    idx = np.arange(entries).reshape(nblocks, per_block)
    if type_name == "IQ2_XXS":  # group g: bytes 2 + 8g .. 2 + 8g + 3 are its 4 indices
        for g in range(8):
            data[:, 2 + 8 * g : 6 + 8 * g] = idx[:, 4 * g : 4 * g + 4].astype(np.uint8)
    elif type_name == "IQ2_XS":
        qs = data[:, 2:66].copy().view(np.uint16)
        data[:, 2:66] = ((qs & np.uint16(0xFE00)) | idx.astype(np.uint16)).view(np.uint8)
    elif type_name == "IQ2_S":  # low 8 bits in bytes 2..33; the top two: bits 2 (k % 4) of byte 66 + k / 4
        data[:, 2:34] = (idx & 255).astype(np.uint8)
        top = (idx >> 8).reshape(nblocks, 8, 4) << np.array([0, 2, 4, 6])
        data[:, 66:74] = top.sum(axis=2).astype(np.uint8)
    elif type_name == "IQ3_S":  # low 8 bits in bytes 2..65; the ninth: bit k % 8 of byte 66 + k / 8
        data[:, 2:66] = (idx & 255).astype(np.uint8)
        ninth = (idx >> 8).astype(np.uint8).reshape(nblocks, 8, 8)
        data[:, 66:74] = np.packbits(ninth, axis=2, bitorder="little")[..., 0]
    elif type_name == "IQ1_S":  # low 8 bits in bytes 2..33; the top three: bits 3 (k % 4) of uint16 qh[k / 4]
        data[:, 2:34] = (idx & 255).astype(np.uint8)
        qh = data[:, 34:50].copy().view("<u2")
        top = ((idx >> 8).reshape(nblocks, 8, 4) << np.array([0, 3, 6, 9])).sum(axis=2)
        data[:, 34:50] = ((qh & 0xF000) | top).astype("<u2").view(np.uint8)
    elif type_name == "IQ1_M":  # low 8 bits in bytes 0..31; the top three: nibble k % 2 of byte 32 + k / 2
        data[:, 0:32] = (idx & 255).astype(np.uint8)
        top = (idx >> 8).reshape(nblocks, 16, 2)
        data[:, 32:48] = (data[:, 32:48] & 0x88) | top[:, :, 0] | (top[:, :, 1] << 4)
    else:
        data[:, 2:66] = idx.astype(np.uint8)
    data = data.reshape(1, -1)
    ours = quant.dequantize(data, type_name, (1, 256 * nblocks))
    assert np.array_equal(bits(ours), bits(gq.dequantize(data, QT[type_name])))


# Relative RMS error of the encoders on Gaussian rows, measured (IQ2_XXS 0.36, IQ2_XS 0.31, IQ2_S 0.26,
# IQ3_XXS 0.19, IQ3_S 0.14, IQ1_S 0.45, IQ1_M 0.42, IQ4_NL 0.09) with a margin: a wrong sign, index bit
# or scale field costs far more. (IQ1's ternary grid is coarse: the best 3-level quantizer of a Gaussian
# with one scale leaves 0.44.)
ENCODER_RMS = {"IQ2_XXS": 0.4, "IQ2_XS": 0.35, "IQ2_S": 0.3, "IQ3_XXS": 0.22, "IQ3_S": 0.16, "IQ1_S": 0.5,
               "IQ1_M": 0.47, "IQ4_NL": 0.1}


@pytest.mark.parametrize("type_name", list(iquant_pack.ENCODERS))
def test_iq_test_encoders_round_trip_through_gguf(type_name: str) -> None:
    x = np.random.default_rng(11).standard_normal((16, 1024)).astype(np.float32)
    q = iquant_pack.quantize(x, type_name)
    ref = np.asarray(gq.dequantize(q, QT[type_name])).reshape(x.shape)
    assert np.array_equal(bits(quant.dequantize(q, type_name, x.shape)), bits(ref))
    rel = float(np.sqrt(((ref - x) ** 2).mean() / (x**2).mean()))
    assert rel < ENCODER_RMS[type_name], rel


def test_dequantize_accepts_bytes_and_checks_sizes() -> None:
    rng = np.random.default_rng(2)
    data = random_blocks("Q4_K", 2, 256, rng)
    a = quant.dequantize(data.tobytes(), "Q4_K", (2, 256))
    assert np.array_equal(bits(a), bits(quant.dequantize(data, "Q4_K", (2, 256))))
    with pytest.raises(strata.InvalidArgument, match="bytes, expected"):
        quant.dequantize(data[:, :-1].copy(), "Q4_K", (2, 256))
    with pytest.raises(strata.InvalidArgument, match="not a multiple"):
        quant.dequantize(data, "Q4_K", (4, 128))
    with pytest.raises(strata.InvalidArgument, match="uint8"):
        quant.dequantize(data.view(np.int8), "Q4_K", (2, 256))
    with pytest.raises(strata.InvalidArgument, match="unknown ggml type"):
        quant.dequantize(data, "Q4_9", (2, 256))
    with pytest.raises(strata.InvalidArgument, match="no kernels"):
        quant.dequantize(data, "Q4_1", (2, 256))


def test_lloyd_q4_0_decodes_with_gguf_and_is_never_worse() -> None:
    rng = np.random.default_rng(3)
    for x in sample_inputs(rng):
        plain = quant.quantize(x, "Q4_0", "ggml")
        fit = quant.quantize(x, "Q4_0", "lloyd")
        y_plain = gq.dequantize(plain, QT.Q4_0).reshape(-1, 32).astype(np.float64)
        y_fit = gq.dequantize(fit, QT.Q4_0).reshape(-1, 32).astype(np.float64)
        ours = quant.dequantize(fit, "Q4_0", x.shape)
        assert np.array_equal(bits(ours), bits(y_fit.astype(np.float32).reshape(x.shape)))
        blocks = x.reshape(-1, 32).astype(np.float64)
        err_plain = ((blocks - y_plain) ** 2).sum(axis=1)
        err_fit = ((blocks - y_fit) ** 2).sum(axis=1)
        assert (err_fit <= err_plain).all()
    gauss = rng.standard_normal((64, 256)).astype(np.float32)
    e_plain = ((gq.dequantize(quant.quantize(gauss, "Q4_0"), QT.Q4_0) - gauss) ** 2).sum()
    e_fit = ((gq.dequantize(quant.quantize(gauss, "Q4_0", "lloyd"), QT.Q4_0) - gauss) ** 2).sum()
    assert e_fit < 0.92 * e_plain


def test_quantize_rejects_bad_input() -> None:
    x = np.ones((2, 64), dtype=np.float32)
    with pytest.raises(strata.InvalidArgument, match="Lloyd"):
        quant.quantize(x, "Q8_0", "lloyd")
    with pytest.raises(strata.InvalidArgument, match="no quantizer for type Q4_K"):
        quant.quantize(x, "Q4_K")
    with pytest.raises(strata.InvalidArgument, match="not a multiple"):
        quant.quantize(np.ones((2, 48), dtype=np.float32), "Q8_0")
    x[1, 5] = np.inf
    with pytest.raises(strata.InvalidArgument, match="non-finite"):
        quant.quantize(x, "Q5_0")
