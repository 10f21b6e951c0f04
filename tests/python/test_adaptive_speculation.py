"""Adaptive speculation (Config.speculative = None, draft/adaptive.h) on the demo model: temperature-0 text
identical to plain and to always-drafting decoding, the stats it reports, and the engine's estimates."""

from __future__ import annotations

import numpy as np
import pytest

import strata
from strata import _strata

PROMPT = "import os\n\ndef read_config(path):\n    "


@pytest.fixture(scope="module")
def model() -> strata.Model:
    return strata.Model()


def _run(model: strata.Model, speculative: bool | None, temperature: float = 0.0,
         tokens: int = 96, seed: int = 7) -> tuple[str, strata.GenerationStats]:
    s = model.session(config=strata.Config(speculative=speculative, threads=1),
                      sampling=strata.SamplingPolicy(temperature=temperature, seed=seed))
    text = "".join(s.generate(PROMPT, max_tokens=tokens))
    return text, s.stats


def test_temperature_zero_text_is_plain_decoding(model: strata.Model) -> None:
    plain, st_off = _run(model, False)
    auto, st_auto = _run(model, None)
    forced, st_on = _run(model, True)
    assert auto == plain == forced
    assert not st_off.speculative and st_off.draft_counts == []
    assert st_auto.adaptive and not st_on.adaptive
    # Forced drafting verifies draft_steps drafts whenever a round can draft at all.
    assert len(st_on.draft_counts) == 4 and st_on.draft_counts[3] >= st_on.steps - 3


def test_auto_reports_its_choices_and_gains(model: strata.Model) -> None:
    model.adaptive_costs.clear()  # a fresh start: no costs of the earlier tests' sessions
    _, st = _run(model, None, tokens=160)
    assert sum(st.draft_counts) == st.steps
    # Round 0 is the probe: one draft verified. Whether warm-up passes through every count follows
    # depends on the costs measured (none when even accepted drafts could not pay; draft/adaptive.h).
    assert len(st.draft_counts) >= 2 and st.draft_counts[1] >= 1
    assert st.estimated_gain > 0 and st.measured_gain > 0
    d = st.as_dict()
    assert d["adaptive"] is True and d["draft_counts"] == st.draft_counts
    line = [x for x in st.summary().splitlines() if x.startswith("drafts verified per step")]
    assert line and "estimated gain" in line[0] and "measured" in line[0]


def test_engine_estimates(model: strata.Model) -> None:
    eng = _strata.Engine(str(model.path), n_threads=1, max_ctx=256, encode_mtp=True)
    assert eng.spec_adaptive_stats() is None
    ids = model.tokenizer.encode(PROMPT)
    eng.eval(ids[:-1], logits="none")
    rng = _strata.decode.Rng(1)
    history: list[int] = []
    policy = strata.SamplingPolicy(temperature=0.0).native()
    token = ids[-1]
    for _ in range(40):
        toks, _d, _v, _a, _p = eng.spec_round(token, history, 3, policy=policy, rng=rng, adaptive=True)
        token = toks[-1]
    st = eng.spec_adaptive_stats()
    assert st["max_drafts"] == 3 and st["rounds"] == 40 and sum(st["chosen"]) == 40
    assert len(st["verify_seconds"]) == 4 and st["verify_seconds"][1] > 0  # the probe's 2-row window
    # Every draft count run has its window timed (verify_seconds[n]: a window of n + 1 rows).
    assert all(st["verify_seconds"][n] > 0 for n in range(1, 4) if st["chosen"][n] > 0)
    assert st["plain_seconds"] > 0  # the probe's plain step, without the drafter's encoding
    assert st["draft_step_seconds"] > 0 and len(st["acceptance"]) == 3
    assert all(0 < a < 1 for a in st["acceptance"])


def test_sampling_with_auto_is_plain_sampling_with_the_same_seed(model: strata.Model) -> None:
    # Adaptive rounds verify by sampling each row as a plain step would: one uniform per committed
    # token, so the text equals plain decoding's whatever draft counts the timings chose.
    # Round 0 is always the probe (one draft, draft/adaptive.h), whatever the timings; with seed 10
    # its draft is accepted, so the texts agree with drafts accepted, not only over plain steps.
    plain, _ = _run(model, False, temperature=0.7, tokens=96, seed=10)
    model.adaptive_costs.clear()  # unseeded: the probe drafts (a seeded one may not)
    auto, st = _run(model, None, temperature=0.7, tokens=96, seed=10)
    again, _ = _run(model, None, temperature=0.7, tokens=96, seed=10)
    assert auto == plain == again
    assert st.rounds > 0 and sum(st.draft_counts) == st.steps
    assert sum(st.accepted) > 0


