"""Read a strata training checkpoint (.pt written by strata_train.checkpoint.save_checkpoint).

The only place the converter touches torch, imported here and only for this input. The payload is a
dict: format = "strata-checkpoint", version = 1, config (hyper-parameters by StrataConfig field
name), tensors (GGUF name -> tensor), optional tokenizer_json (a Hugging Face tokenizer.json text).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from strata.errors import FormatError

CHECKPOINT_FORMAT = "strata-checkpoint"
CHECKPOINT_VERSION = 1


def read_training_checkpoint(path: str | Path) -> dict[str, Any]:
    try:
        import torch
    except ImportError:  # pragma: no cover - depends on the environment
        raise FormatError(f"{path}: reading a .pt checkpoint needs torch, which is not installed") from None
    try:
        payload = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds for a bad file
        raise FormatError(f"{path}: not a readable torch checkpoint ({type(exc).__name__}: {exc})") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise FormatError(f"{path}: not a strata training checkpoint (no format = {CHECKPOINT_FORMAT!r})")
    if payload.get("version") != CHECKPOINT_VERSION:
        raise FormatError(
            f"{path}: checkpoint version {payload.get('version')}, expected {CHECKPOINT_VERSION}"
        )
    for key in ("config", "tensors"):
        if not isinstance(payload.get(key), dict):
            raise FormatError(f"{path}: checkpoint has no {key!r} dictionary")
    return payload
