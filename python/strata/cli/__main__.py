"""``python -m strata.cli``: one entry point, one module per subcommand.

Each subcommand module exposes ``register(subparsers)`` and sets ``func`` on its parser. Errors
that strata raises on purpose print one line and exit non-zero, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from strata.cli import commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m strata.cli",
        description="strata: run sparse mixture-of-experts models with speculative decoding.",
    )
    parser.add_argument("--version", action="store_true", help="print version and build features")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in commands.ALL:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        import strata

        info = strata.build_info()
        features = info["features"]
        assert isinstance(features, list)
        print(f"strata {info['version']} (features: {', '.join(features)}; "
              f"active: {info['active_isa']})")
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
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
