"""Our hyper-connection and HyperHead against transformers' DeepseekV4 classes on random parameters."""

from __future__ import annotations

import pytest
import torch

from strata_train.hyper_connections import HyperConnection, HyperHead, PlainHead, PlainResidual

pytestmark = pytest.mark.usefixtures("one_torch_thread")


hf = pytest.importorskip("transformers.models.deepseek_v4.modeling_deepseek_v4")
DeepseekV4Config = pytest.importorskip("transformers").DeepseekV4Config


def _hf_config(n: int, iters: int, d: int, hc_eps: float, rms_eps: float) -> object:
    return DeepseekV4Config(hidden_size=d, hc_mult=n, hc_sinkhorn_iters=iters, hc_eps=hc_eps,
                            rms_norm_eps=rms_eps, num_hidden_layers=1, vocab_size=64)


def _randomize(module: torch.nn.Module, gen: torch.Generator) -> None:
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen))


@pytest.mark.parametrize("n,iters", [(2, 1), (2, 7), (3, 2), (4, 1), (4, 3), (4, 20), (6, 5)])
def test_hyper_connection_matches_transformers(n: int, iters: int) -> None:
    d, hc_eps, rms_eps = 24, 1e-6, 1e-5
    gen = torch.Generator().manual_seed(100 * n + iters)
    theirs = hf.DeepseekV4HyperConnection(_hf_config(n, iters, d, hc_eps, rms_eps)).float()
    _randomize(theirs, gen)
    ours = HyperConnection(n, d, iters, hc_eps, rms_eps)
    ours.load_state_dict(theirs.state_dict())
    streams = torch.randn(2, 5, n, d, generator=gen) * 3.0
    with torch.no_grad():
        post_t, comb_t, coll_t = theirs(streams)
        post_o, comb_o, coll_o = ours(streams)
        torch.testing.assert_close(post_o, post_t, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(comb_o, comb_t, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(coll_o, coll_t, rtol=1e-6, atol=1e-5)
        # the residual mix of DeepseekV4DecoderLayer: post * y + comb^T @ X
        y = torch.randn(2, 5, d, generator=gen)
        mixed_t = post_t.unsqueeze(-1) * y.unsqueeze(-2) + torch.matmul(comb_t.transpose(-1, -2), streams)
        mixed_o = HyperConnection.mix(streams, post_o, comb_o, y)
        torch.testing.assert_close(mixed_o, mixed_t, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_hyper_head_matches_transformers(n: int) -> None:
    d = 16
    gen = torch.Generator().manual_seed(n)
    theirs = hf.DeepseekV4HyperHead(_hf_config(n, 3, d, 1e-6, 1e-6)).float()
    _randomize(theirs, gen)
    ours = HyperHead(n, d, 1e-6, 1e-6)
    ours.load_state_dict(theirs.state_dict())
    streams = torch.randn(3, 4, n, d, generator=gen)
    with torch.no_grad():
        torch.testing.assert_close(ours(streams), theirs(streams), rtol=1e-6, atol=1e-6)


def test_single_stream_is_a_plain_residual() -> None:
    x = torch.randn(2, 3, 1, 8)
    post, comb, collapsed = PlainResidual()(x)
    assert torch.equal(collapsed, x[..., 0, :])
    y = torch.randn(2, 3, 8)
    assert torch.equal(PlainResidual.mix(x, post, comb, y), x + y.unsqueeze(-2))
    assert torch.equal(PlainHead()(x), x[..., 0, :])
    with pytest.raises(ValueError):
        HyperConnection(1, 8, 3, 1e-6, 1e-6)
