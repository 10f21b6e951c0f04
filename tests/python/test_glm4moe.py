"""`glm4moe` (GLM-4.5 / 4.6 / Air as llama.cpp writes it): a tiny random transformers
``Glm4MoeForCausalLM`` converted to GGUF and run by the C++ engine, logits against transformers'.

Covered: partial NEOX RoPE (half the head), q/k/v biases, optional q/k norms, a leading dense layer,
sigmoid routing with a nonzero e_score_correction_bias (selection only), norm_topk_prob and
routed_scaling_factor, the ungated shared expert; the GGUF keys and tensor names (from the gguf
package's constants); expert streaming and MOCE on the selection scores; refusals.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gguf import MODEL_ARCH, MODEL_TENSORS, TENSOR_NAMES, GGUFReader, Keys

import strata
from engine_args import engine
from strata import _strata
from strata.convert import convert_glm4moe

transformers = pytest.importorskip("transformers")

E, F, D, LAYERS, V = 8, 32, 64, 3, 300
TOKENS = [3, 141, 59, 26, 53, 58, 97, 93, 238, 46, 26, 43, 38, 32, 79, 50, 28, 8, 41, 97]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def hf_glm(seed: int = 0, **changes: Any) -> Any:
    """A tiny GLM-4-MoE with O(1) activations and a nonzero score-correction bias."""
    kw: dict[str, Any] = dict(
        vocab_size=V, hidden_size=D, intermediate_size=96, moe_intermediate_size=F, num_hidden_layers=LAYERS,
        first_k_dense_replace=1, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        partial_rotary_factor=0.5, n_routed_experts=E, n_shared_experts=1, num_experts_per_tok=2,
        routed_scaling_factor=2.5, norm_topk_prob=True, attention_bias=True, use_qk_norm=True,
        max_position_embeddings=512, rms_norm_eps=1e-5, n_group=1, topk_group=1, tie_word_embeddings=False,
    )
    kw.update(changes)
    torch.manual_seed(seed)
    model = transformers.Glm4MoeForCausalLM(transformers.Glm4MoeConfig(**kw)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.numel() == 0:  # n_shared_experts = 0 leaves an empty shared MLP
                continue
            if p.dim() == 1:
                p.copy_((0.0 if name.endswith("bias") else 1.0) + 0.1 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) * p.shape[-1] ** -0.5)
        for layer in model.model.layers[1:]:  # selection bias large enough to change the choice
            layer.mlp.gate.e_score_correction_bias.copy_(0.3 * torch.randn(E))
    return model


def _engine(path: Path, **kw: Any) -> Any:
    kw.setdefault("kv_type", "f32")  # logits equal to transformers' to float rounding
    return engine(path, n_threads=1, max_ctx=64, **kw)


def _rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


def _hf_logits(model: Any, tokens: list[int]) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([tokens])).logits[0].numpy()


VARIANTS = {
    "bias_qknorm": {},
    "no_bias_no_qknorm": {"attention_bias": False, "use_qk_norm": False},
    "no_dense_no_shared_unnormed": {"first_k_dense_replace": 0, "n_shared_experts": 0,
                                    "norm_topk_prob": False, "routed_scaling_factor": 1.0},
    "tied_full_rope": {"tie_word_embeddings": True, "partial_rotary_factor": 1.0},
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_engine_logits_equal_transformers(tmp_path: Path, variant: str) -> None:
    model = hf_glm(seed=len(variant), **VARIANTS[variant])
    path = convert_glm4moe(model, tmp_path / "g.gguf")
    want = _hf_logits(model, TOKENS)
    eng = _engine(path)
    got = eng.eval(TOKENS, logits="all")
    assert got.shape == (len(TOKENS), V)
    assert _rel_diff(got, want) <= 1e-4
    # decode rows after a shorter prefill give the same rows
    eng.rollback(0)
    eng.eval(TOKENS[:12], logits="none")
    for i in range(12, len(TOKENS)):
        assert _rel_diff(eng.eval([TOKENS[i]]), want[i]) <= 1e-4


def test_keys_and_tensor_names_are_llama_cpps(tmp_path: Path) -> None:
    model = hf_glm()
    model.save_pretrained(tmp_path / "hf")  # on disk: per-expert tensors, the layout of real checkpoints
    path = convert_glm4moe(tmp_path / "hf", tmp_path / "g.gguf")
    reader = GGUFReader(str(path))
    fields = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    arch = "glm4moe"
    want = {
        Keys.LLM.BLOCK_COUNT: LAYERS, Keys.LLM.LEADING_DENSE_BLOCK_COUNT: 1, Keys.LLM.EXPERT_COUNT: E,
        Keys.LLM.EXPERT_USED_COUNT: 2, Keys.LLM.EXPERT_SHARED_COUNT: 1,
        Keys.LLM.EXPERT_FEED_FORWARD_LENGTH: F,
        Keys.LLM.FEED_FORWARD_LENGTH: 96, Keys.LLM.EXPERT_GATING_FUNC: 2, Keys.LLM.EXPERT_WEIGHTS_SCALE: 2.5,
        Keys.LLM.EXPERT_WEIGHTS_NORM: True, Keys.LLM.NEXTN_PREDICT_LAYERS: 0, Keys.Rope.DIMENSION_COUNT: 8,
        Keys.Attention.HEAD_COUNT_KV: 2, Keys.Attention.KEY_LENGTH: 16,
    }
    assert fields["general.architecture"] == arch
    for key, value in want.items():
        assert fields[key.format(arch=arch)] == pytest.approx(value), key
    allowed = {TENSOR_NAMES[t] for t in MODEL_TENSORS[MODEL_ARCH.GLM4_MOE]}
    for t in reader.tensors:
        stem = t.name.rsplit(".", 1)[0]
        generic = stem if not stem.startswith("blk.") else "blk.{bid}." + stem.split(".", 2)[2]
        assert generic in allowed, t.name
    names = {t.name for t in reader.tensors}
    assert "blk.0.ffn_gate.weight" in names and "blk.0.ffn_gate_inp.weight" not in names
    assert {"blk.1.exp_probs_b.bias", "blk.1.attn_q.bias", "blk.1.post_attention_norm.weight"} <= names
    bias = next(t for t in reader.tensors if t.name == "blk.2.exp_probs_b.bias")
    np.testing.assert_array_equal(np.asarray(bias.data),
                                  model.model.layers[2].mlp.gate.e_score_correction_bias.numpy())
    # the directory (per-expert tensors) runs like the module did
    assert _rel_diff(_engine(path).eval(TOKENS, logits="all"), _hf_logits(model, TOKENS)) <= 1e-4


def test_expert_streaming_and_moce_on_selection_scores(tmp_path: Path) -> None:
    model = hf_glm(seed=5)
    path = convert_glm4moe(model, tmp_path / "g.gguf")
    plain = _engine(path).eval(TOKENS, logits="all")
    stream = _engine(path, expert_mode="stream", expert_cache=0.5, expert_io_threads=2)
    assert np.array_equal(stream.eval(TOKENS, logits="all"), plain)  # streaming changes no bit

    params = _strata.decode.MoceParams(resident_bonus=float(np.exp(2.0)), rank1_scale=1.0, protect=0,
                                       draft=False)
    eng = _engine(path, expert_mode="stream", expert_cache=0.5, expert_io_threads=2, moce=params)
    eng.eval(TOKENS[:8], logits="none")
    eng.set_route_trace(True)
    eng.eval(TOKENS[8:], logits="none")
    trace = eng.route_trace()
    assert len(trace) == LAYERS - 1  # the dense layer has no experts
    reader = GGUFReader(str(path))
    biases = {t.name: np.asarray(t.data, dtype=np.float32) for t in reader.tensors if "exp_probs_b" in t.name}
    moved = 0
    for layer, entry in enumerate(trace, start=1):
        res = entry["resident"]
        assert res is not None and 0 < res.sum() < E
        for r in range(entry["rows"]):
            scores = entry["probs"][r]  # σ(logits): the trace records the unbiased scores
            sel = (scores + biases[f"blk.{layer}.exp_probs_b.bias"]).astype(np.float32)
            sel = sel - np.float32(min(0.0, float(sel.min())))
            want, _ = _strata.decode.route_row(sel, entry["k"], res, params)
            assert np.array_equal(entry["ids"][r], want)
            plain_ids = np.argsort(-sel, kind="stable")[: entry["k"]]
            moved += not np.array_equal(np.sort(plain_ids), np.sort(want))
    assert moved > 0  # the bonus changed some selection: the check above is not vacuous


def test_unsupported_configs_and_broken_files_are_refused(tmp_path: Path) -> None:
    model = hf_glm()
    model.save_pretrained(tmp_path / "hf")
    cfg_path = tmp_path / "hf" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    for change, match in (({"n_group": 4, "topk_group": 2}, "grouped routing"),
                          ({"hidden_act": "gelu"}, "hidden_act"),
                          ({"first_k_dense_replace": LAYERS}, "first_k_dense_replace")):
        cfg_path.write_text(json.dumps({**cfg, **change}))
        with pytest.raises(strata.ConfigError, match=match):
            convert_glm4moe(tmp_path / "hf", tmp_path / "x.gguf")
    cfg_path.write_text(json.dumps({**cfg, "moe_intermediate_size": F + 1}))  # disagrees with the tensors
    with pytest.raises(strata.FormatError, match="the config implies"):
        convert_glm4moe(tmp_path / "hf", tmp_path / "x.gguf")
    cfg_path.write_text(json.dumps(cfg))
    # A file whose MoE layer lost its selection bias: one clear error naming the tensor.
    good = convert_glm4moe(model, tmp_path / "g.gguf")
    reader = GGUFReader(str(good))
    from gguf import GGUFWriter

    bad = tmp_path / "bad.gguf"
    w = GGUFWriter(str(bad), "glm4moe")
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        w.add_key_value(key, field.contents(), field.types[0],
                        sub_type=field.types[-1] if len(field.types) > 1 else None)
    for t in reader.tensors:
        if t.name != "blk.1.exp_probs_b.bias":
            w.add_tensor(t.name, np.asarray(t.data), raw_shape=list(reversed(t.shape.tolist())),
                         raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(strata.FormatError, match="blk.1.exp_probs_b.bias"):
        _engine(bad)


def test_metal_backend_refuses_glm4moe(tmp_path: Path) -> None:
    path = convert_glm4moe(hf_glm(seed=9), tmp_path / "g.gguf")
    with pytest.raises(strata.InvalidArgument, match="glm4moe is not supported"):
        _strata.Engine(str(path), backend="metal-emu")
