"""The training forward of the GPU trainer: ``StrataModel.losses``'s math over the same parameters,
written to keep a GPU busy (docs/demo-model.md, "Throughput").

What differs from the reference forward (model.py, attention.py, moe.py), none of it in the math:
- RoPE tables and cell masks are built once per (length, device) and kept on the device; the
  reference rebuilds them on the CPU and copies them on every call (a host-device sync each);
- attention runs through ``F.scaled_dot_product_attention`` with the cell mask instead of
  materialising the probabilities; the indexer's KL target, which needs the attention scores, is
  computed without gradient, for the rows that have indexer cells only;
- the routed experts run as three batched matmuls over tokens grouped by expert (each group padded
  to the busiest expert) instead of a Python loop over experts with a host sync per expert;
- the MTP loss is a masked mean with no host sync (equal to the reference whenever a target lies in
  the restricted vocabulary; 0 instead of NaN when none does).
tests/python/test_train_smoke.py checks losses and gradients against ``StrataModel.losses``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from strata_train.attention import Attention
from strata_train.block import StrataBlock
from strata_train.cell_selection import fixed_mask, indexer_eligible, top_k_mask
from strata_train.model import StrataModel
from strata_train.moe import MoE
from strata_train.ops import apply_rope, kv_fake_quant, rope_cos_sin

EXPERT_CAPACITY_ROUND = 16  # expert groups are padded to a multiple of this (fewer distinct shapes)


class DeviceCache:
    """Tensors that depend only on shapes and hyper-parameters, built once per device."""

    def __init__(self) -> None:
        self._store: dict[tuple[Any, ...], Any] = {}

    def get(self, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        if key not in self._store:
            self._store[key] = build()
        return self._store[key]

    def rope(
        self, n: int, offset: int, rope_dim: int, theta: float, device: torch.device
    ) -> tuple[Tensor, Tensor]:
        """cos/sin [n, rope_dim/2] of positions offset .. offset+n-1 (ops.rope_cos_sin)."""

        def build() -> tuple[Tensor, Tensor]:
            cos, sin = rope_cos_sin(torch.arange(offset, offset + n), rope_dim, theta)
            return cos.to(device), sin.to(device)

        return self.get(("rope", n, offset, rope_dim, theta, str(device)), build)

    def fixed_mask(self, n: int, sink: int, window: int, device: torch.device) -> Tensor:
        return self.get(
            ("fixed", n, sink, window, str(device)), lambda: fixed_mask(n, sink, window).to(device)
        )

    def eligible(self, n: int, sink: int, window: int, device: torch.device) -> tuple[Tensor, int]:
        """The indexer's pool [n, n] and the first row that has any cell in it (n when none does)."""

        def build() -> tuple[Tensor, int]:
            el = indexer_eligible(n, sink, window)
            rows = torch.nonzero(el.any(dim=-1)).flatten()
            return el.to(device), int(rows[0]) if rows.numel() else n

        return self.get(("eligible", n, sink, window, str(device)), build)

    def target_index(self, model: StrataModel, device: torch.device) -> Tensor:
        assert model.mtp is not None
        return self.get(
            ("mtp_targets", id(model), str(device)),
            lambda: model.mtp.target_index(model.cfg.vocab_size).to(device),
        )  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------ attention
def project(
    attn: Attention, x: Tensor, cos: Tensor, sin: Tensor
) -> tuple[Tensor, Tensor | None, Tensor, Tensor]:
    """Attention.project with precomputed RoPE tables: x [B, T, d] -> q, gate [B, T, Hq, Dh], k, v
    [B, T, Hkv, Dh]."""
    qg = attn.attn_q(x)
    if attn.gated:
        qg = qg.unflatten(-1, (attn.n_heads, 2, attn.head_dim))
        q, gate = qg[..., 0, :], qg[..., 1, :]
    else:
        q, gate = qg.unflatten(-1, (attn.n_heads, attn.head_dim)), None
    k = attn.attn_k(x).unflatten(-1, (attn.n_kv_heads, attn.head_dim))
    v = attn.attn_v(x).unflatten(-1, (attn.n_kv_heads, attn.head_dim))
    q = attn.attn_q_norm(q)
    k = attn.attn_k_norm(k)
    return apply_rope(q, cos, sin), gate, apply_rope(k, cos, sin), v


