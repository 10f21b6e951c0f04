"""The Metal backend through the CPU threadgroup emulator (``Config(backend="metal-emu")``) as a session
backend: whole ``Model.session(...).generate`` runs, plain and speculative, give the CPU backend's greedy
tokens on tiny strata and qwen3moe models; ``_strata.Engine(backend="metal-emu")`` offers the interface
Session uses; bad backend names are clear errors (docs/metal.md)."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest

import strata
from engine_args import engine
from strata import _strata
from strata._strata import decode
from strata.convert import agreeing_strata_tensors, byte_level_tokenizer, convert_qwen3moe, write_strata_gguf

VOCAB = 300
TINY = dict(vocab_size=VOCAB, d=32, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, gated=True,
            sink_count=2, sliding_window=4, indexer_heads=2, indexer_dim=8, indexer_top_k=3,
            rope_theta=10000.0, rope_dim=8,
            n_experts=6, n_experts_used=2, expert_ffn=16, shared_ffn=16, hc_count=4, hc_sinkhorn_iters=3,
            hc_eps=1e-6, rms_eps=1e-6, mtp=True, mtp_vocab_ids=None, context_length=256)
EMU = strata.Config(backend="metal-emu", context_length=128, mtp_sink=2, mtp_window=6)
CPU = EMU.replace(backend="cpu", kv_type="f32")  # metal-emu keeps qwen3moe's own f32 cells


def strata_model(path: Path, scale: float, seed: int) -> Path:
    """A random strata model; `scale` < 1 shrinks the block outputs and makes the drafter agree more."""
    t = agreeing_strata_tensors(TINY, scale, seed=seed)
    return write_strata_gguf(t, TINY, path, tokenizer=byte_level_tokenizer(VOCAB))


def qwen3moe_model(path: Path, seed: int = 0) -> Path:
    """A random llama.cpp-style qwen3moe GGUF (f32 K/V cells), through the project's converter."""
    d, layers, heads, kv, hd, experts, ffn = 32, 2, 4, 2, 16, 6, 16
    cfg = dict(model_type="qwen3_moe", vocab_size=VOCAB, hidden_size=d, intermediate_size=48,
               moe_intermediate_size=ffn, num_hidden_layers=layers, num_attention_heads=heads,
               num_key_value_heads=kv, head_dim=hd, num_experts=experts, num_experts_per_tok=2,
               norm_topk_prob=True, max_position_embeddings=512, rms_norm_eps=1e-6, rope_theta=1e6)
    rng = np.random.default_rng(seed)

    def mat(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def norm(n: int) -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    state = {"model.embed_tokens.weight": mat(VOCAB, d), "model.norm.weight": norm(d),
             "lm_head.weight": mat(VOCAB, d)}
    for i in range(layers):
        p = f"model.layers.{i}"
        state.update({
            f"{p}.input_layernorm.weight": norm(d), f"{p}.post_attention_layernorm.weight": norm(d),
            f"{p}.self_attn.q_proj.weight": mat(heads * hd, d),
            f"{p}.self_attn.k_proj.weight": mat(kv * hd, d),
            f"{p}.self_attn.v_proj.weight": mat(kv * hd, d),
            f"{p}.self_attn.o_proj.weight": mat(d, heads * hd),
            f"{p}.self_attn.q_norm.weight": norm(hd), f"{p}.self_attn.k_norm.weight": norm(hd),
            f"{p}.mlp.gate.weight": mat(experts, d),
        })
        for x in range(experts):
            state[f"{p}.mlp.experts.{x}.gate_proj.weight"] = mat(ffn, d)
            state[f"{p}.mlp.experts.{x}.up_proj.weight"] = mat(ffn, d)
            state[f"{p}.mlp.experts.{x}.down_proj.weight"] = mat(d, ffn)
    source = types.SimpleNamespace(config=types.SimpleNamespace(to_dict=lambda: cfg),
                                   state_dict=lambda: state)
    return convert_qwen3moe(source, path, tokenizer=byte_level_tokenizer(VOCAB))


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, strata.Model]:
    root = tmp_path_factory.mktemp("metal-models")
    return {
        "agree": strata.Model(strata_model(root / "agree.gguf", 0.0, seed=5)),
        "random": strata.Model(strata_model(root / "random.gguf", 1.0, seed=7)),
        "qwen3moe": strata.Model(qwen3moe_model(root / "qwen3moe.gguf")),
    }


def run(model: strata.Model, config: strata.Config, prompt: str = "hello metal", max_tokens: int = 12
        ) -> tuple[strata.Session, str]:
    session = model.session(config=config)
    return session, "".join(session.generate(prompt, max_tokens=max_tokens))


# ---------------------------------------------------------------------------------------------- config
def test_config_accepts_the_backends() -> None:
    assert strata.Config(backend="metal-emu").backend == "metal-emu"
    assert strata.Config(backend=" Metal-Emu ").backend == "metal-emu"
    assert strata.Config.from_env({"STRATA_BACKEND": "metal-emu"}).backend == "metal-emu"
    assert strata.Config.from_env({"STRATA_BACKEND": "metal-emu"}).to_env()["STRATA_BACKEND"] == "metal-emu"


