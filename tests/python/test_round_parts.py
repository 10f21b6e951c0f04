"""bench/round_parts.py: its rounds of one draft, greedily verified, commit exactly the tokens plain
greedy decoding does, and every part is timed once per round."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from strata.model import DEMO_MODEL_PATH

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "round_parts.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("round_parts", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["round_parts"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_rounds_commit_plain_decodings_tokens() -> None:
    rp = load()
    res = rp.run(str(DEMO_MODEL_PATH), threads=1, reps=1, until=60)
    rounds = len(res.window)
    assert rounds > 10 and len(res.draft) == rounds and len(res.accepted) == rounds
    assert set(res.accepted) <= {0.0, 1.0} and 0.0 < sum(res.accepted) <= rounds
    assert min(res.plain + res.draft + res.window) > 0.0
    n = min(len(res.tokens_plain), len(res.tokens_rounds))
    assert n > 25
    assert res.tokens_rounds[:n] == res.tokens_plain[:n]
