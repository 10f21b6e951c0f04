"""The decode loop's decision logic through the bindings (strata._strata.decode): routing, plan,
sampling and verification, settings validation, retention and draft cells."""

from __future__ import annotations

import math

import numpy as np
import pytest

import strata
from strata._strata import decode


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def test_route_row_default_is_plain_topk() -> None:
    rng = np.random.default_rng(0)
    probs = _softmax(rng.normal(size=512)).astype(np.float32)
    ids, w = decode.route_row(probs, 10)
    want = np.argsort(-probs, kind="stable")[:10]
    assert ids.tolist() == want.tolist()
    np.testing.assert_allclose(w, probs[want] / probs[want].sum(), atol=2e-7)
    # an all-resident map changes nothing either
    ids2, _ = decode.route_row(probs, 10, np.ones(512, np.uint8), decode.MoceParams(resident_bonus=4.0))
    assert ids2.tolist() == ids.tolist()


def test_route_row_moce_bonus_and_draft_rows() -> None:
    probs = np.array([0.4, 0.3, 0.2, 0.1], np.float32)
    res = np.array([0, 0, 1, 1], np.uint8)
    p = decode.MoceParams(resident_bonus=4.0, protect=2)
    ids, w = decode.route_row(probs, 3, res, p)
    assert ids.tolist() == [0, 1, 2]
    p.draft = True
    ids, w = decode.route_row(probs, 3, res, p, draft_row=True)  # draft rows: m = 16, r_prot = 1
    assert ids.tolist() == [0, 2, 3]
    np.testing.assert_allclose(w, np.array([0.4, 0.2, 0.1]) / 0.7, atol=2e-7)
    ids_w, _ = decode.route_window(np.stack([probs, probs]), 3, res, p, verification=True)
    assert ids_w[0].tolist() == [0, 1, 2] and ids_w[1].tolist() == [0, 2, 3]
    with pytest.raises(strata.InvalidArgument):
        decode.route_row(probs, 5)


def test_build_plan_matches_stable_sort() -> None:
    rng = np.random.default_rng(1)
    E, rows, k = 64, 37, 6
    ids = np.stack([rng.choice(E, k, replace=False) for _ in range(rows)]).astype(np.int32)
    res = (rng.random(E) < 0.3).astype(np.uint8)
    plan = decode.build_plan(ids, E, res)
    flat = ids.reshape(-1)
    order = np.lexsort((flat, 1 - res[flat]))  # stable: by resident first, then expert, then entry
    assert plan["slot_entry"].tolist() == order.tolist()
    assert (plan["entry_slot"][plan["slot_entry"]] == np.arange(flat.size)).all()
    groups = plan["group_expert"]
    assert plan["group_offset"][-1] == flat.size
    assert all(res[g] for g in groups[: plan["n_resident_groups"]])
    assert not any(res[g] for g in groups[plan["n_resident_groups"] :])


def test_sample_dist_formulas() -> None:
    logits = np.array([2.0, -1.0, 0.5, 0.0], np.float32)
    pol = decode.SamplingPolicy(temperature=0.5, repetition_penalty=2.0, presence_penalty=0.5)
    d = decode.sample_dist(logits, pol, history=[0, 0, 1], inputs=[3])
    ref = _softmax(np.array([2 / 2 - 0.5, -1 * 2 - 0.5, 0.5, -0.5]) / 0.5)
    np.testing.assert_allclose(d, ref, atol=1e-6)
    pol = decode.SamplingPolicy(temperature=1.0, top_p=0.75)
    d = decode.sample_dist(np.log(np.array([0.2, 0.5, 0.3], np.float32)), pol)
    np.testing.assert_allclose(d, [0.0, 0.625, 0.375], atol=1e-6)
    with pytest.raises(strata.InvalidArgument, match="top_p"):
        decode.SamplingPolicy(top_p=0.0)


def test_rng_state_round_trip_and_verify_window() -> None:
    rng = decode.Rng(5)
    state = rng.state()
    a = [rng.next() for _ in range(4)]
    rng.set_state(state)
    assert [rng.next() for _ in range(4)] == a
    V = 6
    logits = np.zeros((3, V), np.float32)
    logits[0, 2] = logits[1, 4] = logits[2, 1] = 5.0
    greedy = decode.SamplingPolicy(temperature=0.0)
    assert decode.verify_window(logits, [2, 4], greedy, [0], rng) == (2, 1)
    assert decode.verify_window(logits, [2, 3], greedy, [0], rng) == (1, 4)
    hot = decode.SamplingPolicy(temperature=0.8)
    r1, r2 = decode.Rng(9), decode.Rng(9)
    out1 = [decode.verify_window(logits, [2, 4], hot, [0], r1) for _ in range(20)]
    out2 = [decode.verify_window(logits, [2, 4], hot, [0], r2) for _ in range(20)]
    assert out1 == out2
    with pytest.raises(strata.InvalidArgument):
        decode.verify_window(logits, [2], greedy, [0], rng)  # wrong row count


def test_settings_parser() -> None:
    s = decode.parse_settings({})
    assert s["mtp"] == {"sink": 64, "window": 256, "q4": False, "q5": False, "draft_q4": True}
    assert s["retention"]["policy_on"] is False and s["spec_sample"] == "exact"
    env = {"STRATA_METAL_SPEC_MIN_P_SCHEDULE": " 0.5, 0.25 ", "STRATA_MOCE_BONUS": "0.85"}
    s = decode.parse_settings(env)
    assert s["retention"]["schedule"] == [0.5, 0.25]
    assert math.isclose(s["moce"]["log_bonus"], 0.85, rel_tol=1e-6)
    with pytest.raises(strata.ConfigError, match="STRATA_METAL_SPEC_MIN_P_SCHEDULE"):
        decode.parse_settings({"STRATA_METAL_SPEC_MIN_P_SCHEDULE": "0.5,"})
    settings, diags = decode.parse_settings(
        {"STRATA_METAL_SPEC_MIN_P_SCHEDULE": "nan", "STRATA_METAL_SPEC_MIN_CUM_P": "0.2"}, strict=False
    )
    assert len(diags) == 1 and settings["retention"]["policy_on"] is False
    names = {d["name"] for d in decode.known_settings()}
    assert {"STRATA_METAL_MTP_SINK", "STRATA_SPEC_SAMPLE", "STRATA_MOCE_PROTECT"} <= names


def test_retention_and_draft_cells() -> None:
    env = {"STRATA_METAL_SPEC_MIN_CUM_P": "0.25"}
    assert decode.retain_chained(env, 0.0, [0.5, 0.5, 0.5]) == 2
    assert decode.retain_chained({}, 0.5, [0.9, 0.2, 0.9]) == 1
    cells = decode.DraftCells(64, 256)
    cells.wrote(0, 1000)
    row = cells.draft_row_cells(999)
    assert len(row) == 321 and row[63] == 63 and row[64] == 743
    cells.check_reads(row, 999)
    cells.wrote(500, 0)  # everything past 500 stale
    with pytest.raises(strata.StrataError, match="does not follow the valid run"):
        cells.check_reads(row, 999)
    cells.wrote(990, 5)  # a gap: the run restarts at 990, cells 743..989 are no longer valid
    with pytest.raises(strata.StrataError, match="reads cell 743"):
        cells.check_reads(row, 999, chain_step=5)
