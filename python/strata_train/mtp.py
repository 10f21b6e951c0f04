"""The MTP (next-n) layer: drafts token p+2 from the main model's streams at p and token p+1.

docs/gguf.md §2 "MTP step": X_s = fc_embedding(enorm(Emb[t'])) + fc_hidden(hnorm(H_s)); one strata
block whose attention reads only its own cells (sinks + window, never the indexer); the MTP
HyperHead; shared_head_norm; a head restricted to ``vocab_ids`` (rows of output.weight).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from strata_train.block import StrataBlock
from strata_train.config import StrataConfig
from strata_train.hyper_connections import make_hyper_head
from strata_train.ops import RMSNorm


class MTPLayer(nn.Module):
    vocab_ids: Tensor

    def __init__(self, cfg: StrataConfig) -> None:
        super().__init__()
        d = cfg.d
        self.enorm = RMSNorm(d, cfg.rms_eps)
        self.hnorm = RMSNorm(d, cfg.rms_eps)
        self.fc_embedding = nn.Linear(d, d, bias=False)
        self.fc_hidden = nn.Linear(d, d, bias=False)
        self.block = StrataBlock(cfg, cfg.sink_count, cfg.sliding_window, use_indexer=False)
        self.hc_head = make_hyper_head(cfg.hc_count, d, cfg.hc_eps, cfg.rms_eps)
        self.shared_head_norm = RMSNorm(d, cfg.rms_eps)
        self.register_buffer("vocab_ids", torch.tensor(cfg.mtp_vocab_list(), dtype=torch.long))

    def inputs(self, embedding: Tensor, streams: Tensor) -> Tensor:
        """embedding [..., d] of the next token, streams [..., n, d] -> MTP input streams [..., n, d]."""
        e = self.fc_embedding(self.enorm(embedding))
        return e.unsqueeze(-2) + self.fc_hidden(self.hnorm(streams))

    def logits(self, streams: Tensor, output_weight: Tensor) -> Tensor:
        """MTP output streams [..., n, d] -> draft logits over the restricted vocabulary [..., Vr]."""
        h = self.shared_head_norm(self.hc_head(streams))
        return h @ output_weight[self.vocab_ids].t()

    def target_index(self, vocab_size: int) -> Tensor:
        """[V] long: each token's row in the restricted head, -100 (ignored by cross_entropy) if absent."""
        table = torch.full((vocab_size,), -100, dtype=torch.long, device=self.vocab_ids.device)
        table[self.vocab_ids] = torch.arange(self.vocab_ids.numel(), device=self.vocab_ids.device)
        return table
