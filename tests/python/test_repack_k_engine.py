"""Repacked Q4_K / Q6_K / IQ4_XS weights in the engine (docs/quantization.md, "Repacked weights"): a
random model whose matrices are random Q4_K (Q6_K, IQ4_XS) blocks decodes bitwise the same logits
with ``repack`` on and off on the scalar path (the repacked kernels reproduce the plain scalar
kernel's bits); on every other path within the kernel tolerance of the plain kernels (which sum in
another order), ``auto`` repacks there exactly as ``on`` does (same bits), and the experts streamed
(repacked as they arrive) give bitwise the logits of the file mapping. The converters cannot write
these formats (gguf.quants has no Q4_K / Q6_K / IQ4_XS encoder), so the file is written with random
valid blocks in their place."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from engine_args import engine
from strata import _strata
from strata.convert import make_random_strata, strata_writer

# d, heads x head_dim, expert and shared FFN all multiples of 256 (one Q4_K / Q6_K super-block);
# a vocabulary of whole 16-row groups, so the output head is repacked too.
CFG = dict(vocab_size=304, d=256, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=64, gated=True,
           sink_count=2, sliding_window=4, indexer_heads=2, indexer_dim=8, indexer_top_k=3,
           rope_theta=10000.0, rope_dim=8,
           n_experts=8, n_experts_used=2, expert_ffn=256, shared_ffn=256, hc_count=1, hc_sinkhorn_iters=3,
           hc_eps=1e-6, rms_eps=1e-6, mtp=False, mtp_vocab_ids=None, context_length=128)
PROMPT = list(range(3, 30))
# Byte offsets of the fp16 scales in a block: random bytes elsewhere are valid quants and 6-bit scales.
SCALES = {GGMLQuantizationType.Q4_K: (0, 2), GGMLQuantizationType.Q6_K: (208,),
          GGMLQuantizationType.IQ4_XS: (0,)}


def _random_blocks(qtype: GGMLQuantizationType, rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    block, size = GGML_QUANT_SIZES[qtype]
    nb = cols // block
    raw = rng.integers(0, 256, size=(rows, nb, size), dtype=np.uint8)
    for off in SCALES[qtype]:
        d = rng.uniform(2e-3, 2e-2, size=(rows, nb)).astype(np.float16)
        raw[:, :, off:off + 2] = d.view(np.uint8).reshape(rows, nb, 2)
    return raw.reshape(rows, nb * size)


@pytest.fixture(scope="module", params=["Q4_K", "Q6_K", "IQ4_XS"])
def path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    qtype = GGMLQuantizationType[str(request.param)]
    rng = np.random.default_rng(5)
    mp = pytest.MonkeyPatch()
    plain_storage, plain_encode = strata_writer.storage_type, strata_writer.encode

    def storage(shape: tuple[int, ...], wanted: GGMLQuantizationType) -> GGMLQuantizationType:
        return qtype if shape[-1] % 256 == 0 else plain_storage(shape, wanted)

    def encode(array: np.ndarray, t: GGMLQuantizationType) -> tuple[np.ndarray, GGMLQuantizationType | None]:
        if t != qtype:
            return plain_encode(array, t)
        blocks = _random_blocks(t, int(np.prod(array.shape[:-1])), array.shape[-1], rng)
        return blocks.reshape(*array.shape[:-1], -1), t

    mp.setattr(strata_writer, "storage_type", storage)
    mp.setattr(strata_writer, "encode", encode)
    try:
        yield make_random_strata(CFG, seed=9, path=tmp_path_factory.mktemp("rpk") / f"m-{request.param}.gguf",
                                 weight_type="F16")
    finally:
        mp.undo()


@pytest.fixture
def restore_cpu() -> Iterator[None]:
    isa = _strata.active_isa()
    yield
    _strata.force_isa(isa)


def _logits(path: Path, repack: str, **kw: Any) -> tuple[np.ndarray, dict[str, Any]]:
    eng = engine(path, n_threads=2, max_ctx=64, max_rows=16, encode_mtp=False, repack=repack, **kw)
    return np.asarray(eng.eval(PROMPT, logits="all")), dict(eng.repack)


STREAM: dict[str, Any] = dict(expert_mode="stream", expert_cache="50%", expert_io_threads=1)


def test_repacked_k_quants_match_the_plain_kernels_on_every_path(path: Path, restore_cpu: None) -> None:
    _strata.force_isa("scalar")
    off, rep_off = _logits(path, "off")
    on, rep_on = _logits(path, "on")
    _, rep_auto = _logits(path, "auto")
    assert rep_off["matrices"] == 0
    assert rep_auto["matrices"] == 0  # auto repacks only for paths with repacked kernels of their own
    # Per layer q, k, v, o, the indexer's q (its 8-row k is not whole groups and stays plain), the
    # shared expert's three, the three expert stacks; and the output head.
    assert int(rep_on["matrices"]) == 2 * 11 + 1
    assert np.isfinite(off).all() and float(np.abs(off).max()) > 0
    assert np.array_equal(on.view(np.uint32), off.view(np.uint32))
    streamed, rep_stream = _logits(path, "on", **STREAM)
    assert int(rep_stream["matrices"]) == int(rep_on["matrices"]) - 2 * 3  # experts repack on arrival
    assert np.array_equal(streamed.view(np.uint32), off.view(np.uint32))
    scale = float(np.abs(off).max())
    for isa in [i for i in _strata.supported_isas() if i != "scalar"]:
        _strata.force_isa(isa)
        fast_off, _ = _logits(path, "off")
        fast, rep = _logits(path, "on")
        auto, rep_auto = _logits(path, "auto")
        streamed, _ = _logits(path, "on", **STREAM)
        assert int(rep["matrices"]) == int(rep_on["matrices"])
        assert int(rep_auto["matrices"]) == int(rep_on["matrices"]), isa
        assert np.array_equal(auto.view(np.uint32), fast.view(np.uint32)), isa
        assert float(np.abs(fast - fast_off).max()) <= 1e-3 * scale, isa
        assert np.array_equal(streamed.view(np.uint32), fast.view(np.uint32)), isa
