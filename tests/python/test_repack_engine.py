"""Repacked weights in the engine (docs/quantization.md, "Repacked weights"): a random model with
Q8_0 / Q4_0 / Q5_0 / Q5_1 attention and expert weights decodes the same logits with ``repack`` on and off —
bitwise on the scalar path (the repacked kernels reproduce the plain scalar kernel's bits), within the kernel
tolerance on the fastest path — from the file mapping and with experts streamed (repacked as they
arrive); the engine reports what it repacked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine_args import engine
from strata import _strata
from strata.convert import make_random_strata

CFG = dict(vocab_size=300, d=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, gated=True,
           sink_count=2, sliding_window=4, indexer_heads=2, indexer_dim=8, indexer_top_k=3,
           rope_theta=10000.0, rope_dim=8,
           n_experts=8, n_experts_used=2, expert_ffn=32, shared_ffn=32, hc_count=1, hc_sinkhorn_iters=3,
           hc_eps=1e-6, rms_eps=1e-6, mtp=False, mtp_vocab_ids=None, context_length=128)
PROMPT = list(range(3, 40))


@pytest.fixture(scope="module", params=["Q8_0", "Q4_0", "Q5_0", "Q5_1"])
def path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    t = str(request.param)
    return make_random_strata(CFG, seed=7, path=tmp_path_factory.mktemp("rp") / f"m-{t}.gguf", weight_type=t,
                              expert_type=t)


@pytest.fixture
def restore_cpu() -> Iterator[None]:
    isa = _strata.active_isa()
    yield
    _strata.force_isa(isa)


def _logits(path: Path, repack: str, **kw: Any) -> tuple[np.ndarray, dict[str, Any]]:
    eng = engine(path, n_threads=2, max_ctx=64, max_rows=16, encode_mtp=False, repack=repack, **kw)
    return np.asarray(eng.eval(PROMPT, logits="all")), dict(eng.repack)


STREAM: dict[str, Any] = dict(expert_mode="stream", expert_cache="50%", expert_io_threads=1)


def test_scalar_path_is_bitwise_with_and_without_repack(path: Path, restore_cpu: None) -> None:
    _strata.force_isa("scalar")
    off, rep_off = _logits(path, "off")
    on, rep_on = _logits(path, "on")
    assert rep_off["matrices"] == 0 and rep_off["mode"] == "off"
    assert int(rep_on["matrices"]) > 0 and int(rep_on["bytes"]) > 0 and rep_on["mode"] == "on"
    # Each layer's gate and up experts side by side in one buffer (model/weight_repack.h): same logits.
    assert rep_off["paired"] == 0 and rep_on["paired"] == CFG["n_layers"]
    assert np.array_equal(on.view(np.uint32), off.view(np.uint32))
    streamed, rep_stream = _logits(path, "on", **STREAM)
    assert np.array_equal(streamed.view(np.uint32), off.view(np.uint32))
    assert int(rep_stream["matrices"]) < int(rep_on["matrices"])  # experts repack on arrival instead


def test_fastest_path_agrees_within_the_kernel_tolerance(path: Path, restore_cpu: None) -> None:
    best = _strata.supported_isas()[-1] if "avx512" not in _strata.supported_isas() else "avx512"
    _strata.force_isa(best)
    off, _ = _logits(path, "off")
    on, _ = _logits(path, "on")
    streamed, _ = _logits(path, "on", **STREAM)
    scale = float(np.abs(off).max())
    assert float(np.abs(on - off).max()) <= 1e-3 * scale
    assert np.array_equal(streamed.view(np.uint32), on.view(np.uint32))


def test_output_head_is_repacked_and_bitwise_on_the_scalar_path(tmp_path: Path, restore_cpu: None) -> None:
    """A vocabulary in whole 16-row groups: the output head is repacked too (one more matrix than with
    a vocabulary that is not), and the main logits and the drafter's chained draft logits (whose head
    views the repacked rows) stay bitwise the unrepacked ones on the scalar path."""
    _strata.force_isa("scalar")
    counts = {}
    for vocab in (300, 304):
        cfg = {**CFG, "vocab_size": vocab, "mtp": True}
        p = make_random_strata(cfg, seed=3, path=tmp_path / f"v{vocab}.gguf", weight_type="Q8_0",
                               expert_type="Q8_0")
        out = {}
        for repack in ("off", "on"):
            eng = engine(p, n_threads=2, max_ctx=64, max_rows=16, repack=repack)
            logits = np.asarray(eng.eval(PROMPT, logits="all"))
            draft, ids = eng.mtp_draft(int(np.argmax(logits[-1])), n_steps=3)
            out[repack] = (logits, np.asarray(draft), np.asarray(ids))
            counts[(vocab, repack)] = int(dict(eng.repack)["matrices"])
        for a, b in zip(out["off"], out["on"], strict=True):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    assert counts[(304, "on")] == counts[(300, "on")] + 1
    assert counts[(304, "off")] == counts[(300, "off")] == 0


def test_gathered_drafter_head_is_repacked_without_changing_drafts(tmp_path: Path, restore_cpu: None) -> None:
    """A drafter vocabulary that is not one run of ids (the demo model's most frequent tokens) is a
    gathered copy of the head's rows, repacked like the main head when that one is: the chained draft
    logits stay bitwise the unrepacked ones on the scalar path (every repacked kernel reproduces the
    plain scalar kernel's bits; test_cpu_repack checks each ISA's repacked kernels against it)."""
    ids = sorted({int(i) for i in np.random.default_rng(5).choice(304, size=64, replace=False)})[:48]
    cfg = {**CFG, "vocab_size": 304, "mtp": True, "mtp_vocab_ids": ids}
    p = make_random_strata(cfg, seed=4, path=tmp_path / "gathered.gguf", weight_type="Q8_0",
                           expert_type="Q8_0")
    _strata.force_isa("scalar")
    out = {}
    for repack in ("off", "on"):
        eng = engine(p, n_threads=2, max_ctx=64, max_rows=16, repack=repack)
        logits = np.asarray(eng.eval(PROMPT, logits="all"))
        draft, got = eng.mtp_draft(int(np.argmax(logits[-1])), n_steps=3)
        out[repack] = (np.asarray(draft), np.asarray(got))
    assert out["on"][0].shape == (3, len(ids))
    for a, b in zip(out["off"], out["on"], strict=True):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
