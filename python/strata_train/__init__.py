"""The PyTorch reference of the `strata` architecture (docs/gguf.md, docs/reference.md).

Training-side code only: the `strata` package never imports it, and importing it never needs the
native extension. Submodules: config, ops, hyper_connections, cell_selection, indexer, attention,
moe, block, mtp, model (training forward), runner (incremental inference, engine-shaped),
gguf_names / gguf_io (GGUF tensor names, reading files), checkpoint, random_init.
"""

from __future__ import annotations

from strata_train.config import StrataConfig
from strata_train.model import StrataModel, StrataOutput
from strata_train.runner import DraftStep, ReferenceRunner, RowsOutput

__all__ = ["DraftStep", "ReferenceRunner", "RowsOutput", "StrataConfig", "StrataModel", "StrataOutput"]
