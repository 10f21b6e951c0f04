"""``python -m strata.cli bench ds4-model``: write the random DeepSeek-V4 (``deepseek4``) benchmark model.

Registered in ``bench_cmd.BENCH_TOOLS``; the writer is ``strata.bench.ds4_model``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from strata.bench.ds4_model import BLOCK_TYPES, Ds4Shape, make_ds4_model
from strata.bench.files import write_atomically

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

# A shape small enough for a test (a few hundred kB) with every layer kind of the full one.
TINY = Ds4Shape(layers=4, d=128, heads=4, head_dim=64, rope_dim=16, q_lora=64, o_groups=2, o_lora=32,
                index_heads=4, index_dim=64, index_topk=4, window=16, experts=8, experts_used=2,
                expert_ffn=64, vocab=300, hash_layers=1)


def register(tools: SubParsers) -> None:
    base = Ds4Shape()
    p = tools.add_parser(
        "ds4-model",
        help="write a random DeepSeek-V4 (deepseek4) GGUF of V4-Flash's layer structure, scaled down",
        description=(
            "Write a seeded random llama.cpp `deepseek4` GGUF with V4-Flash's per-layer structure (4 "
            "hyper-connection streams, two sliding layers then CSA with the lightning indexer and HCA "
            "alternating, 3 hash-routed layers, grouped low-rank output, a shared expert, 6 experts used) "
            "scaled down: by default 12 layers of width 1024 with 128 experts of 512, ~2.6 GB in Q8_0 "
            "(2448 MiB of routed experts). Matrices are random Q8_0 / Q4_0 blocks written one tensor at a "
            "time. Prints the path. See strata/bench/ds4_model.py and docs/benchmarks.md."
        ),
    )
    p.add_argument("--out", type=Path, default=Path("/tmp/strata-stream-bench"),
                   help="output file, or a folder for the default name (/tmp/strata-stream-bench)")
    p.add_argument("--layers", type=int, default=base.layers, help=f"blocks ({base.layers})")
    p.add_argument("--experts", type=int, default=base.experts,
                   help=f"routed experts per layer ({base.experts})")
    p.add_argument("--expert-ffn", type=int, default=base.expert_ffn,
                   help=f"routed expert width ({base.expert_ffn})")
    p.add_argument("--type", dest="qtype", type=str.upper, choices=sorted(BLOCK_TYPES), default="Q8_0",
                   help="storage of every matrix (Q8_0)")
    p.add_argument("--tiny", action="store_true", help="a test-sized model (the shape options are ignored)")
    p.add_argument("--seed", type=int, default=0, help="random seed (0)")
    p.add_argument("--force", action="store_true", help="rewrite the file even if it exists")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    shape = TINY if args.tiny else Ds4Shape(layers=args.layers, experts=args.experts,
                                            expert_ffn=args.expert_ffn)
    shape = shape.with_changes(expert_type=args.qtype)
    try:
        shape.check()
    except ValueError as e:
        print(f"bench ds4-model: {e}", file=sys.stderr)
        return 2
    out: Path = args.out
    if out.suffix != ".gguf":
        out = out / shape.file_name(args.seed)
    if out.exists() and not args.force:
        print(out)
        return 0
    try:
        write_atomically(out, lambda part: make_ds4_model(part, shape, args.seed))
    except OSError as e:
        print(f"bench ds4-model: {e}", file=sys.stderr)
        return 1
    mib = 1 << 20
    print(f"{shape.layers} blocks, {shape.experts} experts of {shape.expert_ffn}: "
          f"{out.stat().st_size / mib:.0f} MiB (routed experts {shape.expert_bytes() / mib:.0f} MiB)",
          file=sys.stderr)
    print(out)
    return 0
