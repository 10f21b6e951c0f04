"""Elementary operations of docs/gguf.md §2, shared by the training model and the incremental runner.

Everything is float32. Each function is the literal formula of the contract, written to be read.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

KV_BLOCK = 64  # K/V int8 cells carry one fp16 scale per 64 contiguous elements of a head vector
SOFTMAX_CHUNK = 64  # the inference softmax runs over chunks of 64 attended cells, merged max-first
ROUTE_WEIGHT_FLOOR = 2.0**-14  # renormalisation floor of the MoE weights


def rms(x: Tensor, eps: float) -> Tensor:
    """Unweighted RMS norm over the last axis: x * rsqrt(mean(x^2) + eps)."""
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps)


class RMSNorm(nn.Module):
    """Weighted RMS norm: rms(x) * w."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        return rms(x, self.eps) * self.weight


# ---------------------------------------------------------------------------------------- RoPE
def rope_cos_sin(positions: Tensor, rope_dim: int, theta: float) -> tuple[Tensor, Tensor]:
    """cos/sin of p * theta^(-2i/rope_dim) for i < rope_dim/2, shape [*positions.shape, rope_dim/2].

    The angles are formed in float64 and rounded once to float32, so the table does not depend on
    the order in which an implementation accumulates them.
    """
    i = torch.arange(rope_dim // 2, dtype=torch.float64)
    inv_freq = theta ** (-2.0 * i / rope_dim)
    angles = positions.to(torch.float64).unsqueeze(-1) * inv_freq
    return angles.cos().to(torch.float32), angles.sin().to(torch.float32)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """NEOX (half-split) rotation of the first rope_dim dims of each head vector.

    x: [..., heads, Dh]; cos/sin: [..., rope_dim/2] (broadcast over heads). Dims past rope_dim pass.
    """
    half = cos.shape[-1]
    cos = cos.unsqueeze(-2)
    sin = sin.unsqueeze(-2)
    x1 = x[..., :half]
    x2 = x[..., half : 2 * half]
    rest = x[..., 2 * half :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


# ------------------------------------------------------------------------------- int8 K/V cells
def _kv_blocks(x: Tensor) -> tuple[Tensor, int]:
    """[..., Dh] -> [..., nblk, 64] zero-padded (zeros change no absmax); returns Dh too."""
    dh = x.shape[-1]
    nblk = (dh + KV_BLOCK - 1) // KV_BLOCK
    pad = nblk * KV_BLOCK - dh
    if pad:
        x = torch.nn.functional.pad(x, (0, pad))
    return x.reshape(*x.shape[:-1], nblk, KV_BLOCK), dh


def kv_quantize(x: Tensor) -> tuple[Tensor, Tensor]:
    """Quantize head vectors [..., Dh] to (int8 [..., Dh], fp16 scales [..., ceil(Dh/64)]).

    s16 = fp16(absmax/127); s = float(s16); q = clamp(round_half_even(x / s), -127, 127), 0 if s = 0.
    """
    xb, dh = _kv_blocks(x.to(torch.float32))
    s16 = (xb.abs().amax(dim=-1) / 127.0).to(torch.float16)
    s = s16.to(torch.float32).unsqueeze(-1)
    nonzero = s > 0
    q = torch.where(nonzero, torch.clamp(torch.round(xb / torch.where(nonzero, s, 1.0)), -127, 127), 0.0)
    q = q.reshape(*q.shape[:-2], -1)[..., :dh].to(torch.int8)
    return q, s16


def kv_dequantize(q: Tensor, s16: Tensor) -> Tensor:
    """The value the attention reads: q * s."""
    qb, dh = _kv_blocks(q.to(torch.float32))
    out = qb * s16.to(torch.float32).unsqueeze(-1)
    return out.reshape(*out.shape[:-2], -1)[..., :dh]


def kv_fake_quant(x: Tensor, straight_through: bool = True) -> Tensor:
    """dequantize(quantize(x)); with straight_through the backward pass is the identity (STE)."""
    with torch.no_grad():
        y = kv_dequantize(*kv_quantize(x))
    if straight_through:
        return x + (y - x).detach()
    return y


# ------------------------------------------------------------------------------ chunked softmax
def chunked_softmax_attention(scores: Tensor, values: Tensor, chunk: int = SOFTMAX_CHUNK) -> Tensor:
    """softmax(scores) @ values over the attended list, the inference way.

    scores: [H, L] (list order), values: [H, L, Dv]. Per chunk of `chunk` entries: m = max,
    l = sum e^(s-m), o = sum e^(s-m) v; merged max-first: M = max m_c,
    out = sum e^(m_c-M) o_c / sum e^(m_c-M) l_c.
    """
    n = scores.shape[-1]
    if n == 0:
        raise ValueError("attention over an empty cell list")
    ms, ls, os = [], [], []
    for start in range(0, n, chunk):
        s = scores[:, start : start + chunk]
        m = s.amax(dim=-1)
        e = torch.exp(s - m.unsqueeze(-1))
        ms.append(m)
        ls.append(e.sum(dim=-1))
        os.append(torch.einsum("hl,hld->hd", e, values[:, start : start + chunk]))
    m_all = torch.stack(ms)  # [C, H]
    big_m = m_all.amax(dim=0)
    f = torch.exp(m_all - big_m)
    num = (f.unsqueeze(-1) * torch.stack(os)).sum(dim=0)
    den = (f * torch.stack(ls)).sum(dim=0)
    return num / den.unsqueeze(-1)


# ------------------------------------------------------------------------------------- routing
def select_top_k(probs: Tensor, k: int) -> Tensor:
    """Indices of the k largest entries along the last axis, ties to the lower index.

    A stable descending sort keeps equal values in index order, which is the tie rule.
    """
    order = torch.sort(probs, dim=-1, descending=True, stable=True).indices
    return order[..., :k]


def renormalise(selected_probs: Tensor) -> Tensor:
    """w_i = p_i / max(sum of the selected p, 2^-14)."""
    total = selected_probs.sum(dim=-1, keepdim=True)
    return selected_probs / torch.clamp(total, min=ROUTE_WEIGHT_FLOOR)
