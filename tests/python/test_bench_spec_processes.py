"""``bench spec-processes`` (strata.bench.spec_processes): one ``generate`` process per run, with the
speculation cost cache emptied before each auto-cold run and kept for auto-warm."""

from __future__ import annotations

import pytest

from strata.bench import spec_processes


def test_parse_stats() -> None:
    out = ("prompt: 9 tokens (0 cached), prefill 9 tokens in 0.010 s (900.0 tok/s)\n"
           "generated: 16 tokens in 0.012 s (1250.5 tok/s), finish: length\n"
           "speculative: 2 rounds, 2.00 tokens/round, acceptance per draft step [1.00]\n"
           "drafts verified per step {0:15}; adaptive: estimated gain 1.00x, measured 1.00x over a plain "
           "step; seeded with earlier costs\n")
    assert spec_processes.parse_stats(out) == (16, 1250.5, True, 2)
    assert spec_processes.parse_stats(out.replace("seeded with earlier costs", "costs measured from "
                                                  "scratch"))[2] is False
    with pytest.raises(RuntimeError, match="generated"):
        spec_processes.parse_stats("error: something\n")


def test_a_small_run_seeds_only_the_warm_mode() -> None:
    (case,) = spec_processes.run(None, temperatures=[0.0], threads=[1], runs=1, max_tokens=8)
    assert list(case.modes) == ["off", "auto-cold", "auto-warm"]
    assert [case.modes[m].seeded for m in case.modes] == [0, 0, 1]
    # The demo model: the cold session's probe drafts (round 0 always does), the seeded one need not.
    assert case.modes["off"].rounds == [0] and case.modes["auto-cold"].rounds[0] >= 1
    assert all(r.tokens == [8] and r.tok_s[0] > 0 and r.wall_s[0] > 0 for r in case.modes.values())
    assert case.ratio("off", "tok_s") == 1.0
    assert "auto-warm" in spec_processes.render([case])
