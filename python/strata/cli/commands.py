"""The registry of subcommands; each lives in its own module under strata.cli."""

from __future__ import annotations

from types import ModuleType

from strata.cli import bench_cmd, convert_cmd, inspect_cmd

ALL: list[ModuleType] = [convert_cmd, inspect_cmd, bench_cmd]
