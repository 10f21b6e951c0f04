"""The parts of a one-draft speculative round on a model, timed in a stream against plain steps.

Engine A decodes plain steps without the drafter's encoding; engine B runs rounds of one draft (the
draft step, the 2-row verification window with its drafter encoding, greedy verification, a rollback
on a reject). The two advance step by step in turn, so both see the same machine at the same moment;
the table gives medians in milliseconds and the round's cost in plain steps.

    python bench/round_parts.py [--model PATH] [--threads 1] [--reps 3] [--until 300]
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from strata import _strata
from strata.bench.machine import active_isa, cpu_model
from strata.model import DEMO_MODEL_PATH


def argmax(logits: np.ndarray) -> int:
    return int(np.argmax(logits))


@dataclass
class Parts:
    """Seconds per plain step, draft step and window; 1.0 / 0.0 per round for an accepted draft; the
    tokens each engine committed in its last repetition (greedy: the same sequence)."""

    plain: list[float] = field(default_factory=list)
    draft: list[float] = field(default_factory=list)
    window: list[float] = field(default_factory=list)
    accepted: list[float] = field(default_factory=list)
    tokens_plain: list[int] = field(default_factory=list)
    tokens_rounds: list[int] = field(default_factory=list)


def run(path: str, threads: int, reps: int, until: int) -> Parts:
    prompt = [100 + (i * 37) % 3000 for i in range(12)]
    res = Parts()
    clock = time.perf_counter
    for _ in range(reps):
        a = _strata.Engine(path, "cpu", threads, 0, 0, False)
        b = _strata.Engine(path, "cpu", threads, 0, 0, True)
        ta = argmax(a.eval(prompt, logits="last"))
        tb = argmax(b.eval(prompt, logits="last"))
        res.tokens_plain, res.tokens_rounds = [ta], [tb]
        while b.n_past < until and a.n_past < until:
            t0 = clock()
            logits = a.eval([ta], logits="last")
            res.plain.append(clock() - t0)
            ta = argmax(logits)
            res.tokens_plain.append(ta)
            p = b.n_past
            t0 = clock()
            drafted = b.mtp_draft(tb, 1, pos=p - 1)
            res.draft.append(clock() - t0)
            d = int(drafted[1][0])
            t0 = clock()
            rows = np.asarray(b.eval([tb, d], start_pos=p, logits="all", draft_from_row=1)).reshape(2, -1)
            res.window.append(clock() - t0)
            if argmax(rows[0]) == d:
                res.accepted.append(1.0)
                tb = argmax(rows[1])
                res.tokens_rounds += [d, tb]
            else:
                res.accepted.append(0.0)
                b.rollback(p + 1)
                tb = argmax(rows[0])
                res.tokens_rounds.append(tb)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="GGUF with an MTP layer (default: the shipped demo model)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3, help="fresh engine pairs")
    ap.add_argument("--until", type=int, default=300, help="decode up to this position")
    args = ap.parse_args()
    path = args.model or str(DEMO_MODEL_PATH)
    res = run(path, args.threads, args.reps, args.until)
    med = {"plain": statistics.median(res.plain), "draft": statistics.median(res.draft),
           "window": statistics.median(res.window)}
    acc = statistics.fmean(res.accepted)
    plain = med["plain"]
    print(f"{cpu_model()}, path {active_isa()}, {args.threads} thread(s), {len(res.window)} rounds")
    print("| part | ms | plain steps |")
    print("| --- | ---: | ---: |")
    for k in ("plain", "draft", "window"):
        print(f"| {k} | {med[k] * 1e3:.3f} | {med[k] / plain:.2f} |")
    print(f"| round (draft + window) | {(med['draft'] + med['window']) * 1e3:.3f} | "
          f"{(med['draft'] + med['window']) / plain:.2f} |")
    print(f"acceptance {acc:.3f}: {1 + acc:.2f} tokens a round")


if __name__ == "__main__":
    main()
