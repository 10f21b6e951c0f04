"""``open_engine``: the native engine (``strata._strata.Engine``, one sequence on the config's backend)
for a model file and a :class:`~strata.config.Config`. ``Model`` (perplexity) and ``Session`` both open
engines here, so neither module imports the other."""

from __future__ import annotations

from strata import _strata
from strata.config import Config
from strata.errors import ConfigError, InvalidArgument

__all__ = ["open_engine"]


def open_engine(path: str, config: Config, *, has_mtp: bool, encode_mtp: bool,
                mtp_model: str = "") -> _strata.Engine:
    """An engine over ``path`` on ``config.backend`` with the config's threads and context and its
    typed settings (``config.native()``: every setting the C++ core reads, given once).

    ``encode_mtp``: encode the drafter's cells while evaluating (speculative sessions; only when the
    model has an MTP layer, ``has_mtp``). ``mtp_model``: a deepseek4 model's separate MTP file ("" = none)."""
    if not isinstance(config, Config):
        raise InvalidArgument(f"config must be a strata.Config, got {type(config).__name__}")
    if config.backend != "cpu" and config.expert_mode != "mmap":
        raise ConfigError(f"Config.expert_mode={config.expert_mode!r} needs the cpu backend: the "
                          f"{config.backend} backend reads every expert from the mapped weights")
    if config.backend == "cpu":
        config.apply_cpu()  # the process's kernel path (Config.isa)
    return _strata.Engine(path, backend=config.backend, n_threads=config.threads,
                          max_ctx=config.context_length, encode_mtp=encode_mtp and has_mtp,
                          settings=config.native(), mtp_model=mtp_model)
