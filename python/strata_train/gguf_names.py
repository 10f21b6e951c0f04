"""GGUF tensor names of a StrataModel's parameters (docs/gguf.md §1 "Tensors").

``gguf_tensors(model)`` is what the converter writes; ``load_gguf_tensors(model, tensors)`` is the
inverse (for models read back from a GGUF file). Both come from one list of (name, tensor) pairs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from strata_train.block import StrataBlock
from strata_train.hyper_connections import HyperConnection, HyperHead
from strata_train.model import StrataModel


def _hyper(prefix: str, hc: nn.Module) -> Iterator[tuple[str, Tensor]]:
    if isinstance(hc, HyperConnection):
        yield f"{prefix}_fn.weight", hc.fn
        yield f"{prefix}_base.weight", hc.base
        yield f"{prefix}_scale.weight", hc.scale


def _head(prefix: str, head: nn.Module) -> Iterator[tuple[str, Tensor]]:
    if isinstance(head, HyperHead):
        yield f"{prefix}_fn.weight", head.hc_fn
        yield f"{prefix}_base.weight", head.hc_base
        yield f"{prefix}_scale.weight", head.hc_scale


def _block(prefix: str, blk: StrataBlock) -> Iterator[tuple[str, Tensor]]:
    a, m = blk.attn, blk.moe
    yield f"{prefix}.attn_norm.weight", blk.attn_norm.weight
    yield f"{prefix}.attn_q.weight", a.attn_q.weight
    yield f"{prefix}.attn_k.weight", a.attn_k.weight
    yield f"{prefix}.attn_v.weight", a.attn_v.weight
    yield f"{prefix}.attn_q_norm.weight", a.attn_q_norm.weight
    yield f"{prefix}.attn_k_norm.weight", a.attn_k_norm.weight
    yield f"{prefix}.attn_output.weight", a.attn_output.weight
    if a.indexer is not None:
        yield f"{prefix}.indexer.attn_q.weight", a.indexer.attn_q.weight
        yield f"{prefix}.indexer.attn_k.weight", a.indexer.attn_k.weight
        yield f"{prefix}.indexer.weights.weight", a.indexer.weights.weight
    yield f"{prefix}.ffn_norm.weight", blk.ffn_norm.weight
    yield f"{prefix}.ffn_gate_inp.weight", m.ffn_gate_inp.weight
    yield f"{prefix}.ffn_gate_exps.weight", m.ffn_gate_exps
    yield f"{prefix}.ffn_up_exps.weight", m.ffn_up_exps
    yield f"{prefix}.ffn_down_exps.weight", m.ffn_down_exps
    if m.shared is not None:
        yield f"{prefix}.ffn_gate_shexp.weight", m.shared.ffn_gate_shexp.weight
        yield f"{prefix}.ffn_up_shexp.weight", m.shared.ffn_up_shexp.weight
        yield f"{prefix}.ffn_down_shexp.weight", m.shared.ffn_down_shexp.weight
        yield f"{prefix}.ffn_gate_inp_shexp.weight", m.shared.ffn_gate_inp_shexp.weight
    yield from _hyper(f"{prefix}.hc_attn", blk.hc_attn)
    yield from _hyper(f"{prefix}.hc_ffn", blk.hc_ffn)


def named_gguf_tensors(model: StrataModel) -> Iterator[tuple[str, Tensor]]:
    """(GGUF name, live parameter or buffer) for every tensor the file holds, in file order."""
    yield "token_embd.weight", model.token_embd.weight
    for i, blk in enumerate(model.blk):
        yield from _block(f"blk.{i}", blk)
    yield from _head("output_hc", model.output_hc)
    yield "output_norm.weight", model.output_norm.weight
    yield "output.weight", model.output.weight
    if model.mtp is not None:
        prefix = f"blk.{len(model.blk)}"
        yield from _block(prefix, model.mtp.block)
        yield f"{prefix}.nextn.enorm.weight", model.mtp.enorm.weight
        yield f"{prefix}.nextn.hnorm.weight", model.mtp.hnorm.weight
        yield f"{prefix}.nextn.fc_embedding.weight", model.mtp.fc_embedding.weight
        yield f"{prefix}.nextn.fc_hidden.weight", model.mtp.fc_hidden.weight
        yield from _head(f"{prefix}.nextn.hc_head", model.mtp.hc_head)
        yield f"{prefix}.nextn.shared_head_norm.weight", model.mtp.shared_head_norm.weight
        yield f"{prefix}.nextn.vocab_ids", model.mtp.vocab_ids


def gguf_tensors(model: StrataModel) -> dict[str, Tensor]:
    """Detached CPU copies keyed by GGUF name (float32; vocab_ids int32)."""
    out: dict[str, Tensor] = {}
    for name, t in named_gguf_tensors(model):
        t = t.detach().cpu()
        out[name] = t.to(torch.int32) if name.endswith("vocab_ids") else t.to(torch.float32).clone()
    return out


def load_gguf_tensors(model: StrataModel, tensors: Mapping[str, Any]) -> None:
    """Copy tensors keyed by GGUF name (numpy arrays or torch tensors) into the model, checking that
    every expected tensor is present with the right shape and nothing unexpected is left over."""
    expected = dict(named_gguf_tensors(model))
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    if missing or extra:
        raise ValueError(
            f"tensor set does not match the config: missing {missing[:8]}, unexpected {extra[:8]}"
        )
    with torch.no_grad():
        for name, dst in expected.items():
            src = tensors[name]
            src = torch.from_numpy(np.array(src)) if not isinstance(src, Tensor) else src
            if tuple(src.shape) != tuple(dst.shape):
                raise ValueError(f"{name}: shape {tuple(src.shape)}, expected {tuple(dst.shape)}")
            if name.endswith("vocab_ids"):
                if not torch.equal(src.to(torch.long), dst):
                    raise ValueError(f"{name}: differs from the config's mtp_vocab_ids")
                continue
            dst.copy_(src.to(dst.dtype))
