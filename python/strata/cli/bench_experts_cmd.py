"""``strata bench experts``: the expert store against the resident fraction (SPEC §2.5, §6).

Registered in ``bench_cmd.BENCH_TOOLS``; the measurement itself is ``strata.bench.experts``.
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from strata.bench import experts as eb
from strata.bench.expert_model import ExpertModelShape, make_expert_model

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]


def _floats(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def register(tools: SubParsers) -> None:
    p = tools.add_parser(
        "experts",
        help="expert misses, bytes read, speed and perplexity vs resident fraction, with and without MOCE",
        description=(
            "Decode one token sequence teacher-forced with the experts streamed through caches of several "
            "sizes, with MOCE off and at several resident bonuses (and once in mmap mode, page cache "
            "dropped first); report miss rate, bytes read per token, stall, decode tok/s and perplexity. "
            "--generate writes a random model whose experts exceed the cache (a few GB). See docs/experts.md "
            "and docs/benchmarks.md."
        ),
    )
    p.add_argument("--model", type=Path, default=None, help="a strata/qwen3moe GGUF file")
    p.add_argument("--generate", type=Path, default=None, metavar="PATH",
                   help="write a random expert-heavy model to PATH (if missing) and benchmark it")
    p.add_argument("--shape", choices=("big", "demo"), default="big",
                   help="--generate: 'big' (experts of --gb GB) or 'demo' (demo-model scale, experts ~17 MB)")
    p.add_argument("--gb", type=float, default=3.0, help="experts of the 'big' --generate model in GB (3)")
    p.add_argument("--router-scale", type=float, default=1.0,
                   help="scale of the --generate model's router weights (1; larger = peakier routing)")
    p.add_argument("--text", type=Path, default=None,
                   help="held-out text for the perplexity (the model's tokenizer); default: a sequence "
                        "sampled from the model itself")
    p.add_argument("--fractions", type=_floats, default=eb.BenchConfig.fractions, metavar="F1,F2,...",
                   help="resident fractions in (0, 1] (default 0.1,0.25,0.5,0.75,1)")
    p.add_argument("--bonus", type=_floats, default=(0.5, 1.0, 2.0), metavar="L1,L2,...",
                   help="MOCE log-bonuses λ > 0 run besides MOCE off (default 0.5,1,2; 0 = MOCE off only)")
    p.add_argument("--rank1", type=float, default=1.0, help="MOCE rank-1 scale r for the bonus runs (1)")
    p.add_argument("--protect", type=int, default=0, help="MOCE protection r_prot for the bonus runs (0)")
    p.add_argument("--tokens", type=int, default=eb.BenchConfig.tokens, help="decode steps measured (128)")
    p.add_argument("--prompt", type=int, default=eb.BenchConfig.prompt, help="tokens prefilled first (32)")
    p.add_argument("--threads", type=int, default=0, help="compute threads (0 = all cores)")
    p.add_argument("--io-threads", type=int, default=4, help="expert reader threads (4)")
    p.add_argument("--direct-io", choices=("auto", "on", "off"), default="auto")
    p.add_argument("--no-mmap", action="store_true", help="skip the mmap-mode run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None, metavar="OUT")
    p.add_argument("--csv", type=Path, default=None, metavar="OUT")
    p.add_argument("--markdown", type=Path, default=None, metavar="OUT", help="tables for docs/benchmarks.md")
    p.add_argument("--plot", type=Path, default=None, metavar="OUT.png")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if (args.model is None) == (args.generate is None):
        print("error: give exactly one of --model PATH or --generate PATH", file=sys.stderr)
        return 2
    if any(not 0.0 < f <= 1.0 for f in args.fractions):
        print("error: --fractions must lie in (0, 1]", file=sys.stderr)
        return 2
    if any(b < 0 for b in args.bonus) or (0 in args.bonus and len(args.bonus) > 1):
        print("error: --bonus takes log-bonuses λ > 0 (MOCE off is always run), or just 0 for no MOCE runs",
              file=sys.stderr)
        return 2
    if args.tokens < 1 or args.prompt < 1:
        print("error: --tokens and --prompt must be >= 1", file=sys.stderr)
        return 2
    path = args.model
    if args.generate is not None:
        path = args.generate
        if not path.exists():
            demo = args.shape == "demo"
            base = ExpertModelShape.demo_scale() if demo else ExpertModelShape.for_size(args.gb)
            shape = base.with_router_scale(args.router_scale)
            print(f"writing {path} ({shape.layers} layers, experts {shape.expert_bytes() / 1e9:.2f} GB) ...",
                  file=sys.stderr)
            make_expert_model(path, shape, seed=args.seed)
    moce = [eb.MoceSetting()] + [eb.MoceSetting(b, args.rank1, args.protect) for b in args.bonus if b > 0]
    cfg = eb.BenchConfig(fractions=tuple(args.fractions), moce=tuple(moce), tokens=args.tokens,
                         prompt=args.prompt, n_threads=args.threads, io_threads=args.io_threads,
                         direct_io=args.direct_io, with_mmap=not args.no_mmap, seed=args.seed)
    report = eb.run_bench(path, cfg, text=args.text, progress=lambda s: print(s, file=sys.stderr, flush=True))
    command = "strata bench experts " + " ".join(shlex.quote(a) for a in sys.argv[3:])
    text = eb.markdown(report, command)
    print(text)
    if args.markdown is not None:
        args.markdown.write_text(text, encoding="utf-8")
    if args.json is not None:
        args.json.write_text(json.dumps(report.as_dict(), indent=1) + "\n", encoding="utf-8")
    if args.csv is not None:
        with args.csv.open("w", newline="", encoding="utf-8") as f:
            rows = [asdict(r) for r in report.runs]
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    if args.plot is not None:
        eb.plot(report, args.plot)
    return 0
