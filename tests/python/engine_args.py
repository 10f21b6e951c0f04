"""The tests' shorthand for a native engine with some settings: keyword arguments name
``strata.Config`` fields (``mtp_sink=2``, ``expert_mode="stream"``, ``expert_cache=0.5`` as a fraction),
which ``Config.native()`` turns into the engine's one typed ``_strata.Settings``. ``moce``: a
``decode.MoceParams`` set on the (cpu) engine once it is made, for the routing tests whose parameters
are not a text setting's ``e^λ``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import strata
from strata import _strata


def engine(path: str | Path, *, backend: str = "cpu", n_threads: int = 0, max_ctx: int = 0, max_rows: int = 0,
           encode_mtp: bool = True, expert_page_cache_probe: bool = False, moce: Any = None,
           **settings: Any) -> _strata.Engine:
    # The drafter as stored: the tests here check its math against references multiplying the file's
    # weights (the product's default requantizes it to Q4_0, Config.mtp_draft_q4; tests that want it say so).
    settings.setdefault("mtp_draft_q4", False)
    cache = settings.get("expert_cache")
    if isinstance(cache, float):
        settings["expert_cache"] = f"{cache * 100:g}%"
    eng = _strata.Engine(str(path), backend=backend, n_threads=n_threads, max_ctx=max_ctx, max_rows=max_rows,
                         encode_mtp=encode_mtp, settings=strata.Config(**settings).native(),
                         expert_page_cache_probe=expert_page_cache_probe)
    if moce is not None:
        eng.moce = moce
    return eng


# f32 K/V cells: what the tests that check logits against transformers or llama.cpp to float rounding
# ask for (the cpu backend's auto is fp16 for qwen3moe / glm4moe on x86-64; docs/engine.md).
F32_CELLS = strata.Config(kv_type="f32").native()
