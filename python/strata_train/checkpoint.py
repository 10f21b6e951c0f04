"""Training checkpoints (.pt) that ``python -m strata.cli convert`` reads without importing this package.

Format (a dict saved with torch.save):
    format  = "strata-checkpoint", version = 1
    config  = StrataConfig.to_dict()
    tensors = {GGUF tensor name: float32 tensor (vocab_ids int32)}
    kv_int8 = bool
plus any extra entries the trainer adds (optimizer state, step, ...), which the converter ignores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from strata_train.config import StrataConfig
from strata_train.gguf_names import gguf_tensors, load_gguf_tensors
from strata_train.model import StrataModel

CHECKPOINT_FORMAT = "strata-checkpoint"
CHECKPOINT_VERSION = 1


def save_checkpoint(model: StrataModel, path: str | Path, **extra: Any) -> None:
    payload = {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "config": model.cfg.to_dict(),
        "tensors": gguf_tensors(model),
        "kv_int8": model.kv_int8,
    }
    clash = set(extra) & set(payload)
    if clash:
        raise ValueError(f"extra checkpoint entries clash with the format's own: {sorted(clash)}")
    payload.update(extra)
    torch.save(payload, str(path))


def load_checkpoint(path: str | Path) -> tuple[StrataModel, dict[str, Any]]:
    """(model, the whole payload) from a checkpoint written by save_checkpoint."""
    payload = torch.load(str(path), map_location="cpu", weights_only=False)
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path}: not a strata training checkpoint")
    if payload.get("version") != CHECKPOINT_VERSION:
        raise ValueError(
            f"{path}: checkpoint version {payload.get('version')} (this reader knows {CHECKPOINT_VERSION})"
        )
    model = StrataModel(StrataConfig.from_dict(payload["config"]), kv_int8=bool(payload.get("kv_int8", True)))
    load_gguf_tensors(model, payload["tensors"])
    return model, payload
