"""The bench modules of R-11 (drafter-quant) and issue 5 item 8 (spec) on the demo model, small."""

from __future__ import annotations

import json

import pytest

import strata
from strata import _strata
from strata.bench import drafter_quant as dq
from strata.bench import retention as rt
from strata.bench import spec
from strata.model import DEMO_MODEL_PATH

pytestmark = pytest.mark.skipif(not DEMO_MODEL_PATH.is_file(), reason="demo model not built")


def test_drafter_quant_errors_and_bytes() -> None:
    eng = _strata.Engine(str(DEMO_MODEL_PATH), n_threads=1, max_ctx=8, max_rows=4, encode_mtp=False,
                         settings=strata.Config(mtp_draft_q4=False).native())
    errs = dq.gemv_errors(eng, n_inputs=8)
    assert [e.name for e in errs] == list(dq.REQUANT_TENSORS)
    for e in errs:
        assert e.stored_error < e.errors["Q5_0"] < e.errors["Q4_0 Lloyd"] < e.errors["Q4_0 plain"] < 0.2
    path = str(DEMO_MODEL_PATH)
    off, q5, q4 = (dq.draft_step_bytes(path, s) for s in (None, "q5", "q4"))
    assert off[0] - q5[0] == off[1] - q5[1] > 0 and q5[0] > q4[0]
    assert q4[1] * 34 == off[1] * 18  # Q8_0 (34 bytes per 32) -> Q4_0 (18 bytes per 32)
    q4g = dq.draft_step_bytes(path, "q4-ggml")  # the default: the same tensors, and the head, in Q4_0
    assert q4g[1] == q4[1] and q4[0] - q4g[0] == 4096 * (34 - 18) * 384 // 32


def test_record_rounds_is_a_retention_rounds_file(tmp_path) -> None:
    prompts = dq.heldout_prompts()[:1]
    doc = spec.record_rounds(None, prompts, max_tokens=16, draft_steps=3, threads=1)
    assert doc["format"] == "strata.retention-rounds" and doc["version"] == 1
    assert doc["rounds"] and all(1 <= len(r["confidences"]) <= 3 for r in doc["rounds"])
    assert len(doc["rounds"][0]["confidences"]) == 3
    for r in doc["rounds"]:  # accept flags form a prefix
        assert r["accepted"] == sorted(r["accepted"], reverse=True)
    assert len(doc["costs"]["verifier"]) == 4
    f = tmp_path / "rounds.json"
    f.write_text(json.dumps(doc))
    data = rt.load_measured(f)
    assert len(data.rounds) == len(doc["rounds"])


def test_greedy_rounds_match_the_session() -> None:
    # The engine-driven loop accepts exactly what a greedy speculative session accepts.
    prompts = dq.heldout_prompts()[:1]
    doc = spec.record_rounds(None, prompts, max_tokens=24, draft_steps=3, threads=1)
    s = strata.Model().session(config=strata.Config(threads=1, speculative=True, draft_steps=3))
    "".join(s.generate(prompts[0], max_tokens=24))
    accepted = [sum(r["accepted"]) for r in doc["rounds"]]
    assert s.stats.rounds == len(doc["rounds"])
    assert sum(s.stats.accepted) == sum(accepted)
    assert s.stats.drafted == [sum(len(r["accepted"]) > j for r in doc["rounds"]) for j in range(3)]
