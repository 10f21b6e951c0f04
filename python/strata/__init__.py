"""strata: an inference engine for sparse mixture-of-experts models with an MTP drafter.

The native core lives in ``strata._strata`` (C++ with pybind11); this package is the thin,
typed Python face of it.
"""

from __future__ import annotations

from strata import _strata
from strata.errors import ConfigError, FormatError, InvalidArgument, IOFailure, StrataError

__version__: str = _strata.__version__


def build_info() -> dict[str, object]:
    """What this build of the native core contains and what it runs on now."""
    return {
        "version": __version__,
        "features": list(_strata.build_features()),
        "supported_isas": list(_strata.supported_isas()),
        "active_isa": _strata.active_isa(),
        "threads": _strata.threads(),
    }


__all__ = [
    "ConfigError",
    "FormatError",
    "IOFailure",
    "InvalidArgument",
    "StrataError",
    "__version__",
    "build_info",
]
