"""bench/generate_modes.py: it reads decode speed and rounds from real ``generate --stats`` processes and
prints one table row per case with the ratios to speculation off."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "generate_modes.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_modes", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_one_run_reports_speed_and_rounds() -> None:
    gm = load()
    env = dict(os.environ, STRATA_SPEC_CACHE="off")
    tok_s, summary = gm.run_once(gm.PROMPTS["fib"], "off", 0.0, 1, 12, 1, env)
    assert tok_s > 0 and summary == ""  # no drafting: no rounds line
    tok_s, summary = gm.run_once(gm.PROMPTS["fib"], "on", 0.0, 1, 12, 1, env)
    m = re.match(r"(\d+) rounds, ([0-9.]+) tokens/round \{", summary)
    assert tok_s > 0 and m is not None and int(m.group(1)) >= 1 and float(m.group(2)) >= 1.0


def test_the_table_has_a_row_per_case() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--reps", "1", "--tokens", "8", "--temps", "0",
                          "--threads", "1", "--prompts", "fib,story"],
                         capture_output=True, text=True, check=True).stdout
    rows = [line for line in out.splitlines() if line.startswith("| fib") or line.startswith("| story")]
    assert len(rows) == 2
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1:3] == ["0", "1"] and float(cells[3]) > 0
        assert all(re.fullmatch(r"[0-9.]+x", c) for c in cells[4:6])
