"""``strata`` (or ``python -m strata.cli``): one entry point, one module per subcommand.

Each subcommand module exposes ``register(subparsers)`` and sets ``func`` on its parser. Errors
that strata raises on purpose print one line and exit non-zero, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from strata.cli import commands
from strata.cli.options import tell_subcommand_parsers


def program_name(argv0: str | None = None) -> str:
    """``strata`` when run as the console script, ``python -m strata.cli`` when run as a module."""
    name = os.path.basename(sys.argv[0] if argv0 is None else argv0)
    return "python -m strata.cli" if name in ("__main__.py", "-c", "") else name


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=program_name() if prog is None else prog,
        description="strata: run sparse mixture-of-experts models with speculative decoding.",
    )
    parser.add_argument("--version", action="store_true", help="print version and build features")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in commands.ALL:
        module.register(sub)
    tell_subcommand_parsers(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        getattr(args, "parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.version:
        import strata

        info = strata.build_info()
        features = info["features"]
        supported = info["supported_isas"]
        assert isinstance(features, list) and isinstance(supported, list)
        print(f"strata {info['version']} (features: {', '.join(features)}; "
              f"active: {info['active_isa']}; runnable here: {', '.join(supported)}; AMX: {info['amx']}; "
              f"AVX512_VBMI: {'yes' if info['avx512_vbmi'] else 'no'})")
        return 0
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from strata.errors import StrataError

    try:
        return int(args.func(args) or 0)
    except StrataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except UnicodeError as exc:  # text from stdin, a file or the command line that is not UTF-8
        print(f"error: {_unicode_problem(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _unicode_problem(exc: UnicodeError) -> str:
    if isinstance(exc, UnicodeDecodeError):
        bad = exc.object[exc.start : exc.start + 1].hex()
        return f"the input is not valid UTF-8 text: byte 0x{bad} at offset {exc.start} ({exc.reason})"
    return ("the text is not valid Unicode (undecodable bytes on the command line?) and cannot be "
            f"written as UTF-8: {getattr(exc, 'reason', exc)}")


if __name__ == "__main__":
    sys.exit(main())
