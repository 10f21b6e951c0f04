"""strata's folder in the user's cache: ``$XDG_CACHE_HOME/strata``, else ``~/.cache/strata`` (an empty
variable counts as unset). Where the speculation cost cache (strata.spec_cost_cache, which
``STRATA_CACHE_DIR`` can move) and ``bench wide-model``'s output go by default."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["user_cache_dir"]


def user_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "strata"
