"""The one Engine class and its settings: every setting the C++ core reads reaches the engine once, as
one typed _strata.Settings (the C++ settings parser validates it when it is made; a round takes none),
STRATA_METAL_MTP_TILE and STRATA_METALLIB are Config fields, and the prefix-reuse decision is the engine's
(engine/sequence.h)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import strata
from strata import _strata
from strata.model import DEMO_MODEL_PATH

PATH = str(DEMO_MODEL_PATH)


def test_metal_settings_are_config_fields() -> None:
    c = strata.Config(metal_mtp_tile=" 8, 4,2,4", metallib=" /opt/strata.metallib ")
    assert (c.metal_mtp_tile, c.metallib) == ("8,4,2,4", "/opt/strata.metallib")
    assert c.to_env()["STRATA_METAL_MTP_TILE"] == "8,4,2,4"
    assert strata.Config.from_env(c.to_env(), strict=True) == c
    assert "STRATA_METALLIB" not in strata.Config().to_env()
    rule = r"Config.metal_mtp_tile \(STRATA_METAL_MTP_TILE\).*R\*K <= 16"
    with pytest.raises(strata.ConfigError, match=rule):
        strata.Config(metal_mtp_tile="16,4,4,8")
    with pytest.warns(strata.ConfigWarning, match="STRATA_METAL_MTP_TILE.*default drafter tile"):
        assert strata.Config.from_env({"STRATA_METAL_MTP_TILE": "8,4"}).metal_mtp_tile == ""


def test_engine_validates_its_settings_once() -> None:
    with pytest.raises(strata.ConfigError, match="STRATA_METAL_MTP_TILE"):
        _strata.Engine(PATH, backend="metal-emu", max_ctx=16,
                       settings=_strata.Settings({"STRATA_METAL_MTP_TILE": "8,4,2,5"}))
    with pytest.raises(strata.ConfigError, match="STRATA_METAL_SPEC_MIN_CUM_P"):
        _strata.Engine(PATH, max_ctx=16, settings=_strata.Settings({"STRATA_METAL_SPEC_MIN_CUM_P": "2"}))
    with pytest.raises(strata.ConfigError, match="needs the cpu backend"):
        _strata.Engine(PATH, backend="metal-emu", max_ctx=16,
                       settings=strata.Config(expert_mode="stream").native())
    with pytest.raises(TypeError):  # settings are typed: no STRATA_* text reaches the engine
        _strata.Engine(PATH, max_ctx=16, settings={"STRATA_METAL_SPEC_MIN_CUM_P": "0.5"})  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", ["cpu", "metal-emu"])
def test_rounds_use_the_engines_retention(backend: str) -> None:
    # A per-step floor no draft passes: with the policy on, every round rejects before verifying.
    settings = _strata.Settings({"STRATA_METAL_SPEC_MIN_P_SCHEDULE": "1.0"})
    greedy = strata.SamplingPolicy().native()
    for schedule, verifies in ((settings, False), (_strata.Settings(), True)):
        eng = _strata.Engine(PATH, backend=backend, n_threads=1, max_ctx=48, settings=schedule)
        assert eng.backend == backend
        t = int(eng.eval([1, 5, 9, 2, 7], start_pos=0).argmax())
        rng = _strata.decode.Rng(0)
        _toks, drafted, verified, _accepted, _probs = eng.spec_round(t, [], 3, True, policy=greedy, rng=rng)
        assert drafted == 3
        assert (verified > 0) == verifies


def test_reuse_prefix_is_the_engines_decision() -> None:
    eng = _strata.Engine(PATH, n_threads=1, max_ctx=64,
                         settings=strata.Config(mtp_sink=2, mtp_window=4).native())
    held = [1, 5, 9, 2, 7, 3, 8, 4, 6, 11]
    eng.eval(held[:-1], start_pos=0, logits="none")  # the last token is pending
    assert eng.reuse_prefix(held, held + [12, 13], False) == 9  # everything evaluated is kept
    assert eng.reuse_prefix(held, held[:6] + [40, 41], False) == 6
    assert eng.reuse_prefix(held, held[:3], True) == 2  # the last target token is evaluated again
    # Drafting: a changed token at 6 loses drafter cell 5 (its next token), whose streams are gone
    # (the prompt ran as one chunk of rows 0..8, still held: the eval from 6 re-encodes it) ...
    assert eng.reuse_prefix(held, held[:6] + [40, 41], True) == 6
    # ... but after another eval those rows are gone: one token more is evaluated, or all of it
    # when the hole lies in the sink.
    eng.eval([held[-1]], start_pos=9, logits="none")
    eng.eval([30], start_pos=10, logits="none")
    assert eng.reuse_prefix(held + [30], held[:6] + [40, 41], True) == 5
    assert eng.reuse_prefix(held + [30], held[:1] + [40, 41], True) == 0
    with pytest.raises(strata.InvalidArgument, match="empty"):
        eng.reuse_prefix(held, [], True)


# ------------------------------------------------------------------------------------ K/V cell type
@pytest.fixture(scope="module")
def tiny_qwen3moe(tmp_path_factory: pytest.TempPathFactory) -> str:
    from strata.bench.llama_compare import TINY, cached_gguf

    return str(cached_gguf(TINY, tmp_path_factory.mktemp("kv"), "F32", 0, lambda _msg: None))


def test_kv_type_is_a_validated_setting() -> None:
    assert strata.Config().kv_type == "auto"
    c = strata.Config(kv_type=" F16 ")
    assert c.kv_type == "f16" and c.to_env()["STRATA_KV_TYPE"] == "f16"
    assert strata.Config.from_env(c.to_env(), strict=True) == c
    with pytest.raises(strata.ConfigError, match=r"Config.kv_type \(STRATA_KV_TYPE\).*'q8'"):
        strata.Config(kv_type="q8")  # type: ignore[arg-type]
    with pytest.warns(strata.ConfigWarning, match="STRATA_KV_TYPE.*the model's own K/V type applies"):
        assert strata.Config.from_env({"STRATA_KV_TYPE": "bf16"}).kv_type == "auto"


def test_kv_type_stores_the_cells_as_asked(tiny_qwen3moe: str) -> None:
    """qwen3moe's auto cells are fp16 where the CPU has F16C (x86-64: the avx2 path is supported) and
    f32 elsewhere; f16 cells give logits within their rounding of the f32 ones and int8 cells further
    off (neither the same bits: the cells really are stored narrower), and a prompt evaluated in pieces
    gives the logits of one piece."""
    auto = "f16" if "avx2" in _strata.supported_isas() else "f32"
    tokens = [int(t) for t in np.random.default_rng(5).integers(0, 500, size=40)]
    logits: dict[str, np.ndarray] = {}
    for kv in ("auto", "f32", "f16", "int8"):
        eng = _strata.Engine(tiny_qwen3moe, n_threads=1, max_ctx=64,
                             settings=strata.Config(kv_type=kv).native())  # type: ignore[arg-type]
        assert eng.hparams["kv_type"] == (auto if kv == "auto" else kv)
        logits[kv] = np.asarray(eng.eval(tokens, start_pos=0, logits="all"))
        pieces = [np.asarray(eng.eval(tokens[:17], start_pos=0, logits="all")),
                  np.asarray(eng.eval(tokens[17:], start_pos=17, logits="all"))]
        assert np.array_equal(np.concatenate(pieces), logits[kv])
    assert np.array_equal(logits["auto"], logits[auto])
    scale = float(np.std(logits["f32"]))
    diff = {kv: float(np.max(np.abs(logits[kv] - logits["f32"]))) for kv in ("f16", "int8")}
    assert 0 < diff["f16"] <= 1e-2 * scale, (diff, scale)  # measured: 0.24 % of the logits' std
    # int8 cells (one fp16 scale per 64 values) round far more: 0.7 of the std on this random model.
    assert np.isfinite(logits["int8"]).all() and diff["f16"] < diff["int8"], (diff, scale)


def test_a_sessions_stats_name_its_cells(tiny_qwen3moe: str) -> None:
    """--stats says what `auto` resolved to on this machine, and an explicit type is what it names."""
    auto = "f16" if "avx2" in _strata.supported_isas() else "f32"
    model = strata.Model(tiny_qwen3moe, spec_cost_cache=False)
    for kv, want in (("auto", auto), ("f32", "f32"), ("int8", "int8")):
        s = model.session(config=strata.Config(threads=1, kv_type=kv),  # type: ignore[arg-type]
                          sampling=strata.SamplingPolicy(temperature=0))
        "".join(s.generate([1, 2, 3], max_tokens=2))
        assert s.stats.kv_type == want and s.stats.as_dict()["kv_type"] == want
        assert f"; K/V cells {want}" in s.stats.summary().splitlines()[0]
    # A session file saved with int8 cells, loaded into an auto session: the engine is swapped, and so is
    # what the stats name.
    saved = model.session(config=strata.Config(threads=1, kv_type="int8"))
    "".join(saved.generate([1, 2, 3], max_tokens=2))
    path = Path(tiny_qwen3moe).with_suffix(".session")
    saved.save(path)
    loaded = model.session(config=strata.Config(threads=1))
    loaded.load(path)
    "".join(loaded.generate("", max_tokens=2))
    assert loaded.stats.kv_type == "int8"


def test_kv_type_on_the_demo_model_and_where_it_is_refused() -> None:
    # The strata format's cells are int8; f16 cells run the same model, drafter included.
    eng = _strata.Engine(PATH, n_threads=1, max_ctx=48, settings=strata.Config(kv_type="f16").native())
    assert eng.hparams["kv_type"] == "f16"
    assert np.isfinite(np.asarray(eng.eval([1, 5, 9, 2, 7], start_pos=0))).all()
    assert _strata.Engine(PATH, n_threads=1, max_ctx=48).hparams["kv_type"] == "int8"
    with pytest.raises(strata.ConfigError, match="kv_type f16 needs the cpu backend"):
        _strata.Engine(PATH, backend="metal-emu", max_ctx=16, settings=strata.Config(kv_type="f16").native())
    # The Metal backends keep the model's own type, which may also be named.
    same = _strata.Engine(PATH, backend="metal-emu", max_ctx=16,
                          settings=strata.Config(kv_type="int8").native())
    assert same.hparams["kv_type"] == "int8"
