"""The options ``generate``, ``chat``, ``serve`` and ``perplexity`` share, and what they turn into.

Spellings follow llama.cpp's ``llama-cli`` and mlx-lm where a user already has a habit (``-m``,
``-n``, ``-c``, ``-t`` = threads, ``--temp``, ``-s``, ``--repeat-penalty``); the long strata names stay
as aliases. Every sampling flag defaults to "not given" so that the policy can be resolved as a whole:
the recommended policy (``SamplingPolicy.recommended``) when the temperature is above 0, plain greedy
decoding when it is 0, with the flags the user gave on top. Engine flags fall back to the ``STRATA_*``
environment (docs/settings.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from strata.errors import ConfigError, InvalidArgument

if TYPE_CHECKING:
    from strata.config import Config
    from strata.model import Model
    from strata.sampling import SamplingPolicy
    from strata.session import Session

# SamplingPolicy field -> the flag that sets it (for error messages that name what the user typed).
_SAMPLING_FLAGS = {
    "temperature": "--temp", "top_k": "--top-k", "top_p": "--top-p", "min_p": "--min-p",
    "repetition_penalty": "--repeat-penalty", "presence_penalty": "--presence-penalty",
    "penalty_last_n": "--repeat-last-n", "seed": "--seed",
}
_CONFIG_FLAGS = {"threads": "--threads", "context_length": "--ctx-size", "draft_steps": "--draft-steps",
                 "speculative": "--speculative", "expert_mode": "--experts", "expert_cache": "--expert-cache",
                 "spec_min_p_schedule": "--draft-min-p", "spec_min_cum_p": "--draft-min-cum-p",
                 "kv_type": "--kv-type"}


# --------------------------------------------------------------------------------------- registering
def add_model_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("-m", "--model", type=Path, default=None, metavar="PATH",
                   help="GGUF model file (default: the demo model shipped with strata)")
    p.add_argument("--mtp-model", type=Path, default=None, metavar="PATH",
                   help="a deepseek4 model's separate MTP file (llama.cpp's mtp-*.gguf) to draft with "
                        "(default: mtp-<model file name> beside the model when it exists)")


def add_max_tokens_argument(p: argparse.ArgumentParser, default: int, what: str) -> None:
    p.add_argument("-n", "--max-tokens", "--n-predict", dest="max_tokens", type=int, default=default,
                   metavar="N", help=f"generate at most N tokens{what} (default {default})")


def add_sampling_arguments(p: argparse.ArgumentParser) -> None:
    from strata.sampling import SamplingPolicy

    r = SamplingPolicy.recommended()
    g = p.add_argument_group(
        "sampling (defaults: the recommended policy, docs/sampling.md; --temp 0 = plain greedy decoding, "
        "the other sampling defaults then off)")
    g.add_argument("--temp", "--temperature", dest="temperature", type=float, default=None, metavar="T",
                   help=f"temperature; 0 = greedy, deterministic (default {r.temperature:g})")
    g.add_argument("--top-k", type=int, default=None, metavar="K",
                   help=f"keep the K most likely tokens (0 = off; default {r.top_k})")
    g.add_argument("--top-p", type=float, default=None, metavar="P",
                   help=f"keep the most likely tokens up to mass P (1 = off; default {r.top_p:g})")
    g.add_argument("--min-p", type=float, default=None, metavar="P",
                   help=f"drop tokens below P x the most likely one (0 = off; default {r.min_p:g})")
    g.add_argument("--repeat-penalty", "--repetition-penalty", dest="repetition_penalty", type=float,
                   default=None, metavar="R",
                   help=f"penalise tokens seen in the last --repeat-last-n tokens (1 = off; default "
                   f"{r.repetition_penalty:g})")
    g.add_argument("--presence-penalty", type=float, default=None, metavar="X",
                   help="subtract X from the logit of every token seen in that window (0 = off, default)")
    g.add_argument("--repeat-last-n", "--penalty-last-n", dest="penalty_last_n", type=int, default=None,
                   metavar="N", help=f"the penalties look at the last N tokens (-1 = all, 0 = none; default "
                   f"{r.penalty_last_n})")
    g.add_argument("-s", "--seed", type=int, default=-1, metavar="S",
                   help="random seed, for reproducible sampling (-1 = a random seed, default)")


def add_engine_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("engine (defaults come from the STRATA_* environment, see docs/settings.md)")
    g.add_argument("-t", "--threads", type=int, default=None, metavar="N",
                   help="worker threads (0 = one per core)")
    g.add_argument("-c", "--ctx-size", "--context", dest="context", type=int, default=None, metavar="N",
                   help="context length in tokens (0 = the model's)")
    g.add_argument("--speculative", choices=("auto", "on", "off"), default=None,
                   help="MTP speculative decoding: auto = adaptive draft count per round (0..--draft-steps, "
                        "from the window and draft-step costs measured while running and the live "
                        "acceptance; the costs are kept per model file and settings in the user's cache "
                        "folder, so the next run starts from them: STRATA_SPEC_CACHE=off turns that off), "
                        "on = always --draft-steps, off = never")
    g.add_argument("--draft-steps", type=int, default=None, metavar="K",
                   help="drafts per speculative round (1..16, default 3)")
    g.add_argument("--draft-min-p", default=None, metavar="P0[,P1,...]",
                   help="draft retention: per-step floor on the drafter's probability, the last repeats "
                   "(STRATA_METAL_SPEC_MIN_P_SCHEDULE); combines with --draft-min-cum-p")
    g.add_argument("--draft-min-cum-p", type=float, default=None, metavar="P",
                   help="draft retention: keep draft j only while p0*...*pj >= P "
                   "(STRATA_METAL_SPEC_MIN_CUM_P)")
    g.add_argument("--experts", choices=("mmap", "stream"), default=None,
                   help="where routed experts come from: mmap = the file mapping (the OS pages them), "
                   "stream = a bounded resident set read from disk (STRATA_EXPERT_MODE)")
    g.add_argument("--expert-cache", default=None, metavar="SIZE",
                   help="resident expert set of --experts stream: a share of all experts ('25%%') or bytes "
                   "('512M', '2G'); implies --experts stream (STRATA_EXPERT_CACHE)")
    add_kv_type_argument(g)


def add_kv_type_argument(g: argparse._ActionsContainer) -> None:
    g.add_argument("--kv-type", choices=("auto", "f32", "f16", "int8"), default=None,
                   help="how K/V cells are stored: auto = int8 for strata files, f16 for qwen3moe and "
                   "glm4moe on x86-64 with AVX2+FMA+F16C (llama.cpp's default cache type), else f32; "
                   "f16 = half of f32's bytes; int8 = one fp16 scale per 64 values; cpu backend, not "
                   "deepseek4 (STRATA_KV_TYPE)")


def tell_subcommand_parsers(parser: argparse.ArgumentParser) -> None:
    """Let every subcommand parser know itself (``args.parser``), so that a flag it does not know is
    reported by it (its usage line, its name) rather than by the top-level parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                sub.set_defaults(parser=sub)
                tell_subcommand_parsers(sub)


