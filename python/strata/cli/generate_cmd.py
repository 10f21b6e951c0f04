"""``strata generate [PROMPT]``: continue a prompt with a model and stream the text.

The options it shares with ``chat``, ``serve`` and ``perplexity`` live in ``strata.cli.options``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from strata.cli.options import (
    add_engine_arguments,
    add_max_tokens_argument,
    add_model_argument,
    add_sampling_arguments,
    open_session,
    print_stats,
    write,
)
from strata.errors import InvalidArgument

EPILOG = """\
examples:
  strata generate "def fibonacci(n):"                  (the shipped demo model, recommended sampling)
  strata generate -m m.gguf --temp 0 -n 64 "import os"  (greedy: the same text every run)
  strata generate --expert-cache 25% --stats "class Stack:"   (experts streamed, 25 % resident)
  echo "class Stack:" | strata generate --stats -n 64
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "generate",
        help="continue a prompt and stream the generated text",
        description="Continue PROMPT with a model and stream the generated text to stdout.\n"
        "Without --model the demo model shipped with strata is used. Sampling follows the\n"
        "recommended policy (temperature 0.7, top-k 40, top-p 0.95, min-p 0.05, repeat penalty\n"
        "1.15 over the last 128 tokens); --temp 0 decodes greedily (deterministic). Models with an\n"
        "MTP layer decode speculatively: by default each round drafts only as many tokens as the\n"
        "measured draft and verification costs and the live acceptance say pay (none when they\n"
        "do not), and the text is the one plain decoding gives with the same seed (--stats shows\n"
        "the draft counts chosen and the estimated and measured gain). Those costs are kept in\n"
        "the user's cache folder ($STRATA_CACHE_DIR, else $XDG_CACHE_HOME/strata or\n"
        "~/.cache/strata), so the next run with the same model and settings starts from them\n"
        "instead of probing (STRATA_SPEC_CACHE=off: never read or written).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("prompt", nargs="?", default=None,
                   help="the text to continue; omit it or give '-' to read it from stdin")
    add_model_argument(p)
    add_max_tokens_argument(p, 256, "")
    p.add_argument("--stop", action="append", default=None, metavar="TEXT",
                   help="stop when TEXT is generated (not printed); repeat for several")
    p.add_argument("--echo", action="store_true", help="print the prompt before the generated text")
    p.add_argument("--stats", action="store_true",
                   help="print to stderr afterwards: token counts, prefill and decode tok/s (decode: "
                   "the tokens after the first, which the prefill gives, per second after it), "
                   "speculative rounds, acceptance per draft step, the draft counts chosen, adaptive "
                   "speculation's estimated and "
                   "measured gain over a plain step and whether it started from costs measured before "
                   "(seeded), and expert hits/misses")
    p.add_argument("--load", type=Path, default=None, metavar="FILE",
                   help="continue the session saved in FILE (its tokens, RNG, sampling and engine "
                   "settings; the flags for those are ignored); without PROMPT it just continues")
    p.add_argument("--save", type=Path, default=None, metavar="FILE",
                   help="save the session to FILE afterwards (docs/sessions.md)")
    add_sampling_arguments(p)
    add_engine_arguments(p)
    p.set_defaults(func=run)


# ------------------------------------------------------------------------------------------ command
def _read_prompt(args: argparse.Namespace) -> str:
    if args.prompt is not None and args.prompt != "-":
        return str(args.prompt)
    if sys.stdin.isatty():
        print("reading the prompt from stdin (end it with Ctrl-D)...", file=sys.stderr)
    try:
        return sys.stdin.read()
    except UnicodeDecodeError:
        raise InvalidArgument("the prompt on stdin is not valid UTF-8 text") from None


def run(args: argparse.Namespace) -> int:
    if args.max_tokens < 0:
        raise InvalidArgument(f"--max-tokens must be >= 0, got {args.max_tokens}")
    session = open_session(args)
    if args.load is not None:
        session.load(args.load)
    prompt = "" if args.load is not None and args.prompt is None else _read_prompt(args)
    stream = session.generate(prompt, max_tokens=args.max_tokens, stop=args.stop)
    out = sys.stdout
    last = ""
    try:
        if args.echo:
            write(out, prompt)
            last = prompt[-1:] or last
        for piece in stream:
            write(out, piece)
            last = piece[-1:] or last
        if last and last != "\n":
            write(out, "\n")
        out.flush()  # the text before the stats (stderr) when both go to one file
    except BrokenPipeError:  # `generate ... | head`: the reader went away
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        write(out, "\n")
        if args.stats:
            print_stats(session)
        if args.save is not None:
            session.save(args.save)
        return 130
    if args.stats:
        print_stats(session)
    if args.save is not None:
        session.save(args.save)
    return 0