def test_sessions_with_the_same_settings_start_from_the_costs_measured_before(model: strata.Model) -> None:
    """A session records its measured costs on the Model, keyed by its Config; the next session with the
    same settings seeds its engine with them (a probe whose drafts cannot pay is then skipped), one with
    other settings does not, and the temperature-0 text stays plain decoding's."""
    model.adaptive_costs.clear()
    plain, _ = _run(model, False)
    first, _ = _run(model, None)
    key = repr(strata.Config(speculative=None, threads=1))
    costs = model.adaptive_costs[key]
    assert costs["seeded"] is False and costs["plain_seconds"] > 0
    s = model.session(config=strata.Config(speculative=None, threads=1))
    again = "".join(s.generate(PROMPT, max_tokens=96))
    assert s._engine.spec_adaptive_stats()["seeded"] is True
    assert again == first == plain
    other = model.session(config=strata.Config(speculative=None, threads=2))
    "".join(other.generate(PROMPT, max_tokens=8))
    assert other._engine.spec_adaptive_stats()["seeded"] is False
    eng = _strata.Engine(str(model.path), n_threads=1, max_ctx=64, encode_mtp=True)
    with pytest.raises(_strata.InvalidArgument):
        eng.spec_adaptive_seed({**costs, "plain_seconds": -1.0})


def test_costs_are_recorded_at_a_calls_end_when_stats_are_read_and_when_a_call_is_abandoned(
        model: strata.Model) -> None:
    """The session takes the engine's costs snapshot (gains for the stats, the seed of later sessions) at
    the end of a call, when Session.stats is read while it streams, and when the caller stops reading it —
    never on a schedule of rounds (a snapshot cost 10-60 us against a 0.5 ms round on the demo model)."""
    model.adaptive_costs.clear()
    key = repr(strata.Config(speculative=None, threads=1))
    s = model.session(config=strata.Config(speculative=None, threads=1))
    "".join(s.generate(PROMPT, max_tokens=6))  # at most 6 rounds
    assert s.stats.steps <= 6
    assert model.adaptive_costs[key]["rounds"] == s._engine.spec_adaptive_stats()["rounds"]
    model.adaptive_costs.clear()
    s = model.session(config=strata.Config(speculative=None, threads=1))
    gen = s.generate(PROMPT, max_tokens=300)

    def read_until(rounds: int) -> None:  # the engine's own counter: takes no snapshot
        for _ in gen:
            costs = s._engine.spec_adaptive_stats()  # None before the first round (the prefill's piece)
            if costs is not None and costs["rounds"] > rounds:
                return
        pytest.fail("the call ended first")

    read_until(40)
    assert key not in model.adaptive_costs  # nothing taken while nobody looked
    st = s.stats  # read mid-stream: the snapshot is taken now
    rounds = s._engine.spec_adaptive_stats()["rounds"]
    assert model.adaptive_costs[key]["rounds"] == rounds
    assert st.measured_gain > 0 and st.peak_held >= 0
    read_until(rounds + 8)
    assert model.adaptive_costs[key]["rounds"] == rounds  # not refreshed while streaming
    gen.close()  # the caller stops reading: what the call measured still seeds later sessions
    assert model.adaptive_costs[key]["rounds"] == s._engine.spec_adaptive_stats()["rounds"] > rounds


# Costs under which no draft count can pay (a window costs 20-60 plain steps): a session seeded with them
# skips the probe and the warm-up and runs plain steps until exploration at its longest interval.
HOPELESS = {"verify_seconds": [0.0006, 0.01, 0.02, 0.03], "draft_step_seconds": 0.001,
            "plain_seconds": 0.0005}


def seed_hopeless(model: strata.Model) -> str:
    """Make HOPELESS the only seed of ``model`` for auto at one thread; returns its settings key."""
    key = repr(strata.Config(speculative=None, threads=1))
    model.adaptive_costs.clear()
    model.adaptive_costs[key] = {"runs": [HOPELESS], "seed": HOPELESS}
    return key


