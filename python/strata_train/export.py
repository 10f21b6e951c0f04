"""Trainer output (safetensors shards + config.json) -> the shipped `strata` GGUF (docs/demo-model.md).

    PYTHONPATH=python python -m strata_train.export out \\
        --tokenizer .data/stdlib/tokenizer.json --out python/strata/models/strata-demo.gguf

Writes through the project's converter (``strata.convert.write_strata_gguf``) with the tokenizer from
``strata.tokenizer.add_tokenizer_to_gguf`` (ChatML chat template, eos ``<|endoftext|>``). Every
matrix Q8_0 by default (``--type``, ``--expert-type``); norms, hyper-connection tensors, routers,
gates and the indexer weights stay F32, ``vocab_ids`` I32 (the converter's rule). The file is read
back with ``gguf.GGUFReader`` and checked: architecture, tensor count, tokenizer keys, size limit.
Runs where ``gguf`` and the `strata` package are installed (not needed on the GPU machine).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "strata" / "models" / "strata-demo.gguf"
DEFAULT_MAX_MB = 32.0  # SPEC §5: the demo model ships inside the package, <= 32 MB
REQUIRED_TOKENIZER_KEYS = (
    "tokenizer.ggml.model",
    "tokenizer.ggml.pre",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.merges",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.chat_template",
)


def tokenizer_writer(tokenizer_json: str | Path, vocab_size: int) -> Any:
    """A callable(writer) adding the tokenizer keys, padded to the model's vocab_size rows."""
    from tokenizers import Tokenizer as HFTokenizer

    from strata.tokenizer import CHATML_TEMPLATE, add_tokenizer_to_gguf

    path = Path(tokenizer_json)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: tokenizer.json not found")
    hf = HFTokenizer.from_file(str(path))

    def add(writer: Any) -> None:
        add_tokenizer_to_gguf(writer, hf, chat_template=CHATML_TEMPLATE, vocab_size=vocab_size)

    return add


def export_gguf(
    shard_dir: str | Path,
    out: str | Path,
    *,
    tokenizer_json: str | Path,
    weight_type: str = "Q8_0",
    expert_type: str | None = None,
    name: str = "strata-demo",
    max_mb: float | None = DEFAULT_MAX_MB,
) -> dict[str, Any]:
    """Write the GGUF and check it; returns a summary (path, bytes, tensor types, keys)."""
    from gguf import GGUFReader

    from strata.convert import write_strata_gguf
    from strata_train.config import StrataConfig
    from strata_train.shards import load_shard_tensors

    config, tensors = load_shard_tensors(shard_dir)
    cfg = StrataConfig.from_dict(config["config"])
    arrays = {
        n: t.numpy().astype(np.int32 if n.endswith("vocab_ids") else np.float32) for n, t in tensors.items()
    }
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_strata_gguf(
        arrays,
        cfg,
        out,
        tokenizer=tokenizer_writer(tokenizer_json, cfg.vocab_size),
        weight_type=weight_type,
        expert_type=expert_type,
        name=name,
    )

    reader = GGUFReader(str(out))
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    missing = [k for k in REQUIRED_TOKENIZER_KEYS if k not in reader.fields]
    if arch != "strata" or missing:
        raise RuntimeError(f"{out}: architecture {arch!r}, missing tokenizer keys {missing}")
    if len(reader.tensors) != len(arrays):
        raise RuntimeError(f"{out}: {len(reader.tensors)} tensors, the shards hold {len(arrays)}")
    types: dict[str, int] = {}
    for t in reader.tensors:
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    size = out.stat().st_size
    summary = {
        "path": str(out),
        "bytes": size,
        "mb": size / 1e6,
        "mib": size / 2**20,
        "tensor_types": types,
        "n_params": int(config.get("n_params", 0)),
        "weight_type": weight_type,
        "expert_type": expert_type or weight_type,
    }
    if max_mb is not None and size > max_mb * 1e6:
        raise RuntimeError(f"{out}: {size / 1e6:.2f} MB exceeds the {max_mb} MB limit")
    return summary


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(prog="python -m strata_train.export", description=__doc__.split("\n")[0])
    ap.add_argument("shards", help="trainer output folder (model-*.safetensors + config.json)")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="GGUF path (default: the package's demo model)")
    ap.add_argument("--tokenizer", default=".data/stdlib/tokenizer.json", help="the model's tokenizer.json")
    ap.add_argument("--type", default="Q8_0", help="matrix storage: F32, F16, BF16, Q8_0, Q5_0, Q4_0")
    ap.add_argument("--expert-type", default=None, help="storage of the routed experts (default: --type)")
    ap.add_argument("--name", default="strata-demo", help="general.name")
    ap.add_argument(
        "--max-mb", type=float, default=DEFAULT_MAX_MB, help="fail above this size (0 = no limit)"
    )
    args = ap.parse_args(argv)
    summary = export_gguf(
        args.shards,
        args.out,
        tokenizer_json=args.tokenizer,
        weight_type=args.type,
        expert_type=args.expert_type,
        name=args.name,
        max_mb=args.max_mb or None,
    )
    print(
        f"wrote {summary['path']}: {summary['mb']:.2f} MB ({summary['mib']:.2f} MiB), "
        f"{summary['n_params']:,} parameters, tensor types {summary['tensor_types']}",
        file=sys.stderr,
    )
    return summary


if __name__ == "__main__":
    main()
