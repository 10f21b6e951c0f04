"""``python -m strata.cli bench spec-speed``: decode tok/s with the drafter off, auto (adaptive) and on, per
temperature, thread count and expert store, through ``generate``; median of alternated runs.

Registered in ``bench_cmd.BENCH_TOOLS``; the measurement is ``strata.bench.spec_speed``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]


def _list(kind: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    def parse(text: str) -> list[Any]:
        try:
            return [kind(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}") from None
    return parse


def register(tools: SubParsers) -> None:
    p = tools.add_parser(
        "spec-speed",
        help="decode tok/s with the drafter off / auto / on (median of alternated runs), MiB read per token",
        description=(
            "Generate from one prompt with the MTP drafter off, adaptive (auto) and always on, alternating "
            "the modes run by run, per temperature, thread count and expert store; report median tok/s, "
            "speed-up over off, tokens per round, drafts chosen, acceptance, adaptive speculation's "
            "estimated and measured gain, expert MiB read per token, and whether the temperature-0 texts "
            "agree. See docs/benchmarks.md."
        ),
    )
    p.add_argument("--model", type=Path, default=None,
                   help="a strata GGUF with an MTP layer (default: the demo)")
    p.add_argument("--temperatures", type=_list(float), default=[0.0, 0.7], help="comma list (0,0.7)")
    p.add_argument("--threads", type=_list(int), default=[1, 2], help="comma list of thread counts (1,2)")
    p.add_argument("--stores", type=_list(str), default=["mmap"],
                   help="comma list of expert stores: mmap, or 'stream 25%% direct' / 'stream 50%%', "
                        "optionally with 'prefetch=auto|on|off' (Config.expert_prefetch; default auto) "
                        "(mmap)")
    p.add_argument("--modes", type=_list(str), default=["off", "auto", "on"],
                   help="drafter modes (off,auto,on); auto+w / on+w add streaming-aware verification "
                        "windows (Config.moce_window = --window), +c exact window cuts "
                        "(Config.moce_window_cut = --cut), +r a drafter routed among resident experts "
                        "(Config.moce_drafter_resident); suffixes combine. A mode without +c / +r turns "
                        "those off: the library's defaults are auto+c+r with --cut 0.5")
    p.add_argument("--window", type=float, default=1.0,
                   help="window log-bonus λw of the +w modes (1.0; docs/routing.md)")
    p.add_argument("--cut", type=float, default=0.5,
                   help="τ of the +c modes' exact window cuts, in (0, 1] (0.5; docs/routing.md)")
    p.add_argument("--runs", type=int, default=5, help="runs per mode and case; the median is reported (5)")
    p.add_argument("--max-tokens", type=int, default=256, help="tokens generated per run (256)")
    p.add_argument("--draft-steps", type=int, default=3, help="largest drafts per round (3)")
    p.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    p.add_argument("--plot", type=Path, default=None,
                   help="plot speed-up against acceptance here (matplotlib)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from strata.bench import spec_speed

    bad = []
    for m in args.modes:
        try:
            spec_speed.mode_config(m, args.window, args.cut)
        except ValueError:
            bad.append(m)
    if bad or "off" not in args.modes:
        print(f"bench spec-speed: --modes must include off and be off, auto or on with any of +w, +c, +r "
              f"(got {args.modes})", file=sys.stderr)
        return 2
    if not 0.0 < args.window <= 8.0:
        print(f"bench spec-speed: --window must be in (0, 8], got {args.window}", file=sys.stderr)
        return 2
    for store in args.stores:
        try:
            spec_speed._store_config(store)
        except ValueError as e:
            print(f"bench spec-speed: --stores: {e}", file=sys.stderr)
            return 2
    if not 0.0 < args.cut <= 1.0:
        print(f"bench spec-speed: --cut must be in (0, 1], got {args.cut}", file=sys.stderr)
        return 2
    cases = spec_speed.run(None if args.model is None else str(args.model), temperatures=args.temperatures,
                           threads=args.threads, stores=args.stores, modes=args.modes, runs=args.runs,
                           max_tokens=args.max_tokens, draft_steps=args.draft_steps, window=args.window,
                           cut=args.cut)
    sys.stdout.write(spec_speed.render(cases) + "\n")
    if args.json is not None:
        args.json.write_text(json.dumps(spec_speed.as_json(cases), indent=1) + "\n")
    if args.plot is not None:
        name = args.model.name if args.model is not None else "demo model"
        spec_speed.plot(cases, args.plot, f"{name}: drafter speed-up against acceptance and expert reads")
    return 0
