"""``python -m strata.cli bench spec-processes``: speculation auto against off with one ``generate``
process per run, the cross-process cost cache empty or warm; median of alternated runs.

Registered in ``bench_cmd.BENCH_TOOLS``; the measurement is ``strata.bench.spec_processes``.
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
        "spec-processes",
        help="generate as separate processes: drafter off / auto with the cost cache empty / warm",
        description=(
            "Run `strata generate --stats` as one process per run, as a user does, with the drafter off, "
            "auto with the speculation cost cache emptied before each run (every session probes first) "
            "and auto with a warm cache file (sessions start seeded), alternating the modes run by run, "
            "per temperature and thread count; report the median decode tok/s printed by --stats, the "
            "median wall and CPU seconds of the process (start-up and model load included) and their "
            "ratios to off, and how many runs started seeded. The cache lives in a temporary folder. "
            "See docs/benchmarks.md."
        ),
    )
    p.add_argument("--model", type=Path, default=None, help="a GGUF with an MTP layer (default: the demo)")
    p.add_argument("--temperatures", type=_list(float), default=[0.0, 0.7], help="comma list (0,0.7)")
    p.add_argument("--threads", type=_list(int), default=[1, 2], help="comma list of thread counts (1,2)")
    p.add_argument("--runs", type=int, default=7, help="runs per mode and case; medians are reported (7)")
    p.add_argument("--max-tokens", type=int, default=256, help="tokens generated per run (256)")
    p.add_argument("--json", type=Path, default=None, help="also write the runs as JSON here")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from strata.bench import spec_processes

    if args.runs < 1 or args.max_tokens < 1 or not args.temperatures or not args.threads:
        print("bench spec-processes: --runs and --max-tokens must be >= 1, the lists non-empty",
              file=sys.stderr)
        return 2
    cases = spec_processes.run(None if args.model is None else str(args.model), args.temperatures,
                               args.threads, args.runs, args.max_tokens)
    sys.stdout.write(spec_processes.render(cases) + "\n")
    if args.json is not None:
        args.json.write_text(json.dumps(spec_processes.as_json(cases), indent=1) + "\n")
    return 0
