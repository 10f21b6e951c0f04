"""``bench window-routing`` and the +w modes of ``bench spec-speed`` (streaming-aware windows)."""

from __future__ import annotations

import pytest

import strata
from strata.bench import spec_speed
from strata.bench import window_routing as wr
from strata.cli.__main__ import main
from strata.model import DEMO_MODEL_PATH


def test_window_routing_teacher_forced_on_the_demo() -> None:
    tokens = wr.heldout_tokens(DEMO_MODEL_PATH, 200)
    plain = wr.run_one(DEMO_MODEL_PATH, tokens, "stream 25%", 1, 0.0, threads=1, align=4)
    off = wr.run_one(DEMO_MODEL_PATH, tokens, "stream 25%", 4, 0.0, threads=1)
    on = wr.run_one(DEMO_MODEL_PATH, tokens, "stream 25%", 4, 2.0, threads=1)
    # Off, a window scores the text as plain steps do (the same model, up to the multi-row kernels' rounding).
    assert off.tokens == plain.tokens and off.ppl == pytest.approx(plain.ppl, rel=2e-3)
    assert plain.experts_per_window == 2.0  # top-2 of 16, one row
    # On, the windows request fewer distinct experts and read fewer bytes; the perplexity moves.
    assert on.experts_per_window < off.experts_per_window
    assert on.mib_per_token < off.mib_per_token and on.ppl != off.ppl
    table = wr.render([plain, off, on])
    assert "| stream 25% | 4 | 2 | " in table and "+0.00 %" in table


def test_window_modes_of_spec_speed() -> None:
    assert spec_speed.mode_config("auto+w", 1.5) == {"speculative": None, "moce_window": 1.5,
                                                     "moce_window_cut": 0.0, "moce_drafter_resident": False}
    assert spec_speed.mode_config("on", 1.5) == {"speculative": True, "moce_window": 0.0,
                                                 "moce_window_cut": 0.0, "moce_drafter_resident": False}
    assert spec_speed.mode_config("on+c+r", 1.5, 0.7) == {
        "speculative": True, "moce_window": 0.0, "moce_window_cut": 0.7, "moce_drafter_resident": True}
    with pytest.raises(ValueError, match="unknown drafter mode"):
        spec_speed.mode_config("on+x", 1.0)
    with pytest.raises(ValueError, match="unknown drafter mode"):
        spec_speed.mode_config("sometimes", 1.0)
    case = spec_speed.run_case(strata.Model(), 0.0, 1, "stream 25%", modes=["off", "on", "on+w", "on+c"],
                               runs=1, max_tokens=16, draft_steps=3, cut=1.0)
    assert case.same_text is True  # +w is not held to plain decoding's text; +c is
    assert case.modes["on+c"].cut_drafts > 0 and case.modes["on"].cut_drafts == 0
    assert "| drafts cut |" in spec_speed.render([case])
    assert sum(case.modes["on+w"].draft_counts) > 0
    assert all(r.cpu_median > 0 for r in case.modes.values())
    assert case.cpu_speedup("off") == pytest.approx(1.0)
    back = spec_speed.cases_from_json(spec_speed.as_json([case]))[0]
    assert back.modes["on+w"].tok_s == case.modes["on+w"].tok_s and back.store == "stream 25%"
    assert back.speedup("on") == pytest.approx(case.speedup("on"))


def test_window_routing_cli_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "window-routing", "--rows", "1"]) == 2
    assert "--rows must be >= 2" in capsys.readouterr().err
    assert main(["bench", "spec-speed", "--modes", "off,on+x"]) == 2
    assert main(["bench", "spec-speed", "--window", "0"]) == 2
