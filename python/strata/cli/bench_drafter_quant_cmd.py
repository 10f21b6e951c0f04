"""``strata bench drafter-quant``: the R-11 report (SPEC §2.10) of low-bit drafter weights.

Registered in ``bench_cmd.BENCH_TOOLS``; the measurement itself is ``strata.bench.drafter_quant``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]


def register(tools: SubParsers) -> None:
    p = tools.add_parser(
        "drafter-quant",
        help="R-11: GEMV error, bytes per draft step and acceptance of Q4_0/Q5_0 drafter weights",
        description=(
            "Per requantized drafter tensor and format (Q4_0 plain, Q4_0 Lloyd, Q5_0): the relative RMS "
            "error "
            "of the GEMV output on Gaussian inputs; the drafter bytes read per draft step with requant off / "
            "q5 / q4; and greedy speculative decoding of held-out stdlib files with each setting (tokens "
            "per round, per-step acceptance). See docs/quantization.md."
        ),
    )
    p.add_argument("--model", type=Path, default=None,
                   help="a strata GGUF with an MTP layer (default: the demo)")
    p.add_argument("--max-tokens", type=int, default=96, help="tokens generated per prompt (96)")
    p.add_argument("--draft-steps", type=int, default=3, help="drafts per round (3)")
    p.add_argument("--prompts", type=int, default=None, help="use only the first N held-out prompts")
    p.add_argument("--threads", type=int, default=0, help="engine threads (0 = the shared pool)")
    p.add_argument("--inputs", type=int, default=64, help="Gaussian inputs per GEMV error (64)")
    p.add_argument("--json", type=Path, default=None, help="also write the report as JSON here")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from strata.bench import drafter_quant as dq

    rep = dq.run(None if args.model is None else str(args.model), max_tokens=args.max_tokens,
                 draft_steps=args.draft_steps, threads=args.threads, n_inputs=args.inputs,
                 prompts=args.prompts)
    sys.stdout.write(dq.render(rep) + "\n")
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(rep), indent=1) + "\n")
    return 0
