"""``strata bench spec``: speculative decoding with and without the drafter, per retention
policy and temperature, and the measured rounds file for ``bench retention --measured``.

Registered in ``bench_cmd.BENCH_TOOLS``; the measurement itself is ``strata.bench.spec``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]


def register(tools: SubParsers) -> None:
    p = tools.add_parser(
        "spec",
        help="tokens/round, per-step acceptance and decode tok/s with vs without the drafter, per policy",
        description=(
            "Decode held-out stdlib prompts with the MTP drafter off and on, at temperature 0 and 0.7, "
            "under the retention policies (keep all, flat min-p, schedule, cumulative, both); best of "
            "--runs runs. Then record greedy rounds with retention off (drafter confidences, accept flags, "
            "measured costs) as a strata.retention-rounds file and score it like `bench retention "
            "--measured`. See docs/benchmarks.md."
        ),
    )
    p.add_argument("--model", type=Path, default=None,
                   help="a strata GGUF with an MTP layer (default: the demo)")
    p.add_argument("--max-tokens", type=int, default=96, help="tokens generated per prompt (96)")
    p.add_argument("--draft-steps", type=int, default=3, help="drafts per round (3)")
    p.add_argument("--runs", type=int, default=3, help="runs per case; the best tok/s is reported (3)")
    p.add_argument("--prompts", type=int, default=None, help="use only the first N held-out prompts")
    p.add_argument("--threads", type=int, default=0, help="engine threads (0 = the shared pool)")
    p.add_argument("--rounds-out", type=Path, default=None, metavar="FILE",
                   help="keep the measured rounds file here, for `bench retention --measured FILE` "
                   "(default: a temporary file, removed afterwards)")
    p.add_argument("--json", type=Path, default=None, help="also write the report as JSON here")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.rounds_out is not None:
        return _measure(args, args.rounds_out)
    with tempfile.TemporaryDirectory(prefix="strata-spec-") as tmp:
        return _measure(args, Path(tmp) / "spec-rounds.json")


def _measure(args: argparse.Namespace, rounds_out: Path) -> int:
    from strata.bench import retention as rt
    from strata.bench import spec
    from strata.cli.retention_report import print_report

    rep, doc = spec.run(None if args.model is None else str(args.model), max_tokens=args.max_tokens,
                        draft_steps=args.draft_steps, runs=args.runs, threads=args.threads,
                        prompts=args.prompts, rounds_out=rounds_out)
    sys.stdout.write(spec.render(rep) + "\n\n")
    kept = f" -> {rounds_out}" if args.rounds_out is not None else " (--rounds-out FILE keeps them)"
    sys.stdout.write(f"measured rounds: {len(doc['rounds'])}{kept}; costs (ms) {doc['costs']}\n\n")
    data = rt.load_measured(rounds_out)
    report = rt.evaluate_measured(data, data.costs or rt.CostModel(), args.draft_steps, 10,
                                  source=str(args.rounds_out or "the measured rounds"))
    print_report(report, full=False, plain=True)
    if args.json is not None:
        doc_out = {"spec": asdict(rep), "retention": report.as_dict()}
        args.json.write_text(json.dumps(doc_out, indent=1) + "\n")
    return 0
