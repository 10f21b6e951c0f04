"""The `strata` model for training: all rows at once, causal, the cell rule as a mask.

``forward(tokens)`` gives the next-token logits; ``forward(tokens, return_mtp=True)`` gives a
``StrataOutput`` with the MTP draft logits and the auxiliary losses too; ``losses(tokens)`` combines
them. The incremental, engine-shaped path over the same parameters is ``runner.ReferenceRunner``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, overload

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from strata_train.block import StrataBlock
from strata_train.config import StrataConfig
from strata_train.hyper_connections import make_hyper_head
from strata_train.mtp import MTPLayer
from strata_train.ops import RMSNorm


@dataclass
class StrataOutput:
    logits: Tensor  # [B, T, V]: row p predicts token p+1
    streams: Tensor  # [B, T, n, d]: the final main streams (what the MTP layer reads)
    mtp_logits: Tensor | None  # [B, T-1, Vr]: row p drafts token p+2 from streams p and token p+1
    indexer_loss: Tensor  # mean over layers of KL(attention || indexer)
    balance_loss: Tensor  # mean over MoE layers (MTP included) of E * sum_e f_e * mean p_e


class StrataModel(nn.Module):
    def __init__(self, cfg: StrataConfig, kv_int8: bool = True) -> None:
        """kv_int8: pass K and V through the int8 cell quantization (straight-through gradient), so
        training sees what inference reads; False trains on float K/V."""
        super().__init__()
        self.cfg = cfg
        self.kv_int8 = kv_int8
        self.token_embd = nn.Embedding(cfg.vocab_size, cfg.d)
        self.blk = nn.ModuleList(
            StrataBlock(cfg, cfg.sink_count, cfg.sliding_window, use_indexer=cfg.has_indexer)
            for _ in range(cfg.n_layers)
        )
        self.output_hc = make_hyper_head(cfg.hc_count, cfg.d, cfg.hc_eps, cfg.rms_eps)
        self.output_norm = RMSNorm(cfg.d, cfg.rms_eps)
        self.output = nn.Linear(cfg.d, cfg.vocab_size, bias=False)
        self.mtp = MTPLayer(cfg) if cfg.mtp else None
        self.reset_parameters()

    def reset_parameters(self, std: float = 0.02) -> None:
        """Training init: matrices N(0, std), norms 1, hc fn N(0, std), hc base 0, hc scale 1."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, 0.0, std)
        for name, p in self.named_parameters():
            if name.endswith("_exps"):
                nn.init.normal_(p, 0.0, std)

    def gguf_tensors(self) -> dict[str, Tensor]:
        """Detached float32 copies keyed by GGUF tensor name (what strata.convert writes)."""
        from strata_train.gguf_names import gguf_tensors

        return gguf_tensors(self)

    @property
    def n_streams(self) -> int:
        return self.cfg.hc_count

    def embed_streams(self, tokens: Tensor) -> Tensor:
        """tokens [...] -> streams [..., n, d], every stream the token embedding."""
        e = self.token_embd(tokens)
        return e.unsqueeze(-2).expand(*e.shape[:-1], self.n_streams, e.shape[-1]).contiguous()

    def head(self, streams: Tensor) -> Tensor:
        """Final streams [..., n, d] -> logits [..., V]."""
        return self.output(self.output_norm(self.output_hc(streams)))

    @overload
    def forward(self, tokens: Tensor, return_mtp: Literal[False] = ...) -> Tensor: ...

    @overload
    def forward(self, tokens: Tensor, return_mtp: Literal[True]) -> StrataOutput: ...

    def forward(self, tokens: Tensor, return_mtp: bool = False) -> Tensor | StrataOutput:
        """tokens [B, T] at positions 0..T-1."""
        if tokens.dim() != 2:
            raise ValueError(f"tokens must be [batch, time], got shape {tuple(tokens.shape)}")
        streams = self.embed_streams(tokens)
        index_losses, balances = [], []
        for block in self.blk:
            streams, index_loss, balance = block(streams, self.kv_int8)
            index_losses.append(index_loss)
            balances.append(balance)
        logits = self.head(streams)
        if not return_mtp:
            return logits
        mtp_logits = None
        if self.mtp is not None and tokens.shape[1] >= 2:
            x = self.mtp.inputs(self.token_embd(tokens[:, 1:]), streams[:, :-1])
            x, _, balance = self.mtp.block(x, self.kv_int8)
            balances.append(balance)
            mtp_logits = self.mtp.logits(x, self.output.weight)
        zero = logits.new_zeros(())
        return StrataOutput(
            logits=logits,
            streams=streams,
            mtp_logits=mtp_logits,
            indexer_loss=torch.stack(index_losses).mean() if index_losses else zero,
            balance_loss=torch.stack(balances).mean() if balances else zero,
        )

    def losses(self, tokens: Tensor) -> dict[str, Tensor]:
        """Next-token cross-entropy ("lm"), the MTP cross-entropy on token p+2 ("mtp", 0 without MTP;
        targets outside the restricted vocabulary are ignored), "indexer" and "balance"."""
        out = self.forward(tokens, return_mtp=True)
        v = self.cfg.vocab_size
        lm = F.cross_entropy(out.logits[:, :-1].reshape(-1, v), tokens[:, 1:].reshape(-1))
        mtp = lm.new_zeros(())
        if self.mtp is not None and out.mtp_logits is not None and tokens.shape[1] >= 3:
            targets = self.mtp.target_index(v)[tokens[:, 2:]]
            if bool((targets >= 0).any()):
                logits = out.mtp_logits[:, :-1]
                mtp = F.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100
                )
        return {"lm": lm, "mtp": mtp, "indexer": out.indexer_loss, "balance": out.balance_loss}
