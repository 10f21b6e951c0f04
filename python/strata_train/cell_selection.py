"""Which cells a row attends to (docs/gguf.md §2, "Cells attended by the row at p").

Two independent formulations of the same rule: ``select_cells`` builds the explicit ascending list of
one row the way the engine does (inference path); ``attention_mask`` builds the equivalent boolean
mask for every row at once (training path). The parity tests compare one against the other.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def select_cells(
    p: int, sink: int, window: int, index_scores: Sequence[float] | None, top_k: int
) -> list[int]:
    """The ascending cell ids the row at position p attends to.

    window = 0: every cell c <= p. Otherwise the sinks [0, min(sink, p+1)), the window (p-window, p]
    and, when index_scores (one score per cell 0..p) are given, the top_k remaining cells by score
    (ties to the lower id; all of them when fewer remain).
    """
    if window == 0:
        return list(range(p + 1))
    fixed = set(range(min(sink, p + 1))) | set(range(max(0, p - window + 1), p + 1))
    if index_scores is not None and top_k > 0:
        if len(index_scores) != p + 1:
            raise ValueError(f"index_scores must hold one score per cell 0..{p}, got {len(index_scores)}")
        remaining = [c for c in range(p + 1) if c not in fixed]
        ranked = sorted(remaining, key=lambda c: (-float(index_scores[c]), c))
        fixed.update(ranked[:top_k])
    return sorted(fixed)


def fixed_mask(n_rows: int, sink: int, window: int) -> Tensor:
    """[rows, cells] bool: causal; with window > 0 only the sinks and the local window."""
    p = torch.arange(n_rows).unsqueeze(1)
    c = torch.arange(n_rows).unsqueeze(0)
    causal = c <= p
    if window == 0:
        return causal
    return causal & ((c < sink) | (c > p - window))


def indexer_eligible(n_rows: int, sink: int, window: int) -> Tensor:
    """[rows, cells] bool: causal cells that are neither sinks nor in the window (the indexer's pool)."""
    p = torch.arange(n_rows).unsqueeze(1)
    c = torch.arange(n_rows).unsqueeze(0)
    return (c <= p) & ~fixed_mask(n_rows, sink, window)


def top_k_mask(scores: Tensor, eligible: Tensor, top_k: int) -> Tensor:
    """[..., rows, cells] bool: the top_k eligible cells of each row by score, ties to the lower id."""
    masked = scores.masked_fill(~eligible, float("-inf"))
    order = torch.sort(masked, dim=-1, descending=True, stable=True).indices
    ranks = torch.empty_like(order)
    ranks.scatter_(-1, order, torch.arange(order.shape[-1], device=order.device).expand_as(order))
    return eligible & (ranks < top_k)


def attention_mask(n_rows: int, sink: int, window: int, index_scores: Tensor | None, top_k: int) -> Tensor:
    """The training-path equivalent of ``select_cells`` for rows 0..n_rows-1 (positions = row ids).

    index_scores: [..., rows, cells] indexer scores or None; the result broadcasts to it.
    """
    mask = fixed_mask(n_rows, sink, window)
    if window == 0 or index_scores is None or top_k == 0:
        return mask
    eligible = indexer_eligible(n_rows, sink, window).to(index_scores.device)
    return mask.to(index_scores.device) | top_k_mask(index_scores, eligible.expand_as(index_scores), top_k)
