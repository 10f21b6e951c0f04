"""Manifold-constrained hyper-connections (mHC) around a sub-layer, and the HyperHead.

The exact math of transformers' ``DeepseekV4HyperConnection`` / ``DeepseekV4HyperHead``
(docs/gguf.md §2, "Hyper-connection around sub-layer F"); parameter names match transformers so
that a state dict copies across. Streams have shape [..., n, d]. With n = 1 there are no parameters:
the wrapper is a plain pre-norm residual (``PlainResidual`` / ``PlainHead``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from strata_train.ops import rms


class HyperConnection(nn.Module):
    """Computes (post, comb, collapsed) from n streams; ``mix`` applies them after the sub-layer."""

    def __init__(self, n: int, d: int, sinkhorn_iters: int, hc_eps: float, rms_eps: float) -> None:
        super().__init__()
        if n < 2:
            raise ValueError("HyperConnection needs n >= 2 streams (n = 1 is PlainResidual)")
        self.n = n
        self.sinkhorn_iters = sinkhorn_iters
        self.hc_eps = hc_eps
        self.rms_eps = rms_eps
        self.fn = nn.Parameter(torch.randn((2 + n) * n, n * d) * 0.02)
        self.base = nn.Parameter(torch.zeros((2 + n) * n))
        self.scale = nn.Parameter(torch.ones(3))

    def forward(self, streams: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """streams [..., n, d] -> post [..., n], comb [..., n, n], collapsed [..., d]."""
        n = self.n
        flat = rms(streams.flatten(-2), self.rms_eps)
        mix = flat @ self.fn.t()
        pre_w, post_w, comb_w = mix.split([n, n, n * n], dim=-1)
        pre_b, post_b, comb_b = self.base.split([n, n, n * n])
        pre = torch.sigmoid(pre_w * self.scale[0] + pre_b) + self.hc_eps
        post = 2.0 * torch.sigmoid(post_w * self.scale[1] + post_b)
        comb_logits = comb_w.reshape(*comb_w.shape[:-1], n, n) * self.scale[2] + comb_b.reshape(n, n)
        comb = torch.softmax(comb_logits, dim=-1) + self.hc_eps
        comb = comb / (comb.sum(dim=-2, keepdim=True) + self.hc_eps)  # columns first
        for _ in range(self.sinkhorn_iters - 1):
            comb = comb / (comb.sum(dim=-1, keepdim=True) + self.hc_eps)  # rows
            comb = comb / (comb.sum(dim=-2, keepdim=True) + self.hc_eps)  # columns
        collapsed = (pre.unsqueeze(-1) * streams).sum(dim=-2)
        return post, comb, collapsed

    @staticmethod
    def mix(streams: Tensor, post: Tensor, comb: Tensor, y: Tensor) -> Tensor:
        """X'_k = post_k * y + sum_j comb[j, k] * X_j (comb consumed transposed)."""
        return post.unsqueeze(-1) * y.unsqueeze(-2) + comb.transpose(-1, -2) @ streams


class PlainResidual(nn.Module):
    """n = 1: collapsed = X, X' = X + y."""

    def forward(self, streams: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        ones = torch.ones(streams.shape[:-1], dtype=streams.dtype, device=streams.device)
        return ones, ones.unsqueeze(-1), streams[..., 0, :]

    @staticmethod
    def mix(streams: Tensor, post: Tensor, comb: Tensor, y: Tensor) -> Tensor:
        return streams + y.unsqueeze(-2)


class HyperHead(nn.Module):
    """Final collapse of the n streams: h = sum_s pre_s X_s,
    pre = sigmoid(fn @ rms(flat) * scale + base) + eps."""

    def __init__(self, n: int, d: int, hc_eps: float, rms_eps: float) -> None:
        super().__init__()
        if n < 2:
            raise ValueError("HyperHead needs n >= 2 streams (n = 1 is PlainHead)")
        self.n = n
        self.hc_eps = hc_eps
        self.rms_eps = rms_eps
        self.hc_fn = nn.Parameter(torch.randn(n, n * d) * 0.02)
        self.hc_base = nn.Parameter(torch.zeros(n))
        self.hc_scale = nn.Parameter(torch.ones(1))

    def forward(self, streams: Tensor) -> Tensor:
        flat = rms(streams.flatten(-2), self.rms_eps)
        pre = torch.sigmoid((flat @ self.hc_fn.t()) * self.hc_scale + self.hc_base) + self.hc_eps
        return (pre.unsqueeze(-1) * streams).sum(dim=-2)


class PlainHead(nn.Module):
    """n = 1: the single stream is the head input."""

    def forward(self, streams: Tensor) -> Tensor:
        return streams[..., 0, :]


def make_hyper_connection(n: int, d: int, sinkhorn_iters: int, hc_eps: float, rms_eps: float) -> nn.Module:
    return HyperConnection(n, d, sinkhorn_iters, hc_eps, rms_eps) if n > 1 else PlainResidual()


def make_hyper_head(n: int, d: int, hc_eps: float, rms_eps: float) -> nn.Module:
    return HyperHead(n, d, hc_eps, rms_eps) if n > 1 else PlainHead()