def test_bad_backend_names_are_clear_errors(models: dict[str, strata.Model]) -> None:
    with pytest.raises(strata.ConfigError, match=r"Config.backend .*available: cpu, metal-emu, metal"):
        strata.Config(backend="cuda")
    with pytest.warns(strata.ConfigWarning, match="STRATA_BACKEND"):
        assert strata.Config.from_env({"STRATA_BACKEND": "gpu"}).backend == "cpu"
    path = models["random"].path
    with pytest.raises(strata.ConfigError, match="expected cpu, metal-emu or metal"):
        _strata.Engine(path, backend="vulkan")
    if not _strata.metal_device_available():
        with pytest.raises(strata.ConfigError, match="needs macOS"):
            strata.Config(backend="metal")
        with pytest.warns(strata.ConfigWarning, match="needs macOS"):
            assert strata.Config.from_env({"STRATA_BACKEND": "metal"}).backend == "cpu"
        with pytest.raises(strata.ConfigError, match="needs macOS"):
            _strata.Engine(path, backend="metal")
    with pytest.raises(strata.ConfigError, match="expert_mode"):
        models["random"].session(EMU.replace(expert_mode="stream"))


# --------------------------------------------------------------------------------------------- session
@pytest.mark.parametrize("name", ["agree", "random"])
def test_session_greedy_equals_cpu_plain_and_speculative(models: dict[str, strata.Model], name: str) -> None:
    m = models[name]
    cpu, cpu_text = run(m, CPU.replace(speculative=False))
    plain, plain_text = run(m, EMU.replace(speculative=False))
    spec, spec_text = run(m, EMU.replace(speculative=True, draft_steps=3))
    cpu_spec, _ = run(m, CPU.replace(speculative=True, draft_steps=3))
    assert plain.tokens == cpu.tokens and plain_text == cpu_text
    assert spec.tokens == cpu.tokens and spec_text == cpu_text
    assert spec.speculative and spec.stats.rounds > 0
    # The drafter on the Metal kernels drafts what the CPU's drafter drafts: the same rounds, the same
    # drafts kept and accepted.
    assert (spec.stats.rounds, spec.stats.drafted, spec.stats.accepted) == (
        cpu_spec.stats.rounds, cpu_spec.stats.drafted, cpu_spec.stats.accepted)
    if name == "agree":  # the drafter is right most of the time: windows keep drafts on metal-emu too
        assert spec.stats.tokens_per_round > 2.0
    # A second call continues the session (prefix cells reused, drafter cells kept or re-encoded).
    more = "".join(spec.generate(" again", max_tokens=6))
    more_cpu = "".join(cpu.generate(" again", max_tokens=6))
    assert more == more_cpu and spec.tokens == cpu.tokens


def test_qwen3moe_session_equals_cpu(models: dict[str, strata.Model]) -> None:
    m = models["qwen3moe"]
    assert m.arch == "qwen3moe" and not m.has_mtp
    cpu, cpu_text = run(m, CPU, max_tokens=16)
    emu, emu_text = run(m, EMU, max_tokens=16)
    assert emu.tokens == cpu.tokens and emu_text == cpu_text
    assert not emu.speculative


# ------------------------------------------------------------------------------------------ the engine
def test_metal_engine_has_the_session_interface(models: dict[str, strata.Model]) -> None:
    path = models["random"].path
    cpu = engine(path, n_threads=1, max_ctx=64, mtp_sink=2, mtp_window=6)
    emu = engine(path, backend="metal-emu", max_ctx=64, max_rows=8, mtp_sink=2, mtp_window=6)
    assert (emu.max_ctx, emu.n_past, emu.has_mtp, emu.backend) == (64, 0, True, "metal-emu")
    prompt = [1, 7, 42, 99, 5, 250, 17, 3, 8, 64]
    lc = cpu.eval(prompt, start_pos=0, logits="all")
    le = emu.eval(prompt, start_pos=0, logits="all")
    assert le.shape == lc.shape == (10, VOCAB)
    np.testing.assert_allclose(le, lc, atol=1e-4)
    assert emu.eval([4], logits="none") is None and emu.n_past == 11
    cp = emu.checkpoint()
    last = emu.eval([6, 9], logits="last")
    emu.rollback(11)
    assert emu.mtp_cell_valid(9) and not emu.mtp_cell_valid(11)
    emu.restore(cp)
    np.testing.assert_array_equal(emu.eval([6, 9], logits="last"), last)
    assert emu.final_streams(-1).shape == (4, TINY["d"])
    with pytest.raises(strata.InvalidArgument, match="not held"):
        emu.final_streams(2)
    logits, ids = emu.mtp_draft(11, n_steps=2)
    assert logits.shape == (2, VOCAB) and ids.shape == (2,)
    stats = emu.expert_stats()
    assert set(stats) == set(cpu.expert_stats()) and set(stats["total"]) == set(cpu.expert_stats()["total"])
    assert emu.expert_totals() == stats["total"]
    assert stats["total"]["misses"] == 0
    # The shared C++ draft loop (Engine.spec_round) runs on the Metal model too.
    rng = decode.Rng(3)
    toks, drafted, verified, accepted, probs = emu.spec_round(
        11, [], max_drafts=3, policy=strata.SamplingPolicy().native(), rng=rng)
    assert 1 <= len(toks) <= 4 and drafted == 3 and len(probs) == 3 and 0 <= accepted <= verified
    assert emu.n_past == 13 + len(toks)
    assert emu.draft_stats()["rows_checked"] >= 5  # every draft row's reads checked by the ledger
    with pytest.raises(strata.InvalidArgument):
        emu.eval([VOCAB])
