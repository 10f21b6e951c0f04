"""One strata block: hyper-connection -> attention -> hyper-connection -> MoE (docs/gguf.md §2)."""

from __future__ import annotations

from torch import Tensor, nn

from strata_train.attention import Attention
from strata_train.config import StrataConfig
from strata_train.hyper_connections import make_hyper_connection
from strata_train.moe import MoE
from strata_train.ops import RMSNorm


class StrataBlock(nn.Module):
    def __init__(self, cfg: StrataConfig, sink: int, window: int, use_indexer: bool) -> None:
        super().__init__()
        n, d = cfg.hc_count, cfg.d
        self.hc_attn = make_hyper_connection(n, d, cfg.hc_sinkhorn_iters, cfg.hc_eps, cfg.rms_eps)
        self.attn_norm = RMSNorm(d, cfg.rms_eps)
        self.attn = Attention(cfg, sink, window, use_indexer)
        self.hc_ffn = make_hyper_connection(n, d, cfg.hc_sinkhorn_iters, cfg.hc_eps, cfg.rms_eps)
        self.ffn_norm = RMSNorm(d, cfg.rms_eps)
        self.moe = MoE(cfg)

    def forward(self, streams: Tensor, kv_int8: bool) -> tuple[Tensor, Tensor, Tensor]:
        """Training path: streams [B, T, n, d] -> (streams, indexer loss, router balance loss)."""
        post, comb, collapsed = self.hc_attn(streams)
        y, index_loss = self.attn(self.attn_norm(collapsed), kv_int8)
        streams = self.hc_attn.mix(streams, post, comb, y)
        post, comb, collapsed = self.hc_ffn(streams)
        y, balance = self.moe(self.ffn_norm(collapsed))
        return self.hc_ffn.mix(streams, post, comb, y), index_loss, balance
