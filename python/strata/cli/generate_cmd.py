"""``python -m strata.cli generate [PROMPT]``: continue a prompt with a model and stream the text.

Also holds the options ``chat`` and ``perplexity`` share: the model, the sampling flags and the
engine flags (each falls back to the ``STRATA_*`` environment, see docs/settings.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from strata.errors import ConfigError, InvalidArgument

if TYPE_CHECKING:
    from strata.config import Config
    from strata.model import Model
    from strata.sampling import SamplingPolicy
    from strata.session import Session

EPILOG = """\
examples:
  python -m strata.cli generate "def fibonacci(n):"              (the shipped demo model)
  python -m strata.cli generate --model m.gguf --temperature 0.7 --seed 1 "import os"
  echo "class Stack:" | python -m strata.cli generate --stats --max-tokens 64
"""

# SamplingPolicy field -> the flag that sets it (for error messages that name what the user typed).
_SAMPLING_FLAGS = {
    "temperature": "--temperature", "top_k": "--top-k", "top_p": "--top-p", "min_p": "--min-p",
    "repetition_penalty": "--repetition-penalty", "presence_penalty": "--presence-penalty",
    "penalty_last_n": "--penalty-last-n", "seed": "--seed",
}
_CONFIG_FLAGS = {"threads": "--threads", "context_length": "--context", "draft_steps": "--draft-steps",
                 "speculative": "--speculative"}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "generate",
        help="continue a prompt and stream the generated text",
        description="Continue PROMPT with a model and stream the generated text to stdout.\n"
        "Without --model the demo model shipped with strata is used. Decoding is greedy\n"
        "(deterministic) unless --temperature is above 0. Models with an MTP layer decode\n"
        "speculatively (the same text at temperature 0, the same distribution above): by default\n"
        "each round drafts only as many tokens as the measured draft and verification costs and\n"
        "the live acceptance say pay, and none when they do not (--stats shows the choices and\n"
        "the estimated and measured gain).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("prompt", nargs="?", default=None,
                   help="the text to continue; omit it or give '-' to read it from stdin")
    add_model_argument(p)
    p.add_argument("--max-tokens", type=int, default=256, metavar="N",
                   help="generate at most N tokens (default 256)")
    p.add_argument("--stop", action="append", default=None, metavar="TEXT",
                   help="stop when TEXT is generated (not printed); repeat for several")
    p.add_argument("--echo", action="store_true", help="print the prompt before the generated text")
    p.add_argument("--stats", action="store_true",
                   help="print token counts, speeds and speculative acceptance to stderr afterwards")
    p.add_argument("--load", type=Path, default=None, metavar="FILE",
                   help="continue the session saved in FILE (its tokens, RNG, sampling and engine "
                   "settings; the flags for those are ignored); without PROMPT it just continues")
    p.add_argument("--save", type=Path, default=None, metavar="FILE",
                   help="save the session to FILE afterwards (docs/sessions.md)")
    add_sampling_arguments(p)
    add_engine_arguments(p)
    p.set_defaults(func=run)


# ------------------------------------------------------------------------------------ shared options
def add_model_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", "-m", type=Path, default=None, metavar="PATH",
                   help="GGUF model file (default: the demo model shipped with strata)")


def add_sampling_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sampling")
    g.add_argument("--temperature", "-t", type=float, default=0.0, metavar="T",
                   help="0 = greedy, deterministic (default); higher = more random")
    g.add_argument("--top-k", type=int, default=0, metavar="K",
                   help="keep the K most likely tokens (0 = off)")
    g.add_argument("--top-p", type=float, default=1.0, metavar="P",
                   help="keep the most likely tokens up to mass P (1 = off)")
    g.add_argument("--min-p", type=float, default=0.0, metavar="P",
                   help="drop tokens below P x the most likely one (0 = off)")
    g.add_argument("--repetition-penalty", type=float, default=1.0, metavar="R",
                   help="penalise tokens already seen (1 = off; 1.1 is mild)")
    g.add_argument("--presence-penalty", type=float, default=0.0, metavar="X",
                   help="subtract X from the logit of every token already seen (0 = off)")
    g.add_argument("--penalty-last-n", type=int, default=-1, metavar="N",
                   help="the penalties look at the last N tokens (-1 = all, default)")
    g.add_argument("--seed", type=int, default=None, metavar="S",
                   help="random seed, for reproducible sampling (default: random)")


def add_engine_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("engine (defaults come from the STRATA_* environment, see docs/settings.md)")
    g.add_argument("--threads", type=int, default=None, metavar="N",
                   help="worker threads (0 = one per core)")
    g.add_argument("--context", type=int, default=None, metavar="N",
                   help="context length in tokens (0 = the model's)")
    g.add_argument("--speculative", choices=("auto", "on", "off"), default=None,
                   help="MTP speculative decoding: auto = adaptive draft count per round (0..--draft-steps, "
                        "from measured costs and acceptance), on = always --draft-steps, off = never")
    g.add_argument("--draft-steps", type=int, default=None, metavar="K",
                   help="drafts per speculative round (1..16, default 3)")


def load_model(args: argparse.Namespace) -> Model:
    from strata.model import Model

    return Model(args.model)


def config_from(args: argparse.Namespace, err: TextIO | None = None) -> Config:
    """Config.from_env() (diagnostics printed as warnings) with the command-line flags on top."""
    from strata.config import Config

    config, diagnostics = Config.parse_env()
    for d in diagnostics:
        print(f"warning: {d}", file=err or sys.stderr)
    changes: dict[str, Any] = {}
    if getattr(args, "threads", None) is not None:
        changes["threads"] = args.threads
    if getattr(args, "context", None) is not None:
        changes["context_length"] = args.context
    if getattr(args, "speculative", None) is not None:
        changes["speculative"] = {"auto": None, "on": True, "off": False}[args.speculative]
    if getattr(args, "draft_steps", None) is not None:
        changes["draft_steps"] = args.draft_steps
    try:
        return config.replace(**changes)
    except ConfigError as exc:
        raise ConfigError(_flag_message(str(exc), "Config.", _CONFIG_FLAGS)) from None


def sampling_from(args: argparse.Namespace) -> SamplingPolicy:
    from strata.sampling import SamplingPolicy

    try:
        return SamplingPolicy(
            temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
            repetition_penalty=args.repetition_penalty, presence_penalty=args.presence_penalty,
            penalty_last_n=args.penalty_last_n, seed=args.seed,
        )
    except InvalidArgument as exc:
        raise InvalidArgument(_flag_message(str(exc), "SamplingPolicy.", _SAMPLING_FLAGS)) from None


def _flag_message(message: str, prefix: str, flags: dict[str, str]) -> str:
    for field, flag in flags.items():
        head = f"{prefix}{field}"
        if message.startswith(head + " ") or message.startswith(head + ":"):
            return flag + message[len(head):]
    return message


def open_session(args: argparse.Namespace) -> Session:
    """The model, config and sampling policy of the command line, as one session."""
    sampling = sampling_from(args)
    config = config_from(args)
    return load_model(args).session(config=config, sampling=sampling)


def write(out: TextIO, text: str) -> None:
    out.write(text)
    out.flush()


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
            print(session.stats.summary(), file=sys.stderr)
        if args.save is not None:
            session.save(args.save)
        return 130
    if args.stats:
        print(session.stats.summary(), file=sys.stderr)
    if args.save is not None:
        session.save(args.save)
    return 0
