"""R-11 low-bit drafter weights through the Python API: the engine's requantized MTP tensors are the
quantizer's output on the dequantized stored weights, the others are untouched, the settings are
validated, sessions still draft, and off is bit-identical to an engine without the argument."""

from __future__ import annotations

import numpy as np
import pytest

import strata
from engine_args import engine
from strata import _strata, quant
from strata.model import DEMO_MODEL_PATH

REQUANT = ("attn_q", "attn_output", "fc_embedding", "fc_hidden", "ffn_gate_shexp", "ffn_up_shexp",
           "ffn_down_shexp")
KEPT = ("attn_k", "attn_v", "ffn_gate_inp", "ffn_gate_inp_shexp")

pytestmark = pytest.mark.skipif(not DEMO_MODEL_PATH.is_file(), reason="demo model not built")


def _engine(requant: str | None) -> object:
    # repack off: these tests read the drafter's weights in their file layout (and their addresses).
    return engine(DEMO_MODEL_PATH, n_threads=1, max_ctx=64, max_rows=16, mtp_q4=requant == "q4",
                  mtp_q5=requant == "q5", repack="off")


@pytest.fixture(scope="module")
def engines() -> dict[str | None, object]:
    return {r: _engine(r) for r in (None, "q4", "q5")}


@pytest.mark.parametrize(("setting", "type_name", "method"),
                         [("q4", "Q4_0", "lloyd"), ("q5", "Q5_0", "ggml")])
def test_requantized_tensors_are_the_quantizer_of_the_stored_weights(engines, setting, type_name,
                                                                     method) -> None:
    off, on = engines[None], engines[setting]
    assert on.mtp_requant == setting and off.mtp_requant is None
    for name in REQUANT:
        src, got = off.mtp_weight(name), on.mtp_weight(name)
        shape = (src["rows"], src["cols"])
        want = quant.quantize(quant.dequantize(src["data"], src["type"], shape), type_name, method=method)
        assert got["type"] == type_name, name
        assert np.array_equal(got["data"], want), name
    for name in KEPT:
        a, b = off.mtp_weight(name), on.mtp_weight(name)
        assert a["type"] == b["type"] and np.array_equal(a["data"], b["data"]), name


def test_kept_tensors_stay_in_the_file_mapping(engines) -> None:
    # Requantized tensors live in owned buffers, the kept ones still point at the mapped file: the
    # distance between two kept tensors is the same with and without requant.
    off, on = engines[None], engines["q4"]
    d_off = off.mtp_weight("attn_v")["address"] - off.mtp_weight("attn_k")["address"]
    d_on = on.mtp_weight("attn_v")["address"] - on.mtp_weight("attn_k")["address"]
    assert d_off == d_on
    assert on.mtp_weight("attn_q")["address"] != off.mtp_weight("attn_q")["address"]


def test_off_is_bit_identical_and_drafts_run(engines) -> None:
    prompt = list(range(5, 45))
    plain = engine(DEMO_MODEL_PATH, n_threads=1, max_ctx=64, max_rows=16, repack="off")
    results = {}
    for key, eng in [("plain", plain), *engines.items()]:
        eng.rollback(0)
        logits = eng.eval(prompt)
        t = int(logits.argmax())
        dl, ids = eng.mtp_draft(t, n_steps=3)
        results[key] = (logits, dl, ids)
    assert np.array_equal(results["plain"][1], results[None][1])
    assert np.array_equal(results["plain"][2], results[None][2])
    for r in ("q4", "q5"):
        assert np.array_equal(results[r][0], results[None][0])  # the main model is untouched
        assert np.isfinite(results[r][1]).all()
        assert not np.array_equal(results[r][1], results[None][1])
    with pytest.raises(strata.ConfigError):  # the engine's settings hold no other drafter format
        _strata.Settings({"STRATA_METAL_MTP_Q4": "q3"})


def test_config_fields_and_validation() -> None:
    assert strata.Config().mtp_requant is None
    assert strata.Config(mtp_q4=True).mtp_requant == "q4"
    assert strata.Config(mtp_q5=True).mtp_requant == "q5"
    with pytest.raises(strata.ConfigError, match="STRATA_METAL_MTP_Q4"):
        strata.Config(mtp_q4=True, mtp_q5=True)
    with pytest.raises(strata.ConfigError):
        strata.Config(mtp_q4=1)  # type: ignore[arg-type]
    cfg = strata.Config(mtp_q5=True)
    assert cfg.to_env()["STRATA_METAL_MTP_Q5"] == "1"
    assert strata.Config.from_env(cfg.to_env()) == cfg
    c, diags = strata.Config.parse_env({"STRATA_METAL_MTP_Q4": "yes"})
    assert len(diags) == 1 and "STRATA_METAL_MTP_Q4" in diags[0] and c.mtp_requant is None
    c, diags = strata.Config.parse_env({"STRATA_METAL_MTP_Q4": "1", "STRATA_METAL_MTP_Q5": "1"})
    assert len(diags) == 1 and c.mtp_requant is None
    with pytest.raises(strata.ConfigError):
        strata.Config.from_env({"STRATA_METAL_MTP_Q4": "1", "STRATA_METAL_MTP_Q5": "1"}, strict=True)


def test_session_drafts_with_q4() -> None:
    model = strata.Model()
    s = model.session(config=strata.Config(threads=1, speculative=True, mtp_q4=True, context_length=256))
    text = "".join(s.generate("import os\n\ndef ", max_tokens=24))
    assert text
    assert s.stats.rounds > 0 and sum(s.stats.drafted) > 0


def test_the_default_drafter_format_is_q4_ggml_on_the_cpu_backend() -> None:
    # Config.mtp_draft_q4 (on by default): the engine reports the format it loaded; the setting off, R-11's
    # own formats, and the Metal backends keep theirs. A malformed value rejects the mtp group as a whole.
    def fmt(backend: str = "cpu", **cfg: bool) -> str | None:
        settings = strata.Config(**cfg).native()
        eng = _strata.Engine(str(DEMO_MODEL_PATH), backend=backend, max_ctx=16, settings=settings)
        return eng.mtp_requant

    assert fmt() == "q4-ggml"
    assert fmt(mtp_draft_q4=False) is None
    assert fmt(mtp_q4=True) == "q4"
    assert fmt("metal-emu") is None
    c, diags = strata.Config.parse_env({"STRATA_METAL_MTP_DRAFT_Q4": "maybe"})
    assert len(diags) == 1 and "STRATA_METAL_MTP_DRAFT_Q4" in diags[0] and c.mtp_draft_q4 is True
    assert strata.Config.from_env({"STRATA_METAL_MTP_DRAFT_Q4": "0"}).mtp_draft_q4 is False
