"""Trained weights as small safetensors shards plus config.json: what the GPU trainer writes and what
export.py / evaluate.py read (docs/demo-model.md).

Tensors are keyed by GGUF name (``gguf_names``). Matrices are stored as float16 (a Q8_0 GGUF loses
more than that), small tensors (norms, hyper-connection tensors, routers) as float32, vocab_ids as
int32; a matrix that float16 cannot hold (|x| > 60000) stays float32. Each shard stays under a byte
limit (the device tool brings back files of at most 16 MiB).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from strata_train.config import StrataConfig
from strata_train.gguf_names import gguf_tensors, load_gguf_tensors
from strata_train.model import StrataModel

SHARDS_FORMAT = "strata-train-shards"
SHARDS_VERSION = 1
CONFIG_FILE = "config.json"
DEFAULT_SHARD_BYTES = 14_750 * 1024  # payload per shard (< 15 MiB with the header)
SMALL_TENSOR = 65536  # elements; below this a tensor stays float32
FP16_SAFE = 60000.0


def storage_tensor(name: str, t: Tensor) -> Tensor:
    """The tensor as stored in a shard (see the module docstring)."""
    t = t.detach().cpu()
    if name.endswith("vocab_ids"):
        return t.to(torch.int32).contiguous()
    t = t.to(torch.float32)
    if t.numel() < SMALL_TENSOR or t.dim() < 2 or float(t.abs().max()) > FP16_SAFE:
        return t.contiguous()
    return t.to(torch.float16).contiguous()


def shard_name(i: int, n: int) -> str:
    return f"model-{i:05d}-of-{n:05d}.safetensors"


def plan_shards(tensors: Mapping[str, Tensor], max_bytes: int) -> list[list[str]]:
    """Groups of names whose payload stays within max_bytes each: first-fit by decreasing size (few
    files: the device tool brings back at most 8), each group in file order."""
    order = {name: i for i, name in enumerate(tensors)}
    sizes = {name: t.numel() * t.element_size() for name, t in tensors.items()}
    groups: list[list[str]] = []
    used: list[int] = []
    for name in sorted(tensors, key=lambda n: (-sizes[n], order[n])):
        if sizes[name] > max_bytes:
            raise ValueError(f"{name}: {sizes[name]} bytes does not fit in a shard of {max_bytes} bytes")
        for i, u in enumerate(used):
            if u + sizes[name] <= max_bytes:
                groups[i].append(name)
                used[i] += sizes[name]
                break
        else:
            groups.append([name])
            used.append(sizes[name])
    return [sorted(g, key=order.__getitem__) for g in groups]


def save_shards(
    model: StrataModel,
    out_dir: str | Path,
    *,
    max_bytes: int = DEFAULT_SHARD_BYTES,
    extra: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Write model-0000i-of-0000N.safetensors and config.json into out_dir; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("model-*-of-*.safetensors"):
        old.unlink()  # a previous save with another shard count
    stored = {name: storage_tensor(name, t) for name, t in gguf_tensors(model).items()}
    groups = plan_shards(stored, max_bytes)
    paths = []
    for i, names in enumerate(groups, start=1):
        path = out / shard_name(i, len(groups))
        save_file({n: stored[n] for n in names}, str(path), metadata={"format": SHARDS_FORMAT})
        paths.append(path)
    config = {
        "format": SHARDS_FORMAT,
        "version": SHARDS_VERSION,
        "config": model.cfg.to_dict(),
        "kv_int8": model.kv_int8,
        "n_params": sum(t.numel() for n, t in stored.items() if not n.endswith("vocab_ids")),
        "shards": [p.name for p in paths],
        "dtypes": {n: str(t.dtype).removeprefix("torch.") for n, t in stored.items()},
        **dict(extra or {}),
    }
    path = out / CONFIG_FILE
    path.write_text(json.dumps(config, indent=1) + "\n")
    return [*paths, path]


def read_config(shard_dir: str | Path) -> dict[str, Any]:
    path = Path(shard_dir) / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no config.json (expected the output folder of strata_train.train)")
    config = json.loads(path.read_text())
    if config.get("format") != SHARDS_FORMAT or config.get("version") != SHARDS_VERSION:
        raise ValueError(f"{path}: not a {SHARDS_FORMAT} v{SHARDS_VERSION} config")
    return config


def load_shard_tensors(shard_dir: str | Path) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """(config.json, every tensor keyed by GGUF name, as stored)."""
    config = read_config(shard_dir)
    tensors: dict[str, Tensor] = {}
    for name in config["shards"]:
        path = Path(shard_dir) / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: shard listed in config.json is missing")
        part = load_file(str(path))
        clash = set(part) & set(tensors)
        if clash:
            raise ValueError(f"{path}: tensors already read from another shard: {sorted(clash)[:4]}")
        tensors.update(part)
    return config, tensors


def load_shards(shard_dir: str | Path) -> tuple[StrataModel, dict[str, Any]]:
    """A float32 StrataModel (eval mode) from a shard folder, and its config.json."""
    config, tensors = load_shard_tensors(shard_dir)
    model = StrataModel(StrataConfig.from_dict(config["config"]), kv_int8=bool(config.get("kv_int8", True)))
    load_gguf_tensors(
        model,
        {n: t.to(torch.int64 if n.endswith("vocab_ids") else torch.float32) for n, t in tensors.items()},
    )
    return model.eval(), config
