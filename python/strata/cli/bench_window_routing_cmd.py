"""``python -m strata.cli bench window-routing``: what streaming-aware verification windows
(``STRATA_MOCE_WINDOW``) cost in perplexity and save in expert reads, teacher-forced on held-out text.

Registered in ``bench_cmd.BENCH_TOOLS``; the measurement is ``strata.bench.window_routing``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from strata.cli.bench_spec_speed_cmd import _list

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]


def register(tools: SubParsers) -> None:
    p = tools.add_parser(
        "window-routing",
        help="perplexity, expert MiB/token and experts per window with streaming-aware verification windows",
        description=(
            "Feed held-out text as verification windows of --rows tokens (every draft accepted), rows >= 1 "
            "marked as draft rows, per expert store and window log-bonus; report the perplexity the verifier "
            "sees (λw = 0 is exactly plain decoding's), expert MiB read per token and distinct experts per "
            "window and layer; windows of 1 row are the drafter-off baseline. See docs/benchmarks.md."
        ),
    )
    p.add_argument("--model", type=Path, default=None, help="a strata GGUF (default: the demo)")
    p.add_argument("--stores", type=_list(str), default=["mmap", "stream 25% direct", "stream 50% direct"],
                   help="comma list of expert stores ('mmap', 'stream 25%% direct', ...)")
    p.add_argument("--rows", type=int, default=4, help="rows per verification window (4 = 3 drafts)")
    p.add_argument("--window", type=_list(float), default=[0.5, 1.0, 2.0],
                   help="comma list of window log-bonuses λw to compare with 0 (0.5,1,2)")
    p.add_argument("--tokens", type=int, default=1024, help="held-out tokens (1024)")
    p.add_argument("--threads", type=int, default=0, help="engine threads (0 = the shared pool)")
    p.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from strata.bench import window_routing

    if args.rows < 2 or args.tokens < 128 or any(not 0 < b <= 8 for b in args.window):
        print("bench window-routing: --rows must be >= 2, --tokens >= 128, --window values in (0, 8]",
              file=sys.stderr)
        return 2
    from strata.model import DEMO_MODEL_PATH

    path = str(args.model if args.model is not None else DEMO_MODEL_PATH)
    try:
        results = window_routing.run(path, stores=args.stores, rows=args.rows, log_bonuses=args.window,
                                     n_tokens=args.tokens, threads=args.threads)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(window_routing.render(results) + "\n")
    if args.json is not None:
        args.json.write_text(json.dumps(window_routing.as_json(results), indent=1) + "\n")
    return 0
