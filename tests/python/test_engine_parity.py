"""The C++ engine (strata._strata.Engine) against the PyTorch ReferenceRunner on random tiny `strata`
models (every feature on, then each off in turn), and against transformers on a tiny Qwen3-MoE.

What must hold: logits and final streams within float32 tolerance of the reference; greedy
continuation identical; prefill in one chunk, in many chunks and token by token bitwise equal;
rollback then recompute bitwise equal; MTP draft logits within tolerance of the reference's chain.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from engine_args import F32_CELLS, engine
from strata import _strata
from strata.convert import convert_qwen3moe, make_random_strata
from strata_train import ReferenceRunner, StrataConfig

FEATURES_OFF = [(), ("hc",), ("gate",), ("window",), ("indexer",), ("shared_expert",), ("mtp",), ("sink",)]
PROMPT_LEN = 24  # beyond sinks + window + top-T, so the indexer really picks


def _prompt(cfg: StrataConfig, n: int = PROMPT_LEN, seed: int = 0) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(0, cfg.vocab_size, n)]


def _engine(path: Path, cfg: StrataConfig, **kw: object) -> _strata.Engine:
    # The MTP attends with the model's own sink/window, as the reference runner does by default: the
    # reference's window W is (p - W, p], a draft row's STRATA_METAL_MTP_WIN = W reads [p - W, p] (W + 1
    # cells), so the engine gets W - 1; a full-causal reference gets a window past the context.
    window = cfg.sliding_window - 1 if cfg.sliding_window > 0 else 2051
    return engine(path, n_threads=2, max_ctx=128, mtp_sink=cfg.sink_count, mtp_window=window, **kw)


def _rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, ...], tuple[StrataConfig, Path]]:
    out = {}
    root = tmp_path_factory.mktemp("engine-models")
    for i, off in enumerate(FEATURES_OFF):
        cfg = StrataConfig.tiny().without(*off)
        out[off] = (cfg, make_random_strata(cfg, seed=10 + i, path=root / f"m{i}.gguf"))
    return out


@pytest.mark.parametrize("off", FEATURES_OFF, ids=lambda o: "-".join(o) or "all_on")
def test_logits_and_streams_match_reference(models: dict, off: tuple[str, ...]) -> None:
    cfg, path = models[off]
    eng = _engine(path, cfg)
    ref = ReferenceRunner.from_gguf(path, capacity=128)
    prompt = _prompt(cfg)
    got = eng.eval(prompt, logits="all")
    want = ref.prefill(prompt)
    assert got.shape == (len(prompt), cfg.vocab_size)
    assert _rel_diff(got, want.logits.numpy()) <= 1e-4
    for p in (0, len(prompt) // 2, len(prompt) - 1):
        assert _rel_diff(eng.final_streams(p), want.streams[p].numpy()) <= 1e-4
    # A few decode rows after the prompt.
    for t in _prompt(cfg, 3, seed=1):
        got_row = eng.eval([t])
        want_row = ref.step(t).logits[-1].numpy()
        assert _rel_diff(got_row, want_row) <= 1e-4


def test_hparams_and_errors(models: dict) -> None:
    cfg, path = models[()]
    eng = _engine(path, cfg)
    assert eng.arch == "strata"
    hp = eng.hparams
    assert hp["embedding_length"] == cfg.d and hp["hyper_connection_count"] == cfg.hc_count
    assert hp["indexer_top_k"] == cfg.indexer_top_k and hp["kv_type"] == "int8"
    assert eng.vocab_size == cfg.vocab_size and eng.has_mtp
    with pytest.raises(_strata.InvalidArgument):
        eng.eval([cfg.vocab_size])
    with pytest.raises(_strata.InvalidArgument):
        eng.eval([1, 2], start_pos=5)  # beyond n_past
    with pytest.raises(_strata.InvalidArgument):
        eng.eval([1], logits="some")
    with pytest.raises(_strata.IOFailure):
        _strata.Engine(str(path) + ".missing")


def test_greedy_continuation_identical(models: dict) -> None:
    cfg, path = models[()]
    eng = _engine(path, cfg)
    ref = ReferenceRunner.from_gguf(path, capacity=128)
    prompt = _prompt(cfg, 8)
    lg = eng.eval(prompt)
    rl = ref.prefill(prompt).logits[-1]
    ours, theirs = [], []
    for _ in range(64):
        t, u = int(np.argmax(lg)), int(torch.argmax(rl))
        ours.append(t)
        theirs.append(u)
        lg = eng.eval([t])
        rl = ref.step(u).logits[-1]
    assert ours == theirs


def test_prefill_chunking_and_rollback_are_bitwise(models: dict) -> None:
    cfg, path = models[()]
    prompt = _prompt(cfg, 40, seed=3)
    one = _engine(path, cfg).eval(prompt, logits="all")
    many = _engine(path, cfg, max_rows=7).eval(prompt, logits="all")
    eng = _engine(path, cfg)
    by_token = np.stack([eng.eval([t]) for t in prompt])
    assert np.array_equal(one, many)
    assert np.array_equal(one, by_token)
    # Rollback then recompute.
    eng.rollback(25)
    again = eng.eval(prompt[25:], logits="all")
    assert np.array_equal(again, one[25:])
    cp = eng.checkpoint()
    eng.eval([1, 2, 3])
    eng.restore(cp)
    assert eng.n_past == 40
    assert np.array_equal(eng.eval([prompt[0]]), _engine(path, cfg).eval(prompt + [prompt[0]]))


@pytest.mark.parametrize("off", [(), ("hc",), ("window",)], ids=lambda o: "-".join(o) or "all_on")
def test_mtp_draft_matches_reference_chain(models: dict, off: tuple[str, ...]) -> None:
    cfg, path = models[off]
    eng = _engine(path, cfg)
    ref = ReferenceRunner.from_gguf(path, capacity=128)
    prompt = _prompt(cfg, 20, seed=4)
    lg = eng.eval(prompt)
    out = ref.prefill(prompt)
    t = int(np.argmax(lg))
    assert t == int(torch.argmax(out.logits[-1]))
    logits, ids = eng.mtp_draft(t, n_steps=3)
    chain = ref.mtp_chain(out.streams[-1], t, pos=len(prompt) - 1, steps=3)
    assert logits.shape == (3, cfg.mtp_vocab_size)
    assert [int(i) for i in ids] == [c.token for c in chain]
    for j, step in enumerate(chain):
        assert _rel_diff(logits[j], step.logits.numpy()) <= 1e-4
    assert set(int(i) for i in ids) <= set(int(v) for v in eng.mtp_vocab_ids)


def test_mtp_head_in_q4_0_changes_only_the_heads_rounding(models: dict) -> None:
    # The default (mtp_draft_q4): the restricted head, a gathered copy of F32 output rows here, requantized
    # to Q4_0. The logits move by Q4_0's rounding of the head and no more; every draft step still runs.
    cfg, path = models[()]
    exact, q4 = _engine(path, cfg), _engine(path, cfg, mtp_draft_q4=True)
    prompt = _prompt(cfg, 20, seed=4)
    t = int(np.argmax(exact.eval(prompt)))
    q4.eval(prompt)
    a, ids_a = exact.mtp_draft(t, n_steps=1)
    b, ids_b = q4.mtp_draft(t, n_steps=1)
    diff = _rel_diff(b[0], a[0])
    assert 1e-4 < diff <= 0.15, diff
    assert float(np.corrcoef(a[0], b[0])[0, 1]) > 0.98
    assert set(int(i) for i in ids_b) <= set(int(v) for v in q4.mtp_vocab_ids)


def test_quantized_weights_match_dequantized_reference(tmp_path: Path) -> None:
    cfg = StrataConfig.tiny(d=64, expert_ffn=64, shared_ffn=64)
    for wt in ("F16", "BF16", "Q8_0", "Q5_0", "Q5_1", "Q4_0"):
        path = make_random_strata(cfg, seed=2, path=tmp_path / f"{wt}.gguf", weight_type=wt)
        eng = _engine(path, cfg)
        ref = ReferenceRunner.from_gguf(path, capacity=128)
        prompt = _prompt(cfg, 12, seed=5)
        got = eng.eval(prompt, logits="all")
        want = ref.prefill(prompt).logits.numpy()
        if wt in ("F16", "BF16"):
            assert _rel_diff(got, want) <= 1e-4, wt
        else:
            # The block-format kernels quantize the activations to q8 blocks, as ggml does (measured:
            # about 1.2e-2 here), so the bound is looser than for float weights.
            assert _rel_diff(got, want) <= 3e-2, wt
            assert np.mean(np.argmax(got, -1) == np.argmax(want, -1)) >= 0.75, wt


def test_qwen3moe_matches_transformers(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    hf_cfg = transformers.Qwen3MoeConfig(
        vocab_size=300, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=8, num_experts_per_tok=2,
        norm_topk_prob=True, max_position_embeddings=512, rms_norm_eps=1e-6,
    )
    torch.manual_seed(0)
    model = transformers.Qwen3MoeForCausalLM(hf_cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) * p.shape[-1] ** -0.5)
    model.save_pretrained(tmp_path / "hf")
    path = convert_qwen3moe(tmp_path / "hf", tmp_path / "q.gguf")
    eng = _strata.Engine(str(path), n_threads=2, max_ctx=64, settings=F32_CELLS)
    assert eng.arch == "qwen3moe" and not eng.has_mtp
    assert eng.hparams["kv_type"] == "f32"
    ids = [int(t) for t in np.random.default_rng(1).integers(0, 300, 20)]
    got = eng.eval(ids, logits="all")
    with torch.no_grad():
        want = model(torch.tensor([ids])).logits[0].float().numpy()
    assert _rel_diff(got, want) <= 1e-4
    # The default cells (fp16 on x86-64) round K and V to 11 significant bits: within 1e-2 of the
    # logits' scale, and further from transformers than f32 cells where they are fp16.
    default = _strata.Engine(str(path), n_threads=2, max_ctx=64)
    kv = default.hparams["kv_type"]
    assert kv == ("f16" if "avx2" in _strata.supported_isas() else "f32")
    got16 = default.eval(ids, logits="all")
    assert _rel_diff(got16, want) <= 1e-2
    if kv == "f16":
        assert _rel_diff(got16, want) > _rel_diff(got, want)
