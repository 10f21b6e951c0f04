"""The hyper-parameters of a `strata` model (docs/gguf.md §1), validated.

Pure Python on purpose: the converter and the checkpoint format read it without torch. Field names
match ``strata.convert.strata_hparams.StrataHParams`` one to one (a test keeps them in step).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# What `without(...)` can switch off, and which fields that sets.
FEATURES: dict[str, dict[str, Any]] = {
    "hc": {"hc_count": 1},
    "gate": {"gated": False},
    "sink": {"sink_count": 0},
    "window": {
        "sliding_window": 0, "sink_count": 0, "indexer_heads": 0, "indexer_dim": 0, "indexer_top_k": 0,
    },
    "indexer": {"indexer_heads": 0, "indexer_dim": 0, "indexer_top_k": 0},
    "shared_expert": {"shared_ffn": 0},
    "mtp": {"mtp": False, "mtp_vocab_ids": None},
}


@dataclass(frozen=True)
class StrataConfig:
    """Every hyper-parameter stored under ``strata.*`` in the GGUF (names are ours, keys in docs)."""

    vocab_size: int = 512
    d: int = 64
    n_layers: int = 2  # main layers only; the MTP layer is extra
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int = 16
    gated: bool = True
    sink_count: int = 2
    sliding_window: int = 4  # 0 = full causal attention
    indexer_heads: int = 2
    indexer_dim: int = 8
    indexer_top_k: int = 3
    rope_theta: float = 10000.0
    rope_dim: int = 8
    n_experts: int = 8
    n_experts_used: int = 2
    expert_ffn: int = 32
    shared_ffn: int = 32  # 0 = no shared expert
    hc_count: int = 4  # 1 = plain pre-norm residual
    hc_sinkhorn_iters: int = 3
    hc_eps: float = 1e-6
    rms_eps: float = 1e-6
    mtp: bool = True
    mtp_vocab_ids: tuple[int, ...] | None = field(default=None)  # None: the whole vocabulary
    context_length: int = 256

    def __post_init__(self) -> None:
        if self.mtp_vocab_ids is not None and not isinstance(self.mtp_vocab_ids, tuple):
            object.__setattr__(self, "mtp_vocab_ids", tuple(int(i) for i in self.mtp_vocab_ids))
        self.validate()

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        def need(cond: bool, what: str) -> None:
            if not cond:
                raise ValueError(f"StrataConfig: {what}")

        for name in ("vocab_size", "d", "n_layers", "n_heads", "n_kv_heads", "head_dim", "rope_dim",
                     "n_experts", "n_experts_used", "expert_ffn", "hc_count", "context_length"):
            v = getattr(self, name)
            need(_is_int(v) and v >= 1, f"{name} must be an int >= 1, got {v!r}")
        for name in ("sink_count", "sliding_window", "indexer_heads", "indexer_dim", "indexer_top_k",
                     "shared_ffn", "hc_sinkhorn_iters"):
            v = getattr(self, name)
            need(_is_int(v) and v >= 0, f"{name} must be an int >= 0, got {v!r}")
        need(isinstance(self.gated, bool) and isinstance(self.mtp, bool), "gated and mtp must be bools")
        need(self.n_heads % self.n_kv_heads == 0,
             f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")
        need(self.rope_dim % 2 == 0 and self.rope_dim <= self.head_dim,
             f"rope_dim ({self.rope_dim}) must be even and <= head_dim ({self.head_dim})")
        need(self.n_experts_used <= self.n_experts,
             f"n_experts_used ({self.n_experts_used}) must be <= n_experts ({self.n_experts})")
        need(self.rope_theta > 0, f"rope_theta must be > 0, got {self.rope_theta}")
        need(self.rms_eps > 0 and self.hc_eps >= 0, "rms_eps must be > 0 and hc_eps >= 0")
        if self.hc_count > 1:
            need(self.hc_sinkhorn_iters >= 1, "hc_sinkhorn_iters must be >= 1 when hc_count > 1")
        if self.sliding_window == 0:
            full = "(sliding_window = 0 is full attention)"
            need(self.sink_count == 0, f"sink_count needs a sliding window {full}")
            need(self.indexer_heads == 0, f"the indexer needs a sliding window {full}")
        if self.indexer_heads > 0:
            need(self.indexer_dim >= 1 and self.indexer_top_k >= 1,
                 "indexer_dim and indexer_top_k must be >= 1 when indexer_heads > 0")
        else:
            need(self.indexer_dim == 0 and self.indexer_top_k == 0,
                 "indexer_dim and indexer_top_k must be 0 when indexer_heads = 0")
        if self.mtp_vocab_ids is not None:
            need(self.mtp, "mtp_vocab_ids given but mtp is off")
            ids = self.mtp_vocab_ids
            need(len(ids) >= 1, "mtp_vocab_ids is empty")
            need(all(0 <= i < self.vocab_size for i in ids), "mtp_vocab_ids: an id outside [0, vocab_size)")
            need(len(set(ids)) == len(ids), "mtp_vocab_ids has a repeated id")

    # ------------------------------------------------------------------ derived
    @property
    def has_indexer(self) -> bool:
        return self.indexer_heads > 0

    @property
    def mtp_vocab_size(self) -> int:
        if not self.mtp:
            return 0
        return self.vocab_size if self.mtp_vocab_ids is None else len(self.mtp_vocab_ids)

    def mtp_vocab_list(self) -> list[int]:
        """The restricted vocabulary of the MTP head (all ids when none was chosen)."""
        if not self.mtp:
            return []
        return list(range(self.vocab_size)) if self.mtp_vocab_ids is None else list(self.mtp_vocab_ids)

    # ------------------------------------------------------------------ variants
    def replace(self, **changes: Any) -> StrataConfig:
        return dataclasses.replace(self, **changes)

    def without(self, *features: str) -> StrataConfig:
        """The same model with features switched off: hc, gate, sink, window, indexer, shared_expert, mtp."""
        changes: dict[str, Any] = {}
        for f in features:
            if f not in FEATURES:
                raise ValueError(f"unknown feature {f!r}; known: {', '.join(FEATURES)}")
            changes.update(FEATURES[f])
        return self.replace(**changes)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if out["mtp_vocab_ids"] is not None:
            out["mtp_vocab_ids"] = list(out["mtp_vocab_ids"])
        return out

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> StrataConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"StrataConfig: unknown fields {unknown}")
        return cls(**dict(values))

    @classmethod
    def tiny(cls, **changes: Any) -> StrataConfig:
        """A seconds-fast test model with every feature on (the defaults, and an MTP head over every
        third token id so the restricted-vocabulary gather is exercised)."""
        vocab = int(changes.get("vocab_size", cls.vocab_size))
        if changes.get("mtp", True) and "mtp_vocab_ids" not in changes:
            changes["mtp_vocab_ids"] = tuple(range(0, vocab, 3))
        return cls(**changes)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def feature_names() -> Iterable[str]:
    return tuple(FEATURES)
