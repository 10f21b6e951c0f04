"""Two drafting modes on the shipped demo model, alternated run by run (A, B then B, A), each run a
fresh session generating 256 tokens from one prompt; prints every run's decode tok/s, the medians,
the ratio of the medians and the median of the paired ratios. Giving one mode twice (``off off``)
is the A/A control: how far two identical configurations drift apart on this machine.

    python bench/demo_ab.py --threads 1 --temperature 0.7 --runs 40 off auto [--recommended]
"""

from __future__ import annotations

import argparse
import statistics

import strata
from strata.bench.machine import active_isa, cpu_model

SPECULATIVE = {"off": False, "auto": None, "on": True}


def policy(temperature: float, recommended: bool) -> strata.SamplingPolicy:
    if not recommended:
        return strata.SamplingPolicy(temperature=temperature, seed=1)
    r = strata.SamplingPolicy.recommended()
    return strata.SamplingPolicy(temperature=temperature, top_k=r.top_k, top_p=r.top_p, min_p=r.min_p,
                                 repetition_penalty=r.repetition_penalty, seed=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode_a", choices=sorted(SPECULATIVE))
    ap.add_argument("mode_b", choices=sorted(SPECULATIVE))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--recommended", action="store_true",
                    help="the recommended sampling policy (top-k, top-p, min-p, penalties) at --temperature")
    args = ap.parse_args()
    model = strata.Model(None)
    same = args.mode_a == args.mode_b
    labels = [args.mode_a + "#1", args.mode_b + "#2"] if same else [args.mode_a, args.mode_b]
    res: dict[str, list[float]] = {lab: [] for lab in labels}
    for i in range(args.runs):
        for lab in labels if i % 2 == 0 else labels[::-1]:
            config = strata.Config(threads=args.threads, speculative=SPECULATIVE[lab.split("#")[0]])
            s = model.session(config=config, sampling=policy(args.temperature, args.recommended))
            "".join(s.generate("def fibonacci(n):", max_tokens=args.max_tokens))
            res[lab].append(s.stats.decode_tokens_per_second)
    kind = "recommended" if args.recommended else "plain"
    print(f"{cpu_model()} ({active_isa()}): threads {args.threads}, temperature {args.temperature}, "
          f"{kind} policy, {args.runs} runs")
    for lab, v in res.items():
        print(lab, f"median {statistics.median(v):.0f}", " ".join(f"{x:.0f}" for x in v))
    a, b = res[labels[0]], res[labels[1]]
    pairs = [y / x for x, y in zip(a, b, strict=True)]
    print(f"{labels[1]} / {labels[0]}: ratio of medians {statistics.median(b) / statistics.median(a):.3f}, "
          f"median of paired ratios {statistics.median(pairs):.3f}")


if __name__ == "__main__":
    main()
