"""`strata generate` with speculation off, on and auto, one process per run, on several prompts.

For each prompt × temperature × thread count the modes run alternately (the order rotated run by run,
each run its own process with ``--stats``, the sampling seed = the repetition number) and the table gives
the median decode tok/s of each mode, its ratio to ``off``, and what auto's last run did (drafting rounds,
tokens per round, draft counts chosen). The cross-process cost cache is off unless ``--cache`` is given
(every auto run then pays its probe, the worst case). Measures only.

    python bench/generate_modes.py [--reps 3] [--tokens 256] [--temps 0,0.7] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import statistics
import subprocess
import sys

from strata.bench.machine import active_isa, cpu_model
from strata.bench.spec_processes import parse_stats

PROMPTS = {
    "fib": "def fibonacci(n):",
    "args": "import os\nimport sys\n\n\ndef parse_args(argv):\n    \"\"\"Parse the command line.\"\"\"\n"
            "    import argparse\n    p = argparse.ArgumentParser(description=__doc__)\n",
    "story": "Once upon a time, there was a little",
}
MODES = ("off", "on", "auto")
_ROUNDS = re.compile(r"speculative: (\d+) rounds, ([0-9.]+) tokens/round")
_CHOSEN = re.compile(r"drafts verified per step (\{[^}]*\})")


def run_once(prompt: str, mode: str, temperature: float, threads: int, tokens: int, seed: int,
             env: dict[str, str]) -> tuple[float, str]:
    """(decode tok/s, a summary of the rounds) of one ``generate`` process."""
    cmd = [sys.executable, "-m", "strata.cli", "generate", prompt, "-n", str(tokens), "-t", str(threads),
           "--temp", str(temperature), "--seed", str(seed), "--stats", "--speculative", mode]
    err = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stderr
    _, tok_s, _, _ = parse_stats(err)
    r, c = _ROUNDS.search(err), _CHOSEN.search(err)
    summary = f"{r.group(1)} rounds, {r.group(2)} tokens/round {c.group(1) if c else ''}".strip() if r else ""
    return tok_s, summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3, help="runs of each mode per case")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--temps", default="0,0.7")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--prompts", default=",".join(PROMPTS), help=f"of {', '.join(PROMPTS)}")
    ap.add_argument("--cache", action="store_true", help="leave the cost cache on (seeded auto runs)")
    args = ap.parse_args()
    env = dict(os.environ, STRATA_SPEC_CACHE="on" if args.cache else "off")
    temps = [float(t) for t in args.temps.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    print(f"{cpu_model()}, path {active_isa()}, {args.tokens} tokens, {args.reps} runs per mode, cost cache "
          f"{'on' if args.cache else 'off'}")
    print("| prompt | temperature | threads | off tok/s | on | auto | auto's last run |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for name, temp, th in itertools.product(args.prompts.split(","), temps, threads):
        speeds: dict[str, list[float]] = {m: [] for m in MODES}
        last = ""
        for rep in range(args.reps):
            for mode in MODES[rep % len(MODES):] + MODES[:rep % len(MODES)]:
                tok_s, summary = run_once(PROMPTS[name], mode, temp, th, args.tokens, rep + 1, env)
                speeds[mode].append(tok_s)
                if mode == "auto":
                    last = summary
        off = statistics.median(speeds["off"])
        cells = [f"{off:.0f}"] + [f"{statistics.median(speeds[m]) / off:.2f}x" for m in MODES[1:]]
        print(f"| {name} | {temp:g} | {th} | " + " | ".join(cells) + f" | {last} |", flush=True)


if __name__ == "__main__":
    main()