def cells_kv(attn: Attention, k: Tensor, v: Tensor, kv_int8: bool) -> tuple[Tensor, Tensor]:
    """What the cells hold (int8 round trip, straight-through gradient), one copy per query head."""
    if kv_int8:
        k, v = kv_fake_quant(k), kv_fake_quant(v)
    return k.repeat_interleave(attn.group, dim=-2), v.repeat_interleave(attn.group, dim=-2)


def indexer_kl(index_scores: Tensor, q: Tensor, k: Tensor, eligible: Tensor, first_row: int) -> Tensor:
    """indexer.indexer_kl_loss for rows first_row.. (the rows with indexer cells), the target (head
    mean of the attention softmax over the pool) computed without gradient."""
    el = eligible[first_row:]
    with torch.no_grad():
        scores = torch.einsum("bphd,bchd->bhpc", q[:, first_row:], k) / math.sqrt(q.shape[-1])
        target = torch.softmax(scores.float().masked_fill(~el, float("-inf")), dim=-1).mean(1)
        log_t = torch.log(target.clamp_min(1e-30))
    log_q = torch.log_softmax(index_scores[:, first_row:].float().masked_fill(~el, float("-inf")), dim=-1)
    kl = torch.where(el, target * (log_t - log_q.masked_fill(~el, 0.0)), torch.zeros_like(target))
    return kl.sum(-1).mean()


def attention(attn: Attention, x: Tensor, kv_int8: bool, cache: DeviceCache) -> tuple[Tensor, Tensor]:
    """Training attention over positions 0..T-1: x [B, T, d] (attn_norm-ed) -> (out, indexer loss)."""
    n = x.shape[1]
    cos, sin = cache.rope(n, 0, attn.rope_dim, attn.rope_theta, x.device)
    q, gate, k, v = project(attn, x, cos, sin)
    k, v = cells_kv(attn, k, v, kv_int8)
    mask = cache.fixed_mask(n, attn.sink, attn.window, x.device)
    loss = x.new_zeros((), dtype=torch.float32)
    if attn.indexer is not None and attn.window > 0:
        index_scores = attn.indexer.score_matrix(x.detach())  # [B, T, T]
        eligible, first_row = cache.eligible(n, attn.sink, attn.window, x.device)
        if first_row < n:
            loss = indexer_kl(index_scores, q, k, eligible, first_row)
        picked = top_k_mask(index_scores.detach(), eligible.expand_as(index_scores), attn.top_k)
        mask = (mask | picked).unsqueeze(1)  # [B, 1, T, T]
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask
    ).transpose(1, 2)
    return attn.finish(out, gate), loss


