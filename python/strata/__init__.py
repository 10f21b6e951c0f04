"""strata: an inference engine for sparse mixture-of-experts models with an MTP drafter.

The native core lives in ``strata._strata`` (C++ with pybind11); this package is the thin,
typed Python face of it::

    import strata

    model = strata.Model("model.gguf")            # strata.Model() = the shipped demo model
    session = model.session(sampling=strata.SamplingPolicy(temperature=0.7, seed=1))
    for piece in session.generate("def quicksort(xs):", max_tokens=64):
        print(piece, end="", flush=True)
    print(session.stats.summary())

See docs/python-api.md.
"""

from __future__ import annotations

from strata import _strata
from strata.config import Config, ConfigWarning
from strata.errors import ConfigError, FormatError, InvalidArgument, IOFailure, StrataError
from strata.model import Model, ModelInfo, PerplexityResult
from strata.sampling import SamplingPolicy
from strata.session import Session
from strata.stats import GenerationStats

__version__: str = _strata.__version__


def build_info() -> dict[str, object]:
    """What this build of the native core contains and what it runs on now."""
    return {
        "version": __version__,
        "features": list(_strata.build_features()),
        "supported_isas": list(_strata.supported_isas()),
        "active_isa": _strata.active_isa(),
        "amx": _strata.amx_status(),
        "avx512_vbmi": _strata.avx512_vbmi(),
        "threads": _strata.threads(),
    }


__all__ = [
    "Config",
    "ConfigError",
    "ConfigWarning",
    "FormatError",
    "GenerationStats",
    "IOFailure",
    "InvalidArgument",
    "Model",
    "ModelInfo",
    "PerplexityResult",
    "SamplingPolicy",
    "Session",
    "StrataError",
    "__version__",
    "build_info",
]
