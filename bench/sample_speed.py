"""The sampler's cost per token through the Python API: ``decode.sample_logits`` on one row of logits.

Rows: the demo model's own logits (V = 8192, a prompt's last row) and normal random logits at Qwen3's
vocabulary (V = 151936, sd 3). Policies: temperature 0.7 alone (what an OpenAI-style request without
top-k runs: every token is in the working set), with top-p 0.95, the command line's recommended policy
(top-k 40, top-p 0.95, min-p 0.05, repetition penalty over a 100-token history), and greedy. Best of
``--reps`` timings of ``--calls`` calls each (the Python call included); it measures, it gates nothing.

    python bench/sample_speed.py [--reps 5] [--calls 1000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import strata
from strata._strata import decode
from strata.bench.machine import active_isa, cpu_model
from strata.sampling import SamplingPolicy


def best_us(logits: np.ndarray, policy: SamplingPolicy, history: list[int], rng: decode.Rng, reps: int,
            calls: int) -> float:
    native = policy.native()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            decode.sample_logits(logits, native, history, [], rng)
        best = min(best, (time.perf_counter() - t0) / calls)
    return best * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5, help="timings per cell; the best is shown")
    ap.add_argument("--calls", type=int, default=1000,
                    help="calls per timing at V = 8192 (a tenth of them at V = 151936)")
    args = ap.parse_args()
    model = strata.Model(spec_cost_cache=False)
    session = model.session(strata.Config(threads=1, speculative=False))
    demo_row = np.asarray(session._engine.eval([1, 2, 3, 4, 5], start_pos=0, logits="last"), dtype=np.float32)
    big_row = np.random.default_rng(0).normal(0.0, 3.0, 151936).astype(np.float32)
    rng = decode.Rng(1)
    history = list(range(100))
    policies = [
        ("temperature 0.7", SamplingPolicy(temperature=0.7), []),
        ("+ top-p 0.95", SamplingPolicy(temperature=0.7, top_p=0.95), []),
        ("recommended (top-k 40, ...)", SamplingPolicy.recommended(), history),
        ("greedy", SamplingPolicy(temperature=0.0), []),
    ]
    print(f"CPU {cpu_model()}, path {active_isa()}; best of {args.reps}; microseconds per call")
    print(f"| policy | V = {demo_row.size} | V = {big_row.size} |")
    print("|---|---:|---:|")
    for name, policy, hist in policies:
        small = best_us(demo_row, policy, hist, rng, args.reps, args.calls)
        large = best_us(big_row, policy, hist, rng, args.reps, max(1, args.calls // 10))
        print(f"| {name} | {small:.1f} | {large:.1f} |")


if __name__ == "__main__":
    main()