# ------------------------------------------------------------------------------------------ resolving
def load_model(args: argparse.Namespace) -> Model:
    from strata.model import Model

    return Model(args.model, mtp_model=getattr(args, "mtp_model", None))


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
    if getattr(args, "draft_min_p", None) is not None:
        changes["spec_min_p_schedule"] = _probabilities(args.draft_min_p)
    if getattr(args, "draft_min_cum_p", None) is not None:
        changes["spec_min_cum_p"] = args.draft_min_cum_p
    if getattr(args, "expert_cache", None) is not None:
        changes["expert_cache"] = args.expert_cache
        changes["expert_mode"] = "stream"
    if getattr(args, "experts", None) is not None:
        changes["expert_mode"] = args.experts
    if getattr(args, "kv_type", None) is not None:
        changes["kv_type"] = args.kv_type
    try:
        return config.replace(**changes)
    except ConfigError as exc:
        raise ConfigError(_flag_message(str(exc), "Config.", _CONFIG_FLAGS)) from None


def _probabilities(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise InvalidArgument(
            f"--draft-min-p: expected comma-separated probabilities, got {text!r}") from None
    return values


def sampling_from(args: argparse.Namespace) -> SamplingPolicy:
    """The recommended policy (temperature > 0) or plain greedy (``--temp 0``), with the given flags."""
    from strata.sampling import MAX_SEED, SamplingPolicy

    if args.seed < -1 or args.seed > MAX_SEED:
        raise InvalidArgument(
            f"--seed must be -1 (a random seed) or an integer in [0, 2**64), got {args.seed}")
    given = {field: getattr(args, field) for field in _SAMPLING_FLAGS
             if field != "seed" and getattr(args, field) is not None}
    base = SamplingPolicy() if given.get("temperature") == 0 else SamplingPolicy.recommended()
    try:
        return base.replace(**given, seed=None if args.seed == -1 else args.seed)
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
    model = load_model(args)
    check_speculative(config, model)
    return model.session(config=config, sampling=sampling)


def check_speculative(config: Config, model: Model) -> None:
    """``--speculative on`` for a model without an MTP layer, said in command-line terms."""
    if config.speculative and not model.has_mtp:
        raise ConfigError(f"--speculative on: {model.path} has no MTP layer to draft with; "
                          "use --speculative auto (speculate when the model can) or off")


def retention_line(config: Config) -> str:
    """The draft-retention policy in effect, for ``--stats``."""
    if not config.retention_on:
        return "retention: off (every draft is verified)"
    parts = []
    if config.spec_min_p_schedule is not None:
        parts.append("per-step floor " + ",".join(f"{p:g}" for p in config.spec_min_p_schedule))
    if config.spec_min_cum_p is not None:
        parts.append(f"cumulative floor {config.spec_min_cum_p:g}")
    return "retention: " + " + ".join(parts)


def print_stats(session: Session) -> None:
    """``--stats``: the session's counters and speeds, then the draft-retention policy in effect."""
    print(session.stats.summary(), file=sys.stderr)
    if session.speculative:
        print(retention_line(session.config), file=sys.stderr)


def write(out: TextIO, text: str) -> None:
    out.write(text)
    out.flush()
