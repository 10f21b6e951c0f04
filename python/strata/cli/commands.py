"""The registry of subcommands; each lives in its own module under strata.cli.

One module name per line (the file merges as a union of lines), in the order `--help` lists them.
"""

from __future__ import annotations

import importlib
from types import ModuleType

_MODULES = [
    "generate_cmd",
    "chat_cmd",
    "perplexity_cmd",
    "inspect_cmd",
    "convert_cmd",
    "bench_cmd",
]

ALL: list[ModuleType] = [importlib.import_module(f"strata.cli.{name}") for name in dict.fromkeys(_MODULES)]
