"""A PyTorch reference of glm4moe's MTP (nextn) layer, the drafter (docs/gguf.md §4).

transformers' ``Glm4MoeForCausalLM`` ignores the nextn layer, so its math is written here from
llama.cpp's graph and vLLM's / SGLang's ``Glm4MoeMultiTokenPredictorLayer``; its decoder block is
transformers' own ``Glm4MoeDecoderLayer`` (passed in), so only the glue around it is ours:

    x = eh_proj @ concat(enorm(Emb[t']), hnorm(S))
    y = decoder_block(x)  at the row's position, causal over the layer's own rows
    logits = head @ shared_head_norm(y)

where S is the state the row starts from, already normalised the way its producer's head normalises
it: ``output_norm(h)`` for the main model's final hidden state h (what vLLM and SGLang pass on), and
``shared_head_norm(y)`` for the previous chain step's output y (SGLang's convention for chained
steps; vLLM passes y unnormalised).

Rows are given in cell order; row i attends to rows 0..i (the drafter's own cells, full causal).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


@dataclass
class GlmMtpWeights:
    eh_proj: Tensor  # [d, 2d]
    enorm: Tensor
    hnorm: Tensor
    shared_head_norm: Tensor
    embed: Tensor  # [V, d]: nextn.embed_tokens or the model's token_embd
    head: Tensor  # [V, d]: nextn.shared_head_head or the model's output
    output_norm: Tensor  # the main model's final norm


class GlmMtpReference:
    def __init__(self, block: nn.Module, rotary: nn.Module, w: GlmMtpWeights, eps: float) -> None:
        self.block = block.eval()
        self.rotary = rotary
        self.w = w
        self.eps = eps

    def state_from_main(self, h: Tensor) -> Tensor:
        """The start state of a first step: the main model's final hidden state h (before its norm)."""
        return rms_norm(h, self.w.output_norm, self.eps)

    def state_from_step(self, y: Tensor) -> Tensor:
        """The start state of a chained step: the previous step's block output y."""
        return rms_norm(y, self.w.shared_head_norm, self.eps)

    @torch.no_grad()
    def rows(self, states: Tensor, tokens: list[int], positions: list[int]) -> tuple[Tensor, Tensor]:
        """states [T, d] (normalised start states), the next token and the position of each row ->
        (draft logits [T, V], block outputs y [T, d])."""
        w = self.w
        emb = rms_norm(w.embed[torch.tensor(tokens)], w.enorm, self.eps)
        hid = rms_norm(states, w.hnorm, self.eps)
        x = torch.cat([emb, hid], dim=-1) @ w.eh_proj.T
        pos = torch.tensor([positions])
        cos_sin = self.rotary(x[None], pos)
        t = x.shape[0]
        mask = torch.full((t, t), float("-inf")).triu(1)[None, None]
        y = self.block(x[None], attention_mask=mask, position_ids=pos, position_embeddings=cos_sin)
        y = (y[0] if isinstance(y, tuple) else y)[0]
        logits = rms_norm(y, w.shared_head_norm, self.eps) @ w.head.T
        return logits, y
