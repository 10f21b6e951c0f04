"""``python -m strata.cli bench wide-model``: write the memory-bound widening of the demo model to a cache
folder.

Registered in ``bench_cmd.BENCH_TOOLS``; the transformation is ``strata.bench.wide_model``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from strata.bench import wide_model
from strata.bench.files import write_atomically
from strata.user_cache import user_cache_dir

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

DEFAULT_EXPERT_MULT = 4
DEFAULT_SHARED_MULT = 32
DEFAULT_EXTRA_LAYERS = 12


def wide_model_name(expert_mult: int, shared_mult: int, extra_layers: int) -> str:
    return f"strata-demo-wide-e{expert_mult}-s{shared_mult}-l{extra_layers}.gguf"


def register(tools: SubParsers) -> None:
    p = tools.add_parser(
        "wide-model",
        help="write a memory-bound copy of the demo model (same function, FFNs widened with zero units)",
        description=(
            "Widen every routed expert of the demo model by --expert-mult and the shared expert by "
            "--shared-mult with hidden units that contribute exactly zero (copied gate/up rows, zero "
            "down-projection blocks), and insert --extra-layers blocks whose output is cut (zero output "
            "projections, identity hyper-connection mixing up to its 1e-6 epsilon), so the model decodes "
            "the same tokens with the same trained drafter but reads far more bytes per token and a draft "
            "step is a small part of a step. The defaults give ~470 MiB of Q8_0 weights (over 14x a 32 MiB "
            "L3). Prints the path. See strata/bench/wide_model.py and docs/benchmarks.md."
        ),
    )
    p.add_argument("--model", type=Path, default=None, help="the strata GGUF to widen (default: the demo)")
    p.add_argument("--out", type=Path, default=None,
                   help="output file, or a folder (default: $XDG_CACHE_HOME/strata or ~/.cache/strata)")
    p.add_argument("--expert-mult", type=int, default=DEFAULT_EXPERT_MULT,
                   help=f"routed expert width multiplier ({DEFAULT_EXPERT_MULT})")
    p.add_argument("--shared-mult", type=int, default=DEFAULT_SHARED_MULT,
                   help=f"shared expert width multiplier ({DEFAULT_SHARED_MULT})")
    p.add_argument("--extra-layers", type=int, default=DEFAULT_EXTRA_LAYERS,
                   help=f"inserted blocks after the main ones ({DEFAULT_EXTRA_LAYERS})")
    p.add_argument("--force", action="store_true", help="rewrite the file even if it exists")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    src = args.model or wide_model.default_demo_path()
    if args.expert_mult < 1 or args.shared_mult < 1 or args.extra_layers < 0:
        print("bench wide-model: --expert-mult and --shared-mult must be >= 1, --extra-layers >= 0",
              file=sys.stderr)
        return 2
    out: Path = args.out or user_cache_dir()
    if out.suffix != ".gguf":
        out = out / wide_model_name(args.expert_mult, args.shared_mult, args.extra_layers)
    if out.exists() and not args.force:
        print(out)
        return 0
    try:
        rep = write_atomically(out, lambda part: wide_model.widen_model(
            src, part, expert_mult=args.expert_mult, shared_mult=args.shared_mult,
            extra_layers=args.extra_layers))
    except (OSError, ValueError) as e:
        print(f"bench wide-model: {e}", file=sys.stderr)
        return 1
    mib = 1 << 20
    print(f"{rep.blocks} blocks, expert width {rep.expert_ffn}, shared width {rep.shared_ffn}: "
          f"{rep.file_bytes / mib:.0f} MiB "
          f"(routed experts {rep.expert_bytes / mib:.0f} MiB, shared {rep.shared_bytes / mib:.0f} MiB)",
          file=sys.stderr)
    print(out)
    return 0
