"""Elementary rules of docs/gguf.md §2: int8 K/V cells, RoPE, chunked softmax, routing, cell choice."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from strata_train.cell_selection import attention_mask, select_cells
from strata_train.config import StrataConfig
from strata_train.moe import MoE
from strata_train.ops import (
    ROUTE_WEIGHT_FLOOR,
    apply_rope,
    chunked_softmax_attention,
    kv_dequantize,
    kv_fake_quant,
    kv_quantize,
    renormalise,
    rope_cos_sin,
    select_top_k,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ------------------------------------------------------------------------------ int8 K/V cells
def _numpy_kv_quantize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An independent reading of the rule, block by block, in numpy float32 / float16."""
    dh = x.shape[-1]
    qs, ss = [], []
    for start in range(0, dh, 64):
        blk = x[..., start : start + 64].astype(np.float32)
        s16 = (np.abs(blk).max(axis=-1) / np.float32(127.0)).astype(np.float16)
        s = s16.astype(np.float32)[..., None]
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(s > 0, np.clip(np.rint(blk / s), -127, 127), 0.0)
        qs.append(q.astype(np.int8))
        ss.append(s16)
    return np.concatenate(qs, axis=-1), np.stack(ss, axis=-1)


@pytest.mark.parametrize("dh", [16, 64, 80, 128, 130])
def test_kv_quantize_matches_the_rule(dh: int) -> None:
    gen = torch.Generator().manual_seed(dh)
    x = torch.randn(7, 3, dh, generator=gen) * torch.logspace(-3, 2, 7).view(7, 1, 1)
    q, s = kv_quantize(x)
    assert q.dtype == torch.int8 and s.dtype == torch.float16
    assert s.shape == (7, 3, (dh + 63) // 64)
    q_ref, s_ref = _numpy_kv_quantize(x.numpy())
    np.testing.assert_array_equal(q.numpy(), q_ref)
    np.testing.assert_array_equal(s.numpy(), s_ref)
    # what the attention reads: q * s, within half a step of x
    y = kv_dequantize(q, s)
    step = s.float().repeat_interleave(64, dim=-1)[..., :dh]
    assert torch.all((y - x).abs() <= 0.5 * step + 1e-6 * x.abs())


def test_kv_quantize_edge_cases() -> None:
    x = torch.zeros(64)
    x[0] = 127.0  # s = 1 exactly: round half to even on .5 values
    x[1:5] = torch.tensor([0.5, 1.5, 2.5, -2.5])
    q, s = kv_quantize(x)
    assert float(s[0]) == 1.0
    assert q[:5].tolist() == [127, 0, 2, 2, -2]
    # an all-zero block: scale 0, codes 0
    q, s = kv_quantize(torch.zeros(2, 64))
    assert torch.all(s == 0) and torch.all(q == 0)
    # absmax/127 below half the smallest fp16 subnormal: s16 = 0 -> codes 0
    q, s = kv_quantize(torch.full((64,), 1e-6))
    assert float(s[0]) == 0.0 and torch.all(q == 0)
    # a subnormal scale rounded down: x / s > 127 must clamp
    x = torch.full((64,), 127 * 8.9e-8)
    q, s = kv_quantize(x)
    assert float(x[0]) / float(s[0]) > 127.5 and torch.all(q == 127)


def test_kv_fake_quant_straight_through() -> None:
    x = torch.randn(4, 2, 32, requires_grad=True)
    y = kv_fake_quant(x)
    assert torch.equal(y.detach(), kv_dequantize(*kv_quantize(x.detach())))
    y.sum().backward()
    assert x.grad is not None and torch.equal(x.grad, torch.ones_like(x))


# ------------------------------------------------------------------------------------- RoPE
def test_rope_neox_pairs_and_pass_through() -> None:
    dh, r, theta = 12, 8, 500.0
    x = torch.randn(5, 3, dh)  # [positions, heads, Dh]
    pos = torch.tensor([0, 1, 7, 100, 4095])
    cos, sin = rope_cos_sin(pos, r, theta)
    y = apply_rope(x, cos, sin)
    assert torch.equal(y[0], x[0])  # position 0 is the identity
    assert torch.equal(y[..., r:], x[..., r:])  # dims past rope_dim pass through
    for pi, p in enumerate(pos.tolist()):
        for i in range(r // 2):
            ang = p * theta ** (-2.0 * i / r)
            c, s = np.cos(ang), np.sin(ang)
            a, b = x[pi, :, i].double(), x[pi, :, i + r // 2].double()
            torch.testing.assert_close(y[pi, :, i].double(), a * c - b * s, atol=2e-5, rtol=1e-5)
            torch.testing.assert_close(y[pi, :, i + r // 2].double(), b * c + a * s, atol=2e-5, rtol=1e-5)


# --------------------------------------------------------------------------- chunked softmax
@pytest.mark.parametrize("length", [1, 63, 64, 65, 129, 200])
def test_chunked_softmax_equals_softmax(length: int) -> None:
    gen = torch.Generator().manual_seed(length)
    scores = torch.randn(3, length, generator=gen) * 20.0
    scores[0, -1] += 60.0  # the maximum in the last chunk
    values = torch.randn(3, length, 5, generator=gen)
    expect = torch.einsum("hl,hld->hd", torch.softmax(scores.double(), -1), values.double())
    got = chunked_softmax_attention(scores, values).double()
    torch.testing.assert_close(got, expect, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------- routing
def test_top_k_ties_go_to_the_lower_id() -> None:
    p = torch.tensor([[0.1, 0.3, 0.3, 0.3], [0.25, 0.25, 0.25, 0.25], [0.4, 0.1, 0.4, 0.1]])
    assert select_top_k(p, 2).tolist() == [[1, 2], [0, 1], [0, 2]]
    wide = torch.zeros(1, 512)
    wide[0, [500, 7, 300]] = 1.0
    assert select_top_k(wide, 5).tolist() == [[7, 300, 500, 0, 1]]


def test_renormalise_floor() -> None:
    w = renormalise(torch.tensor([[0.3, 0.2], [1e-6, 2e-6]]))
    torch.testing.assert_close(w[0], torch.tensor([0.6, 0.4]))
    torch.testing.assert_close(w[1], torch.tensor([1e-6, 2e-6]) / ROUTE_WEIGHT_FLOOR)
    assert ROUTE_WEIGHT_FLOOR == 2.0**-14


def test_moe_routing_ties_and_weights() -> None:
    cfg = StrataConfig.tiny(n_experts=8, n_experts_used=3)
    moe = MoE(cfg)
    with torch.no_grad():
        moe.ffn_gate_inp.weight.zero_()  # every probability equal: experts 0, 1, 2
    probs, ids, weights = moe.route(torch.randn(4, cfg.d))
    assert ids.tolist() == [[0, 1, 2]] * 4
    torch.testing.assert_close(weights, torch.full((4, 3), 1 / 3))
    torch.testing.assert_close(probs.sum(-1), torch.ones(4))
    # training and row-by-row paths agree
    torch.manual_seed(0)
    moe = MoE(cfg)
    x = torch.randn(6, cfg.d)
    y, balance = moe(x)
    torch.testing.assert_close(moe.forward_rows(x), y, rtol=1e-5, atol=1e-6)
    assert float(balance.detach()) > 0


# ------------------------------------------------------------------------------- cell choice
def test_select_cells_hand_example() -> None:
    # p = 9, sinks {0, 1}, window (6, 9] = {7, 8, 9}; remaining 2..6 ranked by score, ties -> lower id
    scores = [9.0, 9.0, 1.0, 5.0, 5.0, 0.5, 5.0, 9.0, 9.0, 9.0]
    assert select_cells(9, 2, 3, scores, 2) == [0, 1, 3, 4, 7, 8, 9]
    assert select_cells(9, 2, 3, scores, 10) == list(range(10))
    assert select_cells(9, 2, 3, None, 2) == [0, 1, 7, 8, 9]
    assert select_cells(1, 4, 3, None, 0) == [0, 1]
    assert select_cells(5, 0, 0, None, 0) == list(range(6))


@pytest.mark.parametrize(
    "sink,window,top_k", [(0, 1, 0), (2, 3, 0), (2, 3, 2), (0, 4, 5), (3, 1, 1), (0, 0, 0)]
)
def test_mask_equals_cell_lists(sink: int, window: int, top_k: int) -> None:
    n = 23
    gen = torch.Generator().manual_seed(sink * 100 + window * 10 + top_k)
    scores = torch.randint(0, 4, (2, n, n), generator=gen).float()  # many ties
    mask = attention_mask(n, sink, window, scores if top_k else None, top_k).expand(2, n, n)
    for b in range(2):
        for p in range(n):
            row = scores[b, p, : p + 1].tolist() if top_k else None
            cells = select_cells(p, sink, window, row, top_k)
            assert torch.nonzero(mask[b, p]).flatten().tolist() == cells


# ---------------------------------------------------------------------------------- config
def test_config_validation_and_variants() -> None:
    cfg = StrataConfig.tiny()
    assert cfg.mtp and cfg.has_indexer and cfg.hc_count > 1 and cfg.mtp_vocab_size == len(range(0, 512, 3))
    off = cfg.without("hc", "gate", "window", "shared_expert", "mtp")
    assert (off.hc_count, off.gated, off.sliding_window) == (1, False, 0)
    assert (off.sink_count, off.indexer_heads) == (0, 0)
    assert off.shared_ffn == 0 and not off.mtp and off.mtp_vocab_size == 0
    assert StrataConfig.from_dict(cfg.to_dict()) == cfg
    bad = [
        dict(n_heads=3, n_kv_heads=2),
        dict(rope_dim=7),
        dict(rope_dim=32),
        dict(n_experts_used=9),
        dict(sliding_window=0),  # sinks and indexer need a window
        dict(indexer_top_k=0),
        dict(mtp_vocab_ids=(1, 1)),
        dict(mtp_vocab_ids=(512,)),
        dict(d=0),
    ]
    for changes in bad:
        with pytest.raises(ValueError, match="StrataConfig"):
            StrataConfig.tiny(**changes)
    with pytest.raises(ValueError, match="unknown feature"):
        cfg.without("nope")
    with pytest.raises(ValueError, match="unknown fields"):
        StrataConfig.from_dict({**cfg.to_dict(), "extra": 1})
