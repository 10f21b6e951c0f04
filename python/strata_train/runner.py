"""The incremental reference runner: what the C++ engine computes, one row at a time, in float32.

It holds KV cells indexed by cell id (= position; one sequence) as the engine stores them (int8 with
fp16 scales per 64 elements for `strata`, float32 for `qwen3moe`), builds each row's explicit cell
list (sinks, window, indexer top-T), runs the softmax in chunks of 64 merged max-first, routes
experts row by row in rank order, and keeps the MTP layer's own cells. Deterministic and slow on
purpose: it is the yardstick, not an engine.

Typical use::

    run = ReferenceRunner.from_gguf("model.gguf")
    out = run.prefill(prompt)                  # logits [P, V], streams [P, n, d]
    t = int(out.logits[-1].argmax())
    chain = run.mtp_chain(out.streams[-1], t, pos=run.n_past - 1, steps=3)
    out = run.step(t)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from strata_train.block import StrataBlock
from strata_train.cell_selection import select_cells
from strata_train.indexer import Indexer
from strata_train.model import StrataModel
from strata_train.ops import chunked_softmax_attention, kv_dequantize, kv_quantize


class KVCells:
    """K/V of one layer indexed by cell id, plus the indexer keys when the layer has an indexer.

    A write at cells c0..c1 marks every cell past c1 stale (as the engine's drafter does); reading a
    cell that holds no K/V is an error, never a silent zero.
    """

    def __init__(self, capacity: int, n_kv: int, head_dim: int, int8: bool, index_dim: int) -> None:
        self.capacity = capacity
        self.int8 = int8
        shape = (capacity, n_kv, head_dim)
        if int8:
            nblk = (head_dim + 63) // 64
            self.k = torch.zeros(shape, dtype=torch.int8)
            self.v = torch.zeros(shape, dtype=torch.int8)
            self.k_scale = torch.zeros((capacity, n_kv, nblk), dtype=torch.float16)
            self.v_scale = torch.zeros((capacity, n_kv, nblk), dtype=torch.float16)
        else:
            self.k = torch.zeros(shape, dtype=torch.float32)
            self.v = torch.zeros(shape, dtype=torch.float32)
        self.index_keys = torch.zeros((capacity, index_dim)) if index_dim else None
        self.written = torch.zeros(capacity, dtype=torch.bool)

    def write(self, cells: Sequence[int], k: Tensor, v: Tensor, index_keys: Tensor | None) -> None:
        ids = torch.tensor(list(cells), dtype=torch.long)
        if int(ids.max()) >= self.capacity or int(ids.min()) < 0:
            raise ValueError(f"cell {int(ids.max())} is outside the {self.capacity} cells of the runner")
        if self.int8:
            self.k[ids], self.k_scale[ids] = kv_quantize(k)
            self.v[ids], self.v_scale[ids] = kv_quantize(v)
        else:
            self.k[ids], self.v[ids] = k, v
        if self.index_keys is not None and index_keys is not None:
            self.index_keys[ids] = index_keys
        self.written[ids] = True
        self.written[int(ids.max()) + 1 :] = False

    def invalidate_from(self, cell: int) -> None:
        self.written[max(0, cell) :] = False

    def read(self, cells: Sequence[int]) -> tuple[Tensor, Tensor]:
        """float32 K and V [L, Hkv, Dh] of the listed cells, as the attention reads them."""
        ids = torch.tensor(list(cells), dtype=torch.long)
        stale = [c for c in cells if not bool(self.written[c])]
        if stale:
            raise RuntimeError(f"attention would read cells that hold no K/V: {stale[:8]}")
        if self.int8:
            k = kv_dequantize(self.k[ids], self.k_scale[ids])
            return k, kv_dequantize(self.v[ids], self.v_scale[ids])
        return self.k[ids], self.v[ids]


@dataclass
class RowsOutput:
    logits: Tensor  # [R, V]
    streams: Tensor  # [R, n, d]: final main streams of each row
    mtp_logits: Tensor | None  # [M, Vr]: MTP rows this call encoded (positions whose next token is known)
    mtp_positions: list[int]


@dataclass
class DraftStep:
    position: int  # the MTP cell written (= the position of the streams it read)
    logits: Tensor  # [Vr]
    token: int  # vocab_ids[argmax]
    streams: Tensor  # [n, d]: MTP output streams (before its HyperHead): the next chained step's input


class ReferenceRunner:
    def __init__(
        self,
        model: StrataModel,
        *,
        kv_int8: bool | None = None,
        mtp_sink: int | None = None,
        mtp_window: int | None = None,
        capacity: int | None = None,
    ) -> None:
        """kv_int8 defaults to the model's setting; the MTP layer attends with the model's sink/window
        unless mtp_sink/mtp_window override them (the engine's STRATA_METAL_MTP_SINK/_WIN);
        capacity (cells allocated up front) defaults to min(context_length, 4096)."""
        self.model = model.eval()
        cfg = model.cfg
        self.cfg = cfg
        self.kv_int8 = model.kv_int8 if kv_int8 is None else kv_int8
        self.mtp_sink = cfg.sink_count if mtp_sink is None else mtp_sink
        self.mtp_window = cfg.sliding_window if mtp_window is None else mtp_window
        self.capacity = min(cfg.context_length, 4096) if capacity is None else capacity
        self.reset()

    @classmethod
    def from_gguf(cls, path: str | Path, **kwargs: object) -> ReferenceRunner:
        from strata_train.gguf_io import load_model

        return cls(load_model(path), **kwargs)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        cfg = self.cfg
        self.cells = [
            KVCells(self.capacity, cfg.n_kv_heads, cfg.head_dim, self.kv_int8, cfg.indexer_dim)
            for _ in range(cfg.n_layers)
        ]
        self.mtp_cells = KVCells(self.capacity, cfg.n_kv_heads, cfg.head_dim, self.kv_int8, 0)
        self.tokens: list[int] = []
        self._streams = torch.zeros(self.capacity, cfg.hc_count, cfg.d)

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    def rollback(self, length: int) -> None:
        """Forget every position >= length (and the MTP cell whose next token was forgotten)."""
        if not 0 <= length <= self.n_past:
            raise ValueError(f"rollback to {length} outside [0, {self.n_past}]")
        del self.tokens[length:]
        for cells in self.cells:
            cells.invalidate_from(length)
        self.mtp_cells.invalidate_from(length - 1)

    # ------------------------------------------------------------------ main model
    @torch.no_grad()
    def prefill(self, tokens: Sequence[int], encode_mtp: bool = True) -> RowsOutput:
        """Run rows for `tokens` at positions n_past.. ; with encode_mtp, also write the MTP cell of
        every position whose next token is now known (n_past-1 .. new n_past-2)."""
        tokens = [int(t) for t in tokens]
        if not tokens:
            raise ValueError("prefill needs at least one token")
        bad = [t for t in tokens if not 0 <= t < self.cfg.vocab_size]
        if bad:
            raise ValueError(f"token ids outside [0, {self.cfg.vocab_size}): {bad[:8]}")
        start = self.n_past
        if start + len(tokens) > self.capacity:
            raise ValueError(f"{start + len(tokens)} positions exceed the runner's {self.capacity} cells")
        positions = list(range(start, start + len(tokens)))
        self.tokens.extend(tokens)
        streams = self.model.embed_streams(torch.tensor(tokens))
        for block, cells in zip(self.model.blk, self.cells, strict=True):
            streams = self._block_rows(block, cells, streams, positions, self.cfg.sink_count,
                                       self.cfg.sliding_window, use_indexer=True)
        self._streams[start : start + len(tokens)] = streams
        logits = self.model.head(streams)

        mtp_logits, mtp_positions = None, []
        if encode_mtp and self.model.mtp is not None:
            mtp_positions = list(range(max(0, start - 1), self.n_past - 1))
            if mtp_positions:
                nxt = torch.tensor([self.tokens[q + 1] for q in mtp_positions])
                _, mtp_logits = self._mtp_rows(self._streams[mtp_positions], nxt, mtp_positions)
        return RowsOutput(logits, streams, mtp_logits, mtp_positions)

    def step(self, token: int, encode_mtp: bool = True) -> RowsOutput:
        """One decode row (a prefill of one token)."""
        return self.prefill([token], encode_mtp)

    # ------------------------------------------------------------------ MTP drafter
    @torch.no_grad()
    def mtp_draft(self, streams: Tensor, next_token: int, pos: int) -> DraftStep:
        """One MTP step at position pos: streams [n, d] (main final streams at pos, or the previous
        draft step's output), next_token = the token at pos+1. Writes MTP cell pos."""
        if self.model.mtp is None:
            raise ValueError("this model has no MTP layer")
        out, logits = self._mtp_rows(streams.unsqueeze(0), torch.tensor([int(next_token)]), [pos])
        vocab_ids = self.model.mtp.vocab_ids
        return DraftStep(pos, logits[0], int(vocab_ids[int(logits[0].argmax())]), out[0])

    def mtp_chain(self, streams: Tensor, next_token: int, pos: int, steps: int) -> list[DraftStep]:
        """Chained drafting: step j+1 reads step j's output streams and draft token at pos+j+1."""
        chain: list[DraftStep] = []
        for j in range(steps):
            d = self.mtp_draft(streams, next_token, pos + j)
            chain.append(d)
            streams, next_token = d.streams, d.token
        return chain

    def _mtp_rows(self, streams: Tensor, next_tokens: Tensor, positions: list[int]) -> tuple[Tensor, Tensor]:
        mtp = self.model.mtp
        assert mtp is not None
        x = mtp.inputs(self.model.token_embd(next_tokens), streams)
        x = self._block_rows(mtp.block, self.mtp_cells, x, positions, self.mtp_sink, self.mtp_window,
                             use_indexer=False)
        return x, mtp.logits(x, self.model.output.weight)

    # ------------------------------------------------------------------ one block, row by row
    def _block_rows(self, block: StrataBlock, cells: KVCells, streams: Tensor, positions: list[int],
                    sink: int, window: int, use_indexer: bool) -> Tensor:
        post, comb, collapsed = block.hc_attn(streams)
        x = block.attn_norm(collapsed)
        y = self._attention_rows(block, cells, x, positions, sink, window, use_indexer)
        streams = block.hc_attn.mix(streams, post, comb, y)
        post, comb, collapsed = block.hc_ffn(streams)
        y = block.moe.forward_rows(block.ffn_norm(collapsed))
        return block.hc_ffn.mix(streams, post, comb, y)

    def _attention_rows(self, block: StrataBlock, cells: KVCells, x: Tensor, positions: list[int],
                        sink: int, window: int, use_indexer: bool) -> Tensor:
        attn = block.attn
        q, gate, k, v = attn.project(x, torch.tensor(positions))
        indexer: Indexer | None = attn.indexer if (use_indexer and window > 0) else None
        cells.write(positions, k, v, indexer.keys(x) if indexer is not None else None)
        kv_of_head = torch.arange(attn.n_heads) // attn.group
        outs = []
        for r, p in enumerate(positions):
            scores = None
            if indexer is not None:
                assert cells.index_keys is not None
                q_i, w_i = indexer.queries(x[r])
                scores = indexer.scores(q_i, w_i, cells.index_keys[: p + 1]).tolist()
            top_k = attn.top_k if indexer is not None else 0
            cell_list = select_cells(p, sink, window, scores, top_k)
            kc, vc = cells.read(cell_list)  # [L, Hkv, Dh]
            kh = kc[:, kv_of_head].transpose(0, 1)  # [Hq, L, Dh]
            vh = vc[:, kv_of_head].transpose(0, 1)
            s = torch.einsum("hd,hld->hl", q[r], kh) / math.sqrt(attn.head_dim)
            outs.append(chunked_softmax_attention(s, vh))
        return attn.finish(torch.stack(outs), gate)
