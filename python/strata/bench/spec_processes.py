"""Speculation auto against off as a user runs it: one ``strata generate`` process per run, with the
cross-process cost cache (strata.spec_cost_cache) empty or warm.

Modes: ``off`` (no drafting), ``auto-cold`` (adaptive, the cost-cache file deleted before each run: the
session probes first, as every run did before the cache), ``auto-warm`` (adaptive, the file left by the
previous auto-warm run, primed once before the timed runs: the session starts seeded). Each case
(temperature × threads) runs the modes alternately, the order rotated run by run, and reports per mode
the medians of the decode tok/s that ``--stats`` prints, the process's wall seconds (start-up, model load
and cache reading/writing included) and its CPU seconds, their ratios to ``off``, and how many runs
started seeded. Measures only.
"""

from __future__ import annotations

import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from strata.spec_cost_cache import FILE_NAME

MODES = ("off", "auto-cold", "auto-warm")
PROMPT = ("import os\nimport sys\n\n\ndef parse_args(argv):\n    \"\"\"Parse the command line.\"\"\"\n"
          "    import argparse\n    p = argparse.ArgumentParser(description=__doc__)\n")
_GENERATED = re.compile(r"^generated: (\d+) tokens in ([0-9.]+) s \(([0-9.]+) tok/s\)", re.M)
_ROUNDS = re.compile(r"^speculative: (\d+) rounds", re.M)


@dataclass
class ModeRuns:
    mode: str
    tok_s: list[float] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)  # drafting rounds per run (0 = plain steps only)
    seeded: int = 0

    def median(self, what: str) -> float:
        values: list[float] = getattr(self, what)
        return statistics.median(values) if values else 0.0


@dataclass
class Case:
    temperature: float
    threads: int
    modes: dict[str, ModeRuns]

    def ratio(self, mode: str, what: str) -> float:
        """mode's median over off's for tok/s; off's over mode's for seconds (> 1 = mode is faster)."""
        a, b = self.modes[mode].median(what), self.modes["off"].median(what)
        if what == "tok_s":
            return a / b if b > 0 else 0.0
        return b / a if a > 0 else 0.0


def parse_stats(stderr: str) -> tuple[int, float, bool, int]:
    """(generated tokens, decode tok/s, seeded, drafting rounds) from ``generate --stats`` output."""
    m = _GENERATED.search(stderr)
    if m is None:
        raise RuntimeError(f"no 'generated: ...' line in the --stats output:\n{stderr[-2000:]}")
    r = _ROUNDS.search(stderr)
    rounds = int(r.group(1)) if r else 0
    return int(m.group(1)), float(m.group(3)), "seeded with earlier costs" in stderr, rounds


def generate_once(model: str | None, mode: str, temperature: float, threads: int, max_tokens: int,
                  cache: Path) -> tuple[int, float, bool, int, float, float]:
    """One ``generate`` process: (tokens, decode tok/s, seeded, drafting rounds, wall s, CPU s)."""
    cmd = [sys.executable, "-m", "strata.cli", "generate", "--temp", str(temperature), "--seed", "1",
           "-n", str(max_tokens), "-t", str(threads), "--stats",
           "--speculative", "off" if mode == "off" else "auto"]
    if model is not None:
        cmd += ["-m", model]
    env = {**os.environ, "STRATA_CACHE_DIR": str(cache), "STRATA_SPEC_CACHE": "on"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([*cmd, PROMPT], env=env, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return (*parse_stats(r.stderr), wall, cpu)


def run(model: str | None, temperatures: list[float], threads: list[int], runs: int, max_tokens: int,
        modes: tuple[str, ...] = MODES) -> list[Case]:
    cases = [Case(t, n, {m: ModeRuns(m) for m in modes}) for t in temperatures for n in threads]
    with tempfile.TemporaryDirectory(prefix="strata-spec-processes-") as tmp:
        folders = {(c.temperature, c.threads, m): Path(tmp) / f"t{c.temperature}-n{c.threads}-{m}"
                   for c in cases for m in modes}
        for c in cases:
            if "auto-warm" in modes:  # prime the warm file: one untimed auto run
                generate_once(model, "auto-warm", c.temperature, c.threads, max_tokens,
                              folders[(c.temperature, c.threads, "auto-warm")])
        for r in range(runs):
            for c in cases:
                order = list(modes[r % len(modes):] + modes[: r % len(modes)])
                for m in order:
                    folder = folders[(c.temperature, c.threads, m)]
                    if m != "auto-warm":
                        (folder / FILE_NAME).unlink(missing_ok=True)
                    tokens, tok_s, seeded, rounds, wall, cpu = generate_once(model, m, c.temperature,
                                                                             c.threads, max_tokens, folder)
                    res = c.modes[m]
                    res.tokens.append(tokens)
                    res.rounds.append(rounds)
                    res.tok_s.append(tok_s)
                    res.wall_s.append(wall)
                    res.cpu_s.append(cpu)
                    res.seeded += int(seeded)
    return cases


def render(cases: list[Case]) -> str:
    lines = ["temp  threads  mode        decode tok/s  x off   wall s  x off   CPU s  x off  seeded  tokens  "
             "drafting rounds"]
    for c in cases:
        for m, res in c.modes.items():
            lines.append(
                f"{c.temperature:<5g} {c.threads:>7}  {m:<10} {res.median('tok_s'):>13.1f} "
                f"{c.ratio(m, 'tok_s'):>6.3f} {res.median('wall_s'):>8.3f} {c.ratio(m, 'wall_s'):>6.3f} "
                f"{res.median('cpu_s'):>7.3f} {c.ratio(m, 'cpu_s'):>6.3f} "
                f"{res.seeded:>3}/{len(res.tok_s):<3} {min(res.tokens, default=0):>6}  "
                f"{min(res.rounds, default=0)}-{max(res.rounds, default=0)}")
    lines.append("x off: tok/s over off's; for seconds off's over the mode's (> 1 = faster than off); "
                 "medians of alternated runs, one process per run")
    return "\n".join(lines)


def as_json(cases: list[Case]) -> list[dict[str, object]]:
    return [{"temperature": c.temperature, "threads": c.threads,
             "modes": {m: {"tok_s": r.tok_s, "wall_s": r.wall_s, "cpu_s": r.cpu_s, "tokens": r.tokens,
                           "drafting_rounds": r.rounds,
                           "seeded_runs": r.seeded, "median_tok_s": r.median("tok_s"),
                           "tok_s_vs_off": c.ratio(m, "tok_s"), "wall_vs_off": c.ratio(m, "wall_s")}
                       for m, r in c.modes.items()}}
            for c in cases]
