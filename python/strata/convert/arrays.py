"""Turning whatever holds a tensor (numpy array, torch tensor, nested list) into a numpy array,
without importing torch: torch tensors are recognised by their methods."""

from __future__ import annotations

from typing import Any

import numpy as np


def to_numpy(value: Any, dtype: type = np.float32) -> np.ndarray:
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        value = value.detach().cpu()
        if dtype is np.float32:
            value = value.float()
        value = value.numpy()
    return np.ascontiguousarray(np.asarray(value, dtype=dtype))
