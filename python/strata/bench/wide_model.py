"""A memory-bound model with a trained drafter: the shipped demo model, widened and deepened so that it
keeps the demo model's function.

The demo model (27 M parameters, 30 MB) fits the last-level cache, so decoding it is compute-bound and
every verification row costs almost a whole step. To measure speculation and expert streaming where
decoding is memory-bound, this module makes it bigger without changing what it computes, working on the
Q8_0 bytes directly (no requantization):

**Widening** (exact). Every routed expert's width goes from ``F`` to ``F * expert_mult`` and the shared
expert's from ``S`` to ``S * shared_mult``. A new hidden unit ``j`` (``j >= F``) gets the gate and up
rows of unit ``j mod F`` (copied Q8_0 blocks), so its activation is an ordinary finite number; the down
projection's new input columns are Q8_0 blocks with scale 0 and quants 0. The engine converts an
activation row to Q8_0 blocks of 32 (ggml's scheme, per block) and a row's dot product is a sum over
blocks of ``d_w * d_x * Σ q_w q_x``; the original widths are multiples of 32, so the original units
fill whole blocks whose quantization is unchanged, and every appended block adds an exact zero. Logits
can differ only by the order of float additions inside a dot kernel.

**Deepening** (``extra_layers``; exact up to the hyper-connection's ε). Blocks are inserted after the
last main block (the MTP block moves to the end), each a copy of main block ``i mod L`` (so its
attention, lightning indexer and router compute what a real block computes, and its experts are read
like real ones) whose output is cut: attention output and both FFN down projections are zero blocks,
so the sub-layer output Y is exactly 0, and the hyper-connection mixer ``fn`` is zero with the
``comb`` logits +60 on the diagonal and -60 off it, so the Sinkhorn input is an exact one-hot per row
(``exp(-120)`` underflows to 0 in float32). What remains is the architecture's ``hc_eps`` (1e-6 in
the demo): ``comb = one-hot + eps`` before normalisation, so each inserted sub-layer mixes about 1e-6 of
the other streams into each stream. The logits move by about that relative amount per inserted block
(tests/python/test_wide_model.py bounds it and checks greedy tokens).

Routers, shared-expert gates, norms, heads and the MTP drafter are copied, so routing, selection weights
and drafts are those of the demo model. What changes is the cost: routed and shared experts read
``expert_mult`` and ``shared_mult`` times the bytes, and a main step runs ``L + extra_layers`` blocks while
a draft step still runs one (the MTP block is widened with the rest: the file format has one width per
model), which is the ratio of a big model's drafter to its main model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter, ReaderTensor

Q8_0_BLOCK = 32
Q8_0_BYTES = 34

_EXPERT_FFN = "expert_feed_forward_length"
_SHARED_FFN = "expert_shared_feed_forward_length"


@dataclass(frozen=True)
class WideModelReport:
    path: Path
    expert_ffn: int
    shared_ffn: int
    file_bytes: int
    expert_bytes: int  # routed experts, all blocks (the MTP block's included)
    shared_bytes: int  # shared experts, all blocks
    blocks: int = 0    # blocks in the file (main layers, inserted ones included, then the MTP block)


def default_demo_path() -> Path:
    return Path(__file__).resolve().parent.parent / "models" / "strata-demo.gguf"


def _widen_out_rows(data: np.ndarray, mult: int) -> np.ndarray:
    """gate/up, bytes [(E,) F, row_bytes] -> [(E,) F*mult, row_bytes]: new row j copies row j mod F."""
    return np.concatenate([data] * mult, axis=-2)


def _widen_in_cols(data: np.ndarray, mult: int) -> np.ndarray:
    """down, bytes [(E,) d, F/32*34] -> [(E,) d, F*mult/32*34]; appended blocks: scale 0, quants 0."""
    zeros = np.zeros((*data.shape[:-1], data.shape[-1] * (mult - 1)), dtype=np.uint8)
    return np.concatenate([data, zeros], axis=-1)


def _widening(name: str, expert_mult: int, shared_mult: int) -> Callable[[np.ndarray], np.ndarray] | None:
    """The widening of a tensor (its Q8_0 bytes in numpy order), or None to copy it unchanged."""
    leaf = name.split(".", 2)[-1] if name.startswith("blk.") else name
    if leaf in ("ffn_gate_exps.weight", "ffn_up_exps.weight"):
        return lambda a: _widen_out_rows(a, expert_mult)
    if leaf == "ffn_down_exps.weight":
        return lambda a: _widen_in_cols(a, expert_mult)
    if leaf in ("ffn_gate_shexp.weight", "ffn_up_shexp.weight"):
        return lambda a: _widen_out_rows(a, shared_mult)
    if leaf == "ffn_down_shexp.weight":
        return lambda a: _widen_in_cols(a, shared_mult)
    return None


def _copy_field(writer: GGUFWriter, field: object, override: dict[str, int]) -> None:
    name: str = field.name  # type: ignore[attr-defined]
    types: list[GGUFValueType] = field.types  # type: ignore[attr-defined]
    value = override.get(name, field.contents())  # type: ignore[attr-defined]
    sub = types[-1] if types[0] == GGUFValueType.ARRAY else None
    writer.add_key_value(name, value, types[0], sub_type=sub)


# Tensors of an inserted block whose contribution is cut: the attention output and both FFN down
# projections become zero blocks, the hyper-connection mixers an identity.
_ZEROED = ("attn_output.weight", "ffn_down_exps.weight", "ffn_down_shexp.weight")
_HC_FN = ("hc_attn_fn.weight", "hc_ffn_fn.weight")
_HC_BASE = ("hc_attn_base.weight", "hc_ffn_base.weight")
IDENTITY_LOGIT = 60.0  # softmax(±60 apart) underflows to an exact one-hot in float32


def _identity_base(base: np.ndarray, n: int) -> np.ndarray:
    """hc base [pre n | post n | comb n·n]: pre and post 0, comb +60 on the diagonal and -60 off it."""
    out = np.zeros_like(base)
    comb = np.full((n, n), -IDENTITY_LOGIT, dtype=base.dtype)
    np.fill_diagonal(comb, IDENTITY_LOGIT)
    out[2 * n:] = comb.reshape(-1)
    return out


Transform = Callable[[np.ndarray], np.ndarray]


def _inserted_transform(leaf: str, widen: Transform | None, hc: int) -> Transform | None:
    """The bytes of an inserted block's tensor from its source block's tensor."""
    if leaf in _ZEROED:
        return lambda a: np.zeros_like(widen(a) if widen else a)
    if leaf in _HC_FN:
        return lambda a: np.zeros_like(a)
    if leaf in _HC_BASE:
        return lambda a: _identity_base(np.asarray(a), hc)
    return widen


def _plan(reader: GGUFReader, n_main: int, extra_layers: int, expert_mult: int, shared_mult: int,
          hc: int) -> list[tuple[str, ReaderTensor, Transform | None]]:
    """(output name, source tensor, transform) for every output tensor, in file order: the original
    tensors, with the inserted blocks n_main .. n_main+extra-1 placed before the MTP block, which is
    renumbered to n_main + extra."""
    by_block: dict[int, list[ReaderTensor]] = {}
    for t in reader.tensors:
        if t.name.startswith("blk."):
            by_block.setdefault(int(t.name.split(".")[1]), []).append(t)
    plan: list[tuple[str, ReaderTensor, Transform | None]] = []
    inserted = False
    for t in reader.tensors:
        block = int(t.name.split(".")[1]) if t.name.startswith("blk.") else -1
        if block >= n_main and not inserted:
            inserted = True
            for i in range(extra_layers):
                for st in by_block[i % n_main]:
                    leaf = st.name.split(".", 2)[2]
                    widen = _widening(st.name, expert_mult, shared_mult)
                    plan.append((f"blk.{n_main + i}.{leaf}", st, _inserted_transform(leaf, widen, hc)))
        name = t.name
        if block >= n_main:
            name = f"blk.{block + extra_layers}.{t.name.split('.', 2)[2]}"
        plan.append((name, t, _widening(t.name, expert_mult, shared_mult)))
    return plan


def _bytes(t: ReaderTensor, fn: Transform | None) -> np.ndarray:
    return np.ascontiguousarray(t.data if fn is None else fn(np.asarray(t.data)))


def widen_model(src: str | Path, dst: str | Path, *, expert_mult: int, shared_mult: int = 1,
                extra_layers: int = 0) -> WideModelReport:
    """Write the widened (and, with extra_layers, deepened) copy of the strata GGUF `src` to `dst`."""
    if expert_mult < 1 or shared_mult < 1 or extra_layers < 0:
        raise ValueError(f"expert_mult and shared_mult must be >= 1 and extra_layers >= 0 "
                         f"(got {expert_mult}, {shared_mult}, {extra_layers})")
    reader = GGUFReader(str(src))
    arch = reader.fields["general.architecture"].contents()
    if arch != "strata":
        raise ValueError(f"{src}: architecture {arch!r}; widening is defined for 'strata' models")
    f = int(reader.fields[f"{arch}.{_EXPERT_FFN}"].contents())
    s = int(reader.fields[f"{arch}.{_SHARED_FFN}"].contents())
    if f % Q8_0_BLOCK or s % Q8_0_BLOCK:
        raise ValueError(f"{src}: FFN widths {f}, {s} must be multiples of {Q8_0_BLOCK} "
                         "to widen by whole blocks")
    blocks = int(reader.fields[f"{arch}.block_count"].contents())
    mtp = int(reader.fields[f"{arch}.nextn_predict_layers"].contents()) if \
        f"{arch}.nextn_predict_layers" in reader.fields else 0
    hc = int(reader.fields[f"{arch}.hyper_connection.count"].contents())
    override = {f"{arch}.{_EXPERT_FFN}": f * expert_mult, f"{arch}.{_SHARED_FFN}": s * shared_mult,
                f"{arch}.block_count": blocks + extra_layers}
    plan = _plan(reader, blocks - mtp, extra_layers, expert_mult, shared_mult, hc)
    dst = Path(dst)
    writer = GGUFWriter(str(dst), arch)
    expert_bytes = shared_bytes = 0
    try:
        for field in reader.fields.values():
            if field.name.startswith("GGUF.") or field.name == "general.architecture":
                continue
            _copy_field(writer, field, override)
        # Described first, generated again while writing: a widened tensor is never held all at once.
        for name, t, fn in plan:
            widened = _widening(t.name, expert_mult, shared_mult) is not None
            if widened and t.tensor_type != GGMLQuantizationType.Q8_0:
                raise ValueError(f"{src}: {t.name} is {t.tensor_type.name}; widening needs Q8_0")
            data = _bytes(t, fn)
            if "_exps." in name:
                expert_bytes += data.nbytes
            elif "_shexp." in name and "gate_inp" not in name:
                shared_bytes += data.nbytes
            quant = t.tensor_type not in (GGMLQuantizationType.F32, GGMLQuantizationType.I32)
            writer.add_tensor_info(name, data.shape, data.dtype, data.nbytes,
                                   raw_dtype=t.tensor_type if quant else None)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for _, t, fn in plan:
            writer.write_tensor_data(_bytes(t, fn))
    finally:
        writer.close()
    return WideModelReport(dst, f * expert_mult, s * shared_mult, dst.stat().st_size, expert_bytes,
                           shared_bytes, blocks + extra_layers)
