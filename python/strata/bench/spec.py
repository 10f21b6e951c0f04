"""Speculative decoding on a model with an MTP drafter (SPEC §6, issue 5 item 8).

* **Policies**: decode fixed held-out-like prompts with the drafter off and on, at temperature 0 and
  0.7, under the R-3 retention policies (every draft verified, flat min-p = the caller's ``min_p``,
  a per-step schedule, a cumulative floor, both); report tokens per round, acceptance per draft
  step and decode tok/s, the best of ``runs`` runs (the machine is shared and noisy; the counters are
  the same in every run because the seeds are fixed).
* **Measured rounds**: greedy speculative rounds (``Engine.spec_round``, the session's round) with
  retention OFF that record, per round, the drafter's confidence (its probability of its own token) and
  whether the verifier accepted each draft, plus measured costs (verifier windows of 1..K+1 rows,
  one draft step), written as a ``strata.retention-rounds`` v1 file that ``bench retention
  --measured`` reads (docs/retention-economics.md).
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import strata
from strata import _strata
from strata.bench.drafter_quant import heldout_prompts


@dataclass(frozen=True)
class Policy:
    name: str
    config: dict[str, Any]  # strata.Config retention fields
    min_p: float = 0.0      # the caller's min_p (SamplingPolicy)


POLICIES: tuple[Policy, ...] = (
    Policy("keep all", {}),
    Policy("flat min-p 0.3", {}, 0.3),
    Policy("schedule 0.2,0.4,0.6", {"spec_min_p_schedule": (0.2, 0.4, 0.6)}),
    Policy("cumulative 0.3", {"spec_min_cum_p": 0.3}),
    Policy("both", {"spec_min_p_schedule": (0.2, 0.4, 0.6), "spec_min_cum_p": 0.3}),
)


@dataclass
class CaseResult:
    temperature: float
    policy: str
    speculative: bool
    generated: int
    rounds: int
    tokens_per_round: float
    acceptance: list[float]
    drafted: list[int]
    accepted: list[int]
    tok_s_runs: list[float]
    best_tok_s: float = 0.0
    speedup: float = 0.0  # best tok/s over the no-drafter case at the same temperature


@dataclass
class SpecReport:
    model: str
    prompts: int
    max_tokens: int
    draft_steps: int
    runs: int
    cases: list[CaseResult] = field(default_factory=list)


def run_case(model: strata.Model, prompts: list[str], temperature: float, policy: Policy | None,
             max_tokens: int, draft_steps: int, runs: int, threads: int) -> CaseResult:
    """One (temperature, policy) cell; policy None = the drafter off."""
    cfg = strata.Config(threads=threads, speculative=policy is not None, draft_steps=draft_steps,
                        **(policy.config if policy else {}))
    min_p = policy.min_p if policy else 0.0
    speeds = []
    res: CaseResult | None = None
    for _ in range(runs):
        gen = rounds = tok = 0
        drafted = [0] * draft_steps
        accepted = [0] * draft_steps
        secs = 0.0
        for i, prompt in enumerate(prompts):
            sp = strata.SamplingPolicy(temperature=temperature, min_p=min_p, seed=1000 + i)
            s = model.session(config=cfg, sampling=sp)
            for _piece in s.generate(prompt, max_tokens=max_tokens):
                pass
            st = s.stats
            gen += st.generated_tokens
            rounds += st.rounds
            tok += st.round_tokens
            secs += st.decode_seconds
            for j, (d, a) in enumerate(zip(st.drafted, st.accepted, strict=False)):
                drafted[j] += d
                accepted[j] += a
        speeds.append((gen - len(prompts)) / secs if secs > 0 else 0.0)
        res = CaseResult(temperature, policy.name if policy else "no drafter", policy is not None, gen,
                         rounds,
                         tok / rounds if rounds else 0.0,
                         [a / d if d else 0.0 for a, d in zip(accepted, drafted, strict=True)],
                         drafted, accepted, speeds)
    assert res is not None
    res.best_tok_s = max(speeds)
    return res


def run_policies(model_path: str | None, prompts: list[str], *, temperatures: tuple[float, ...] = (0.0, 0.7),
                 max_tokens: int = 96, draft_steps: int = 3, runs: int = 3, threads: int = 0) -> SpecReport:
    model = strata.Model(model_path)
    rep = SpecReport(str(model_path or strata.model.DEMO_MODEL_PATH), len(prompts), max_tokens, draft_steps,
                     runs)
    for temp in temperatures:
        base = run_case(model, prompts, temp, None, max_tokens, draft_steps, runs, threads)
        rep.cases.append(base)
        for pol in POLICIES:
            c = run_case(model, prompts, temp, pol, max_tokens, draft_steps, runs, threads)
            c.speedup = c.best_tok_s / base.best_tok_s if base.best_tok_s else 0.0
            rep.cases.append(c)
        base.speedup = 1.0
    return rep


# ------------------------------------------------------------------------------ measured rounds
def _median_ms(fn: Any, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def measure_costs(engine: Any, tokens: list[int], k: int, reps: int = 15) -> dict[str, Any]:
    """Median wall time of a verifier window of 1..k+1 rows and of one draft step (ms), after `tokens`."""
    p = len(tokens)
    engine.rollback(0)
    engine.eval(tokens, start_pos=0, logits="none")
    t = tokens[-1]
    steps = []
    for n in (1, k):  # drafts from the last prompt row, as a round does
        def draft(n: int = n) -> None:
            engine.mtp_draft(t, n_steps=n, pos=p - 1)
        draft()
        steps.append(_median_ms(draft, reps))
    verifier = []
    for r in range(1, k + 2):
        def window(r: int = r) -> None:
            engine.eval([t] * r, start_pos=p, logits="all")
            engine.rollback(p)
        window()
        verifier.append(_median_ms(window, reps))
    per_step = max((steps[1] - steps[0]) / (k - 1), 0.0) if k > 1 else steps[0]
    first = steps[0]
    return {"unit": "ms", "verifier": verifier, "draft_step": [first] + [per_step] * (k - 1)}


def record_rounds(model_path: str | None, prompts: list[str], *, max_tokens: int = 96, draft_steps: int = 3,
                  threads: int = 0) -> dict[str, Any]:
    """Greedy speculative decoding with retention OFF through the native Engine; returns the
    ``strata.retention-rounds`` v1 document (every round's confidences and accept flags, costs)."""
    model = strata.Model(model_path)
    tok = model.tokenizer
    eog = tok.eog_ids
    path = str(model_path or strata.model.DEMO_MODEL_PATH)
    k = draft_steps
    rounds = []
    eng = _strata.Engine(path, n_threads=threads)
    greedy = strata.SamplingPolicy().native()
    rng = _strata.decode.Rng(0)  # greedy verification draws nothing
    for prompt in prompts:
        ids = tok.encode(prompt)
        eng.rollback(0)
        t = int(eng.eval(ids, start_pos=0).argmax())
        generated = 1
        while t not in eog:
            kr = min(k, max_tokens - generated - 1)  # as the session's round
            if kr < 1:
                break
            # The session's round (draft/speculator.h): chained, retention off (nothing is dropped).
            new, _drafted, verified, accepted, probs = eng.spec_round(t, [], kr, True, policy=greedy, rng=rng)
            if verified == 0:  # no cell left for a draft: a plain step ran
                break
            rounds.append({"confidences": [float(x) for x in probs[:verified]],
                           "accepted": [j < accepted for j in range(verified)]})
            if any(x in eog for x in new[:-1]):
                break
            generated += len(new)
            t = int(new[-1])
    costs = measure_costs(eng, tok.encode(prompts[0])[:256], k)
    return {"format": "strata.retention-rounds", "version": 1,
            "model": f"{Path(path).name}: greedy, retention off, {len(prompts)} held-out stdlib prompts, "
                     f"{k} drafts per round",
            "costs": costs, "rounds": rounds}


def render(rep: SpecReport) -> str:
    lines = [f"model: {rep.model}; {rep.prompts} prompts x {rep.max_tokens} tokens, {rep.draft_steps} drafts "
             f"per round, best of {rep.runs} runs", "",
             "| temp | policy | tokens/round | acceptance per step | drafts per step | decode tok/s (best) | "
             "vs no drafter |", "|---:|---|---:|---|---|---:|---:|"]
    for c in rep.cases:
        acc = ", ".join(f"{a:.3f}" for a in c.acceptance) if c.speculative else "—"
        dr = ", ".join(str(d) for d in c.drafted) if c.speculative else "—"
        tpr = f"{c.tokens_per_round:.3f}" if c.speculative else "1"
        lines.append(f"| {c.temperature:g} | {c.policy} | {tpr} | {acc} | {dr} | {c.best_tok_s:.1f} | "
                     f"{c.speedup:.2f}× |")
    return "\n".join(lines)


def run(model_path: str | None = None, *, max_tokens: int = 96, draft_steps: int = 3, runs: int = 3,
        threads: int = 0, prompts: int | None = None, rounds_out: Path | None = None
        ) -> tuple[SpecReport, dict[str, Any]]:
    ps = heldout_prompts()
    if prompts is not None:
        ps = ps[:prompts]
    rep = run_policies(model_path, ps, max_tokens=max_tokens, draft_steps=draft_steps, runs=runs,
                       threads=threads)
    doc = record_rounds(model_path, ps, max_tokens=max_tokens, draft_steps=draft_steps, threads=threads)
    if rounds_out is not None:
        rounds_out.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    return rep, doc