# ------------------------------------------------------------------------------------------ MoE
def moe_forward(moe: MoE, x: Tensor) -> tuple[Tensor, Tensor]:
    """MoE.forward with the routed experts batched: x [..., d] -> (y, balance loss)."""
    shape = x.shape
    flat = x.reshape(-1, shape[-1])
    probs, ids, weights = moe.route(flat)
    n, k = ids.shape
    e, d = moe.n_experts, shape[-1]
    expert_of = ids.reshape(-1)  # entry i*k + j: token i's j-th expert
    counts = torch.bincount(expert_of, minlength=e)
    cap = int(counts.max())  # the layer's one host sync: the size of the padded groups
    cap = -(-cap // EXPERT_CAPACITY_ROUND) * EXPERT_CAPACITY_ROUND
    order = torch.argsort(expert_of, stable=True)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.empty_like(order)
    slot[order] = torch.arange(n * k, device=x.device) - starts[expert_of[order]]
    dest = expert_of * cap + slot  # row of each (token, rank) entry in the [E * cap] grouped layout
    grouped = flat.new_zeros(e * cap, d).index_copy(0, dest, flat.repeat_interleave(k, dim=0)).view(e, cap, d)
    hidden = F.silu(torch.bmm(grouped, moe.ffn_gate_exps.transpose(1, 2))) * torch.bmm(
        grouped, moe.ffn_up_exps.transpose(1, 2)
    )
    out = torch.bmm(hidden, moe.ffn_down_exps.transpose(1, 2)).reshape(e * cap, d)[dest]
    y = (out.view(n, k, d) * weights.unsqueeze(-1)).sum(1)
    if moe.shared is not None:
        y = y + moe.shared(flat)
    load = counts.to(probs.dtype) / ids.numel()
    balance = e * (load * probs.mean(0)).sum()
    return y.reshape(shape), balance


# ---------------------------------------------------------------------------------------- model
def block_forward(
    block: StrataBlock, streams: Tensor, kv_int8: bool, cache: DeviceCache
) -> tuple[Tensor, Tensor, Tensor]:
    """StrataBlock.forward: streams [B, T, n, d] -> (streams, indexer loss, balance loss)."""
    post, comb, collapsed = block.hc_attn(streams)
    y, index_loss = attention(block.attn, block.attn_norm(collapsed), kv_int8, cache)
    streams = block.hc_attn.mix(streams, post, comb, y)
    post, comb, collapsed = block.hc_ffn(streams)
    y, balance = moe_forward(block.moe, block.ffn_norm(collapsed))
    return block.hc_ffn.mix(streams, post, comb, y), index_loss, balance


def main_streams(
    model: StrataModel, tokens: Tensor, cache: DeviceCache
) -> tuple[Tensor, list[Tensor], list[Tensor]]:
    """Final main streams [B, T, n, d] and the per-layer indexer and balance losses."""
    streams = model.embed_streams(tokens)
    index_losses, balances = [], []
    for block in model.blk:
        streams, index_loss, balance = block_forward(block, streams, model.kv_int8, cache)
        index_losses.append(index_loss)
        balances.append(balance)
    return streams, index_losses, balances


def train_losses(model: StrataModel, tokens: Tensor, cache: DeviceCache) -> dict[str, Tensor]:
    """Same keys and values as ``StrataModel.losses(tokens)``: "lm", "mtp", "indexer", "balance"."""
    if tokens.dim() != 2 or tokens.shape[1] < 3:
        raise ValueError(f"tokens must be [batch, time >= 3], got shape {tuple(tokens.shape)}")
    v = model.cfg.vocab_size
    streams, index_losses, balances = main_streams(model, tokens, cache)
    logits = model.head(streams[:, :-1])  # the last row predicts nothing inside the crop
    lm = F.cross_entropy(logits.reshape(-1, v).float(), tokens[:, 1:].reshape(-1))
    mtp = lm.new_zeros(())
    if model.mtp is not None:
        x = model.mtp.inputs(model.token_embd(tokens[:, 1:]), streams[:, :-1])
        x, _, balance = block_forward(model.mtp.block, x, model.kv_int8, cache)
        balances.append(balance)
        mtp_logits = model.mtp.logits(x[:, :-1], model.output.weight)  # row p drafts token p+2
        targets = cache.target_index(model, tokens.device)[tokens[:, 2:]].reshape(-1)
        valid = targets >= 0
        nll = F.cross_entropy(
            mtp_logits.reshape(-1, mtp_logits.shape[-1]).float(), targets, ignore_index=-100, reduction="sum"
        )
        mtp = nll / valid.sum().clamp_min(1)
    zero = lm.new_zeros(())
    return {
        "lm": lm,
        "mtp": mtp,
        "indexer": torch.stack(index_losses).mean() if index_losses else zero,
        "balance": torch.stack(balances).mean() if balances else zero,
    }
