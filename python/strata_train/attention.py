"""Gated GQA attention with q/k RMS norms, NEOX RoPE, int8 K/V and sink + window + indexer cells.

docs/gguf.md §2 "Attention (QSA)". ``project`` is shared by both paths; ``forward`` is the training
path (all rows at once, the cell rule as a mask, plain softmax); the incremental runner
(runner.py) gathers explicit cell lists and runs the chunked softmax instead.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from strata_train.cell_selection import attention_mask, indexer_eligible
from strata_train.config import StrataConfig
from strata_train.indexer import Indexer, indexer_kl_loss
from strata_train.ops import RMSNorm, apply_rope, kv_fake_quant, rope_cos_sin


class Attention(nn.Module):
    def __init__(self, cfg: StrataConfig, sink: int, window: int, use_indexer: bool) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.n_kv_heads = cfg.n_kv_heads
        self.head_dim = cfg.head_dim
        self.gated = cfg.gated
        self.rope_dim = cfg.rope_dim
        self.rope_theta = cfg.rope_theta
        self.sink = sink
        self.window = window
        self.top_k = cfg.indexer_top_k if use_indexer else 0
        q_rows = cfg.n_heads * cfg.head_dim * (2 if cfg.gated else 1)
        self.attn_q = nn.Linear(cfg.d, q_rows, bias=False)
        self.attn_k = nn.Linear(cfg.d, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.attn_v = nn.Linear(cfg.d, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.attn_q_norm = RMSNorm(cfg.head_dim, cfg.rms_eps)
        self.attn_k_norm = RMSNorm(cfg.head_dim, cfg.rms_eps)
        self.attn_output = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.d, bias=False)
        self.indexer = Indexer(cfg.d, cfg.indexer_heads, cfg.indexer_dim) if use_indexer else None

    @property
    def group(self) -> int:
        """Query heads per KV head; query head h reads KV head h // group."""
        return self.n_heads // self.n_kv_heads

    def project(self, x: Tensor, positions: Tensor) -> tuple[Tensor, Tensor | None, Tensor, Tensor]:
        """x [..., d] (already attn_norm-ed), positions [...] -> q, gate, k, v per head.

        q/gate: [..., Hq, Dh]; k/v: [..., Hkv, Dh]; q and k RMS-normed then rotated at their position.
        """
        qg = self.attn_q(x)
        if self.gated:
            qg = qg.unflatten(-1, (self.n_heads, 2, self.head_dim))
            q, gate = qg[..., 0, :], qg[..., 1, :]
        else:
            q, gate = qg.unflatten(-1, (self.n_heads, self.head_dim)), None
        k = self.attn_k(x).unflatten(-1, (self.n_kv_heads, self.head_dim))
        v = self.attn_v(x).unflatten(-1, (self.n_kv_heads, self.head_dim))
        q = self.attn_q_norm(q)
        k = self.attn_k_norm(k)
        cos, sin = rope_cos_sin(positions, self.rope_dim, self.rope_theta)
        cos, sin = cos.to(x.device), sin.to(x.device)
        return apply_rope(q, cos, sin), gate, apply_rope(k, cos, sin), v

    def finish(self, heads_out: Tensor, gate: Tensor | None) -> Tensor:
        """[..., Hq, Dh] -> [..., d]: the sigmoid gate (if any), then attn_output."""
        if gate is not None:
            heads_out = heads_out * torch.sigmoid(gate)
        return self.attn_output(heads_out.flatten(-2))

    def forward(self, x: Tensor, kv_int8: bool) -> tuple[Tensor, Tensor]:
        """Training path over positions 0..T-1: x [B, T, d] -> (out [B, T, d], indexer loss)."""
        n_rows = x.shape[1]
        positions = torch.arange(n_rows, device=x.device)
        q, gate, k, v = self.project(x, positions)
        if kv_int8:
            k, v = kv_fake_quant(k), kv_fake_quant(v)
        k = k.repeat_interleave(self.group, dim=-2)
        v = v.repeat_interleave(self.group, dim=-2)
        scores = torch.einsum("bphd,bchd->bhpc", q, k) / math.sqrt(self.head_dim)

        index_scores = None
        loss = x.new_zeros(())
        if self.indexer is not None and self.window > 0:
            index_scores = self.indexer.score_matrix(x.detach())
            eligible = indexer_eligible(n_rows, self.sink, self.window).to(x.device)
            loss = indexer_kl_loss(index_scores, scores, eligible)
            index_scores = index_scores.detach()
        mask = attention_mask(n_rows, self.sink, self.window, index_scores, self.top_k).to(x.device)
        if mask.dim() == 3:
            mask = mask.unsqueeze(1)  # [B, 1, T, T]
        probs = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        out = torch.einsum("bhpc,bchd->bphd", probs, v)
        return self.finish(out, gate), loss
