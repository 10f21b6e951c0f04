"""The lightning indexer: which remaining cells a row reads (docs/gguf.md §2).

I(c) = sum_j w_j * ReLU(qI_j . kI_c) with qI = attn_q @ x (Hi heads of Di), w = weights @ x and
kI_c = attn_k @ x_c (one key per cell, shared by the heads, cached in f32, no RoPE).

Training (docs/reference.md): the top-T choice is not differentiable, so the indexer learns from an
auxiliary loss, KL(attention || indexer) over the indexer's pool of cells (DeepSeek-V3.2's recipe),
on a detached input so that the loss moves only the indexer.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class Indexer(nn.Module):
    def __init__(self, d: int, heads: int, dim: int) -> None:
        super().__init__()
        self.heads = heads
        self.dim = dim
        self.attn_q = nn.Linear(d, heads * dim, bias=False)
        self.attn_k = nn.Linear(d, dim, bias=False)
        self.weights = nn.Linear(d, heads, bias=False)

    def keys(self, x: Tensor) -> Tensor:
        """[..., d] -> [..., Di]: the key cached for the cell written by this row."""
        return self.attn_k(x)

    def queries(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """[..., d] -> (qI [..., Hi, Di], w [..., Hi])."""
        return self.attn_q(x).unflatten(-1, (self.heads, self.dim)), self.weights(x)

    @staticmethod
    def scores(q: Tensor, w: Tensor, keys: Tensor) -> Tensor:
        """q [..., Hi, Di], w [..., Hi], keys [..., C, Di] -> I [..., C]."""
        dots = torch.einsum("...hd,...cd->...hc", q, keys)
        return torch.einsum("...h,...hc->...c", w, torch.relu(dots))

    def score_matrix(self, x: Tensor) -> Tensor:
        """Training: x [B, T, d] -> I [B, T(rows), T(cells)] for every pair (masked by the caller)."""
        q, w = self.queries(x)
        return self.scores(q, w, self.keys(x).unsqueeze(1))


def indexer_kl_loss(index_scores: Tensor, attn_scores: Tensor, eligible: Tensor) -> Tensor:
    """KL(target || softmax(I)) over each row's eligible cells, averaged over rows that have any.

    index_scores: [B, T, T]; attn_scores: [B, H, T, T] (detached here; the target is the head-mean of
    softmax over the eligible cells); eligible: [T, T] bool.
    """
    rows = eligible.any(dim=-1)  # [T]
    if not bool(rows.any()):
        return index_scores.new_zeros(())
    neg_inf = float("-inf")
    target = torch.softmax(attn_scores.detach().masked_fill(~eligible, neg_inf)[..., rows, :], dim=-1).mean(1)
    log_q = torch.log_softmax(index_scores.masked_fill(~eligible, neg_inf)[..., rows, :], dim=-1)
    el = eligible[rows].expand_as(target)
    log_t = torch.log(target.clamp_min(1e-30))
    kl = torch.where(el, target * (log_t - log_q.masked_fill(~el, 0.0)), torch.zeros_like(target))
    return kl.sum(-1).mean()
