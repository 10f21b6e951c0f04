"""Random `strata` models for tests: every tensor of the layout with O(1) activations.

Matrices N(0, 1/in), embeddings N(0, 1), norm weights 1 + N(0, 0.1^2), hyper-connection base
N(0, 0.5^2) and scale 1 + N(0, 0.1^2) (the same recipe as strata_train.random_init).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from strata.convert.strata_layout import StrataHParams, strata_tensor_specs
from strata.convert.strata_writer import write_strata_gguf
from strata.convert.tokenizer_keys import byte_level_tokenizer


def random_strata_tensors(config: Any, seed: int = 0) -> dict[str, np.ndarray]:
    hp = StrataHParams.from_any(config)
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for name, spec in strata_tensor_specs(hp).items():
        if spec.kind == "i32":
            out[name] = np.asarray(hp.mtp_vocab, dtype=np.int32)
        elif name == "token_embd.weight":
            out[name] = rng.standard_normal(spec.shape, dtype=np.float32)
        elif name.endswith("_base.weight"):
            out[name] = 0.5 * rng.standard_normal(spec.shape, dtype=np.float32)
        elif len(spec.shape) == 1:  # norms and hyper-connection scales
            out[name] = 1.0 + 0.1 * rng.standard_normal(spec.shape, dtype=np.float32)
        else:
            out[name] = rng.standard_normal(spec.shape, dtype=np.float32) * np.float32(spec.shape[-1] ** -0.5)
    return out


def agreeing_strata_tensors(config: Any, scale: float, seed: int = 0) -> dict[str, np.ndarray]:
    """A random model whose MTP drafter agrees with the main model more the smaller `scale` is: block
    outputs scaled by `scale`, an identity-ish fc_embedding, fc_hidden scaled, the drafter head's norm
    = the main head's. For tests that need speculative rounds to accept, partly accept and roll back."""
    hp = StrataHParams.from_any(config)
    t = random_strata_tensors(config, seed=seed)
    rng = np.random.default_rng(seed + 1)
    for k in list(t):
        if k.endswith(("attn_output.weight", "ffn_down_exps.weight", "ffn_down_shexp.weight")):
            t[k] = t[k] * np.float32(scale)
    d = hp.d
    mtp = f"blk.{hp.n_layers}.nextn."
    t[mtp + "fc_embedding.weight"] = (np.eye(d) + scale * rng.standard_normal((d, d)) / 8).astype(np.float32)
    t[mtp + "fc_hidden.weight"] = t[mtp + "fc_hidden.weight"] * np.float32(scale)
    t[mtp + "enorm.weight"] = np.ones(d, np.float32)
    t[mtp + "shared_head_norm.weight"] = t["output_norm.weight"].copy()
    return t


def make_random_strata(
    config: Any,
    seed: int = 0,
    path: str | Path | None = None,
    weight_type: str = "F32",
    expert_type: str | None = None,
    tokenizer: Any = "bytes",
) -> Path:
    """Write a random model and return its path (a new temporary file unless path is given).

    tokenizer: "bytes" (byte_level_tokenizer of the model's vocabulary size), None, or a writer
    callable as for write_strata_gguf.
    """
    hp = StrataHParams.from_any(config)
    if path is None:
        path = Path(tempfile.mkdtemp(prefix="strata-random-")) / f"random-{seed}.gguf"
    if isinstance(tokenizer, str) and tokenizer == "bytes":
        tokenizer = byte_level_tokenizer(hp.vocab_size)
    return write_strata_gguf(random_strata_tensors(hp, seed), hp, path, tokenizer=tokenizer,
                             weight_type=weight_type, expert_type=expert_type, name=f"strata-random-{seed}")
