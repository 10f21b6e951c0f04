"""The shipped demo model's hyper-parameters and training recipe (SPEC §5, docs/demo-model.md).

Plain data (this module uses no torch itself): the GPU trainer, the exporter and the docs read the
same numbers. Every feature of the `strata` architecture is on: 4 hyper-connection streams, gated
attention with sinks, a sliding window and the lightning indexer, MoE with a shared expert, one MTP
layer whose head reads a restricted vocabulary (the most frequent tokens of the training split,
chosen at train time).

Size: 26.9 M parameters (routed experts 14.7 M; 10.9 M active per token besides the embedding),
a 30.1 MB GGUF with every matrix Q8_0 (norms, hyper-connection tensors and routers stay F32).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from strata_train.config import StrataConfig

# Architecture (StrataConfig fields). mtp_vocab_ids are filled in by the trainer from the data.
DEMO_MODEL: dict[str, Any] = {
    "vocab_size": 8192,
    "d": 384,
    "n_layers": 4,  # main layers; the MTP layer is a fifth block
    "n_heads": 6,
    "n_kv_heads": 2,  # GQA 3:1
    "head_dim": 64,
    "gated": True,
    "sink_count": 4,
    "sliding_window": 128,
    "indexer_heads": 4,
    "indexer_dim": 32,
    "indexer_top_k": 64,
    "rope_theta": 10000.0,
    "rope_dim": 64,
    "n_experts": 16,
    "n_experts_used": 2,
    "expert_ffn": 160,
    "shared_ffn": 384,
    "hc_count": 4,
    "hc_sinkhorn_iters": 20,  # DeepSeek-V4's value (transformers' DeepseekV4Config default)
    "hc_eps": 1e-6,
    "rms_eps": 1e-6,
    "mtp": True,
    "context_length": 512,
}

MTP_VOCAB_SIZE = 4096  # the most frequent train tokens: 93% of train, 94% of held-out tokens


@dataclass(frozen=True)
class TrainRecipe:
    """Optimiser, batch and loss weights of the demo run (train.py's defaults)."""

    seed: int = 1234
    batch_size: int = 64  # sequences per step
    seq_len: int = 512  # = context_length
    lr: float = 2e-3  # peak AdamW learning rate
    min_lr_ratio: float = 0.05  # the cosine decays to lr * min_lr_ratio
    warmup_steps: int = 100
    weight_decay: float = 0.1  # on matrices and embeddings; none on norms and hc bases/scales
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    mtp_weight: float = 0.3
    indexer_weight: float = 1.0  # the indexer loss moves only the indexer (detached input)
    balance_weight: float = 0.01
    time_budget_s: float = 290.0  # training loop on one H200; 470 s (11 epochs) overfit (docs/demo-model.md)
    mtp_vocab_size: int = MTP_VOCAB_SIZE


DEMO_RECIPE = TrainRecipe()


def demo_config(mtp_vocab_ids: Iterable[int] | None = None, **changes: Any) -> StrataConfig:
    """The demo model's StrataConfig (with the given restricted MTP vocabulary)."""
    values = dict(DEMO_MODEL)
    values.update(changes)
    values["mtp_vocab_ids"] = None if mtp_vocab_ids is None else tuple(int(i) for i in mtp_vocab_ids)
    return StrataConfig(**values)


def smoke_config(vocab_size: int = 320, **changes: Any) -> StrataConfig:
    """A seconds-fast model with every feature on, for the CPU smoke test of the trainer."""
    values: dict[str, Any] = {
        "vocab_size": vocab_size,
        "d": 64,
        "n_layers": 2,
        "n_heads": 4,
        "n_kv_heads": 2,
        "head_dim": 32,
        "gated": True,
        "sink_count": 2,
        "sliding_window": 8,
        "indexer_heads": 2,
        "indexer_dim": 16,
        "indexer_top_k": 4,
        "rope_theta": 10000.0,
        "rope_dim": 32,
        "n_experts": 4,
        "n_experts_used": 2,
        "expert_ffn": 64,
        "shared_ffn": 64,
        "hc_count": 4,
        "hc_sinkhorn_iters": 3,
        "hc_eps": 1e-6,
        "rms_eps": 1e-6,
        "mtp": True,
        "context_length": 64,
    }
    values.update(changes)
    return StrataConfig(**values)