def test_plain_steps_record_their_distributions_peak(model: strata.Model) -> None:
    """Adaptive plain steps record a peak probability: when sampling, that of the distribution they sampled
    from (draft/adaptive.h, "Peak bound"); under greedy decoding, that of the logits' softmax at temperature 1
    (every fourth plain step: "Peak trigger"), which the test recomputes from the model's logits of the same
    text at the rows the plain steps computed."""

    class PlainRows:  # the engine, noting the row each plain step computes (the rounds that verified nothing)
        def __init__(self, session: strata.Session) -> None:
            self.engine, self.session, self.rows = session._engine, session, []

        def __getattr__(self, name: str) -> object:
            return getattr(self.engine, name)

        def spec_round(self, *args: object, **kw: object) -> object:
            row = len(self.session.tokens) - 1
            out = self.engine.spec_round(*args, **kw)
            if out[2] == 0:
                self.rows.append(row)
            return out

    # Seeded with costs that make drafting hopeless, so the call's rounds are plain steps whatever this
    # machine's timings (a call that drafted nearly every round left fewer than four greedy plain steps,
    # and so no greedy peak: a clean-clone CI run read 0.0); exploration then waits kExploreMax rounds.
    for temperature in (0.0, 1.0):
        seed_hopeless(model)
        s = model.session(config=strata.Config(speculative=None, threads=1),
                          sampling=strata.SamplingPolicy(temperature=temperature, seed=3))
        plain = PlainRows(s)
        s._engine = plain
        "".join(s.generate(PROMPT, max_tokens=64))
        s._engine = plain.engine
        costs = s._engine.spec_adaptive_stats()
        assert costs["chosen"][0] > 0 and 0.0 < costs["peak"] < 1.0, (temperature, costs["peak"])
        assert isinstance(costs["peak_held"], int) and s.stats.as_dict()["peak_held"] == costs["peak_held"]
        assert isinstance(costs["peak_triggered"], int)
        assert s.stats.as_dict()["peak_triggered"] == costs["peak_triggered"]
        if temperature == 0.0:
            # The peaks of the rows the recorded plain steps computed: every fourth plain step's, the last 32
            # (the ring). Not the text's rows at large: drafting rounds come where the text is predictable
            # (the peak trigger brings them there), so the rows left to plain steps have lower peaks.
            ids = list(s.tokens)
            e = _strata.Engine(str(model.path), "cpu", 1, 0, 0, False)
            rows = np.asarray(e.eval(ids[:-1], logits="all"), dtype=np.float64)
            recorded = plain.rows[3::4][-32:]
            logits = rows.reshape(len(ids) - 1, -1)[[r for r in recorded if r < len(ids) - 1]]
            z = np.exp(logits - logits.max(axis=1, keepdims=True))
            expected = float((1.0 / z.sum(axis=1)).mean())
            assert 0.0 < expected < 0.999 and abs(costs["peak"] - expected) < 0.15, (costs["peak"], expected)
    model.adaptive_costs.clear()


def test_in_one_process_a_seed_nobody_re_measures_ages_out(model: strata.Model) -> None:
    """Sessions of one Model (a server's requests) keep the same rule as the cost cache: a seeded session
    that drafts nothing stores no draft or window cost of its own, so after RUNS_REMEMBERED of them the
    seed holds none and the next session probes again."""
    from strata.spec_cost_cache import RUNS_REMEMBERED

    key = seed_hopeless(model)
    drafted = []
    for _ in range(RUNS_REMEMBERED + 1):
        _, st = _run(model, None, tokens=24)
        drafted.append(sum(st.draft_counts[1:]))
        assert model.adaptive_costs[key]["seed"]["plain_seconds"] > 0
    assert drafted[:RUNS_REMEMBERED] == [0] * RUNS_REMEMBERED and drafted[RUNS_REMEMBERED] >= 1
    model.adaptive_costs.clear()


def test_summary_says_when_no_plain_step_was_timed() -> None:
    """A session whose every round drafted has no plain-step time to divide by: the engine reports a
    measured gain of 0, and the summary must not print that as a 0.00x speed-up."""
    st = strata.GenerationStats(speculative=True, adaptive=True)
    st.record_round(3, 3, 4)
    st.record_step(3)
    snap = {"estimated_gain": 2.05, "measured_gain": 0.0, "seeded": True, "peak_held": 0, "peak_triggered": 0}
    st.record_adaptive(snap)
    line = next(x for x in st.summary().splitlines() if x.startswith("drafts verified per step"))
    assert "estimated gain 2.05x" in line and "not measured (no plain step timed)" in line
    assert "0.00x" not in line
    st.record_adaptive({**snap, "measured_gain": 1.9})
    line = next(x for x in st.summary().splitlines() if x.startswith("drafts verified per step"))
    assert "measured 1.90x over a plain step" in line


def test_summary_names_the_seeded_acceptance_prior() -> None:
    """--stats says when the estimate started from the acceptance earlier runs measured, step by step
    (- where a step had none), and says nothing of it without a seed."""
    st = strata.GenerationStats(speculative=True, adaptive=True)
    st.record_round(3, 3, 4)
    st.record_step(3)
    snap = {"estimated_gain": 1.3, "measured_gain": 1.2, "seeded": True, "peak_held": 0, "peak_triggered": 0,
            "acceptance_prior": [0.9, 0.8, -1.0]}
    st.record_adaptive(snap)
    line = next(x for x in st.summary().splitlines() if x.startswith("drafts verified per step"))
    assert "seeded with earlier costs and acceptance [0.90, 0.80, -]" in line
    assert st.as_dict()["acceptance_prior"] == [0.9, 0.8, -1.0]
    st.record_adaptive({**snap, "acceptance_prior": [-1.0, -1.0, -1.0]})
    line = next(x for x in st.summary().splitlines() if x.startswith("drafts verified per step"))
    assert line.endswith("seeded with earlier costs") and "acceptance [" not in line
