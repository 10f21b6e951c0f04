"""Writing a benchmark's generated file so that a reader never sees half of it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def write_atomically(path: Path, write: Callable[[Path], T]) -> T:
    """``write(part)`` into ``path`` + ``.part``, then rename it over ``path``; when ``write`` fails the
    part file is removed and the error goes on. Creates ``path``'s folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    try:
        result = write(part)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    part.replace(path)
    return result
