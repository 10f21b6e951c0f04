"""``strata bench TOOL``: measurement and analysis tools, one sub-subcommand each.

The group keeps a registry like ``commands.ALL`` one level down: ``BENCH_TOOLS`` lists functions
``register(tools)`` that add one parser to the group's subparsers and set ``func`` on it. A new tool
(``bench spec``, ``bench experts``, ``bench gemv``) lives in its own module and adds its
``register`` to that list; this module also holds the first tool, ``bench retention`` (SPEC R-4).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from strata.bench import llama_compare
from strata.bench import retention as rt
from strata.cli import (
    bench_drafter_quant_cmd,
    bench_ds4_model_cmd,
    bench_experts_cmd,
    bench_spec_cmd,
    bench_spec_processes_cmd,
    bench_spec_speed_cmd,
    bench_stream_cmd,
    bench_wide_model_cmd,
    bench_window_routing_cmd,
)
from strata.cli.retention_report import plot_report, print_report, write_csv

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

BenchRegister = Callable[["SubParsers"], None]


def register(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="measurement and analysis tools (retention, ...)",
        description="Measurement and analysis tools; `bench TOOL --help` describes each.",
    )
    tools = parser.add_subparsers(dest="bench_tool", metavar="TOOL")
    for add_tool in BENCH_TOOLS:
        add_tool(tools)

    def no_tool(_: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    parser.set_defaults(func=no_tool)


# ---------------------------------------------------------------------------------------------
# bench retention
# ---------------------------------------------------------------------------------------------


def _float_list(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def register_retention(tools: SubParsers) -> None:
    p = tools.add_parser(
        "retention",
        help="economics of draft retention policies (SPEC R-4)",
        description=(
            "Score draft-retention policies (flat min-p, per-step schedule, cumulative floor, both) by "
            "committed tokens per unit cost against keep-all, keep-none and the oracle. Without "
            "--measured: every chain of the grid 0.1..1.0 with acceptance = confidence. With "
            "--measured: recorded rounds, acceptance estimated per confidence bin. "
            "See docs/retention-economics.md."
        ),
    )
    p.add_argument("--verifier-costs", type=_float_list, default=None, metavar="C1,C2,...",
                   help="verifier cost for 1, 2, ... rows (default 1,1.02,1.25,1.6 or the measured file's)")
    p.add_argument("--draft-cost", type=float, default=None, metavar="COST",
                   help="fixed cost of drafting one round's chain (default 0.15 or the measured file's)")
    p.add_argument("--max-drafts", type=int, default=rt.DEFAULT_MAX_DRAFTS, metavar="K",
                   help="drafts per round (default 3)")
    p.add_argument("--schedule", type=_float_list, default=None, metavar="P0,P1,...",
                   help="also score this per-step floor schedule (the last repeats), together with "
                   "--cum-floor when given: the policy `strata generate --draft-min-p P0,P1,... "
                   "--draft-min-cum-p F` runs (family 'given' in the table)")
    p.add_argument("--cum-floor", type=float, default=None, metavar="F",
                   help="also score this cumulative floor (with --schedule when given)")
    p.add_argument("--measured", type=Path, default=None, metavar="FILE",
                   help="measured rounds (.json, or .csv with round,step,confidence,accepted)")
    p.add_argument("--bins", type=int, default=10, help="confidence bins for the acceptance estimate")
    p.add_argument("--full", action="store_true", help="print every evaluated setting, not the best ones")
    p.add_argument("--plain", action="store_true", help="plain-text tables even when rich is installed")
    p.add_argument("--json", type=Path, default=None, metavar="OUT", help="write the full report as JSON")
    p.add_argument("--csv", type=Path, default=None, metavar="OUT", help="write every result as CSV")
    p.add_argument("--plot", type=Path, default=None, metavar="OUT.png",
                   help="plot tokens/cost per policy parameter (needs matplotlib)")
    p.add_argument("--write-example", type=Path, default=None, metavar="FILE",
                   help="write a synthetic measured-rounds JSON file and exit")
    p.add_argument("--example-rounds", type=int, default=2000, help="rounds in --write-example (2000)")
    p.add_argument("--seed", type=int, default=0, help="seed of --write-example (0)")
    p.set_defaults(func=run_retention)


def _costs(args: argparse.Namespace, measured: rt.MeasuredData | None) -> rt.CostModel:
    base = measured.costs if measured is not None and measured.costs is not None else rt.CostModel()
    if args.verifier_costs is None and args.draft_cost is None:
        return base
    verifier = args.verifier_costs if args.verifier_costs is not None else base.verifier
    if args.draft_cost is not None:
        return rt.CostModel(verifier, args.draft_cost, base.unit)
    return rt.CostModel(verifier, base.draft, base.unit, base.draft_steps)


def _policies(args: argparse.Namespace) -> list[rt.RetentionPolicy] | None:
    """The default sweep plus the policy of --schedule / --cum-floor (None: the sweep alone)."""
    if args.schedule is None and args.cum_floor is None:
        return None
    given = rt.RetentionPolicy("given", tuple(args.schedule or ()), 0.0 if args.cum_floor is None
                               else args.cum_floor)
    return [*rt.default_sweep(args.max_drafts), given]


def run_retention(args: argparse.Namespace) -> int:
    try:
        if args.write_example is not None:
            path = rt.write_example(args.write_example, args.example_rounds, args.max_drafts, args.seed)
            print(f"wrote {args.example_rounds} synthetic rounds to {path}")
            return 0
        policies = _policies(args)
        if args.measured is not None:
            data = rt.load_measured(args.measured)
            report = rt.evaluate_measured(data, _costs(args, data), args.max_drafts, args.bins,
                                          policies=policies, source=str(args.measured))
        else:
            report = rt.evaluate_grid(_costs(args, None), args.max_drafts, policies=policies)
        print_report(report, full=args.full, plain=args.plain)
        if args.json is not None:
            _write(args.json, json.dumps(report.as_dict(), indent=1) + "\n")
        if args.csv is not None:
            write_csv(report, args.csv)
        if args.plot is not None:
            plot_report(report, args.plot)
    except rt.RetentionInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise rt.RetentionInputError(f"{path}: cannot write ({exc.strerror or exc})") from None


BENCH_TOOLS: list[BenchRegister] = [register_retention, bench_experts_cmd.register,
                                     bench_drafter_quant_cmd.register, bench_spec_cmd.register,
                                     llama_compare.register, bench_wide_model_cmd.register,
                                     bench_spec_speed_cmd.register, bench_stream_cmd.register,
                                     bench_window_routing_cmd.register, bench_ds4_model_cmd.register,
                                     bench_spec_processes_cmd.register]
