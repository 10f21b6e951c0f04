"""Mixture of experts: softmax top-K routing renormalised with a 2^-14 floor, SwiGLU experts and a
sigmoid-gated shared expert (docs/gguf.md §2 "MoE")."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from strata_train.config import StrataConfig
from strata_train.ops import renormalise, select_top_k


class SharedExpert(nn.Module):
    def __init__(self, d: int, ffn: int) -> None:
        super().__init__()
        self.ffn_gate_shexp = nn.Linear(d, ffn, bias=False)
        self.ffn_up_shexp = nn.Linear(d, ffn, bias=False)
        self.ffn_down_shexp = nn.Linear(ffn, d, bias=False)
        self.ffn_gate_inp_shexp = nn.Linear(d, 1, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        hidden = F.silu(self.ffn_gate_shexp(x)) * self.ffn_up_shexp(x)
        return torch.sigmoid(self.ffn_gate_inp_shexp(x)) * self.ffn_down_shexp(hidden)


class MoE(nn.Module):
    def __init__(self, cfg: StrataConfig) -> None:
        super().__init__()
        e, f, d = cfg.n_experts, cfg.expert_ffn, cfg.d
        self.n_experts = e
        self.n_used = cfg.n_experts_used
        self.ffn_gate_inp = nn.Linear(d, e, bias=False)  # router
        self.ffn_gate_exps = nn.Parameter(torch.randn(e, f, d) * 0.02)
        self.ffn_up_exps = nn.Parameter(torch.randn(e, f, d) * 0.02)
        self.ffn_down_exps = nn.Parameter(torch.randn(e, d, f) * 0.02)
        self.shared = SharedExpert(d, cfg.shared_ffn) if cfg.shared_ffn > 0 else None

    def route(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """x [..., d] -> (probs [..., E], ids [..., K] in rank order, weights [..., K])."""
        probs = torch.softmax(self.ffn_gate_inp(x), dim=-1)
        ids = select_top_k(probs.detach(), self.n_used)
        return probs, ids, renormalise(probs.gather(-1, ids))

    def expert(self, e: int, x: Tensor) -> Tensor:
        """SwiGLU expert e: down_e(silu(gate_e x) * up_e x)."""
        hidden = F.silu(x @ self.ffn_gate_exps[e].t()) * (x @ self.ffn_up_exps[e].t())
        return hidden @ self.ffn_down_exps[e].t()

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Training path: x [..., d] -> (y [..., d], load-balancing loss E * sum_e f_e * mean p_e)."""
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        probs, ids, weights = self.route(flat)
        y = torch.zeros_like(flat)
        for e in range(self.n_experts):
            rows, slot = torch.where(ids == e)
            if rows.numel():
                y = y.index_add(0, rows, weights[rows, slot].unsqueeze(-1) * self.expert(e, flat[rows]))
        if self.shared is not None:
            y = y + self.shared(flat)
        load = torch.bincount(ids.flatten(), minlength=self.n_experts).to(flat.dtype) / ids.numel()
        balance = self.n_experts * (load * probs.mean(0)).sum()
        return y.reshape(shape), balance

    def forward_rows(self, x: Tensor) -> Tensor:
        """Inference path, one row at a time: y = sum over ranks of w_i * expert_i(x) + shared."""
        out = []
        for row in x.reshape(-1, x.shape[-1]):
            _, ids, weights = self.route(row)
            y = torch.zeros_like(row)
            for e, w in zip(ids.tolist(), weights, strict=True):
                y = y + w * self.expert(e, row)
            if self.shared is not None:
                y = y + self.shared(row)
            out.append(y)
        return torch.stack(out).reshape(x.shape)
