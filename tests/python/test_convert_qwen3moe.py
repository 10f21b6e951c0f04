"""Hugging Face Qwen3-MoE -> `qwen3moe` GGUF: names, transpositions, keys, and the logits of the
converted file (through the reference, features off) against transformers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, GGUFReader

import strata
from strata.cli.__main__ import main as cli_main
from strata.convert import convert_qwen3moe
from strata_train import ReferenceRunner

pytestmark = pytest.mark.usefixtures("one_torch_thread")


transformers = pytest.importorskip("transformers")

E, F, D, LAYERS = 8, 32, 64, 2


def _hf_model(seed: int = 0, **changes: object) -> object:
    cfg = transformers.Qwen3MoeConfig(
        vocab_size=300, hidden_size=D, intermediate_size=96, moe_intermediate_size=F,
        num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        num_experts=E, num_experts_per_tok=2,
        norm_topk_prob=True, max_position_embeddings=512, rms_norm_eps=1e-6, **changes,
    )
    torch.manual_seed(seed)
    model = transformers.Qwen3MoeForCausalLM(cfg).eval()
    with torch.no_grad():  # O(1) activations so that a mistake shows in the logits
        for p in model.parameters():
            if p.dim() == 1:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) * p.shape[-1] ** -0.5)
    return model


def _read(path: Path) -> tuple[dict[str, object], dict[str, object]]:
    reader = GGUFReader(str(path))
    fields = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    return fields, {t.name: t for t in reader.tensors}


def _array(t: object) -> np.ndarray:
    return np.asarray(t.data).reshape(tuple(int(x) for x in reversed(t.shape.tolist())))  # type: ignore[attr-defined]


def test_tensors_equal_the_hf_weights(tmp_path: Path) -> None:
    model = _hf_model()
    model.save_pretrained(tmp_path / "hf")  # on disk: per-expert tensors
    out = convert_qwen3moe(tmp_path / "hf", tmp_path / "q.gguf")
    fields, tensors = _read(out)
    assert fields["general.architecture"] == "qwen3moe"
    expect_keys = {
        "qwen3moe.context_length": 512, "qwen3moe.embedding_length": D, "qwen3moe.block_count": LAYERS,
        "qwen3moe.feed_forward_length": 96, "qwen3moe.attention.head_count": 4,
        "qwen3moe.attention.head_count_kv": 2, "qwen3moe.attention.key_length": 16,
        "qwen3moe.attention.value_length": 16, "qwen3moe.expert_count": E, "qwen3moe.expert_used_count": 2,
        "qwen3moe.expert_feed_forward_length": F, "qwen3moe.rope.freq_base": 10000.0,
    }
    for key, value in expect_keys.items():
        assert fields[key] == pytest.approx(value), key
    assert fields["qwen3moe.attention.layer_norm_rms_epsilon"] == pytest.approx(1e-6)

    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    want = {"token_embd.weight": sd["model.embed_tokens.weight"],
            "output_norm.weight": sd["model.norm.weight"], "output.weight": sd["lm_head.weight"]}
    for i in range(LAYERS):
        p = f"model.layers.{i}"
        gate_up = sd[f"{p}.mlp.experts.gate_up_proj"]  # [E, 2F, D], gate rows first
        want.update({
            f"blk.{i}.attn_norm.weight": sd[f"{p}.input_layernorm.weight"],
            f"blk.{i}.attn_q.weight": sd[f"{p}.self_attn.q_proj.weight"],
            f"blk.{i}.attn_k.weight": sd[f"{p}.self_attn.k_proj.weight"],
            f"blk.{i}.attn_v.weight": sd[f"{p}.self_attn.v_proj.weight"],
            f"blk.{i}.attn_output.weight": sd[f"{p}.self_attn.o_proj.weight"],
            f"blk.{i}.attn_q_norm.weight": sd[f"{p}.self_attn.q_norm.weight"],
            f"blk.{i}.attn_k_norm.weight": sd[f"{p}.self_attn.k_norm.weight"],
            f"blk.{i}.ffn_norm.weight": sd[f"{p}.post_attention_layernorm.weight"],
            f"blk.{i}.ffn_gate_inp.weight": sd[f"{p}.mlp.gate.weight"],
            f"blk.{i}.ffn_gate_exps.weight": gate_up[:, :F],
            f"blk.{i}.ffn_up_exps.weight": gate_up[:, F:],
            f"blk.{i}.ffn_down_exps.weight": sd[f"{p}.mlp.experts.down_proj"],
        })
    assert set(tensors) == set(want)
    for name, value in want.items():
        assert tensors[name].tensor_type == GGMLQuantizationType.F32
        np.testing.assert_array_equal(_array(tensors[name]), value, err_msg=name)
    # GGUF stores ne reversed: the innermost dimension is the input width d
    assert tensors["blk.0.ffn_down_exps.weight"].shape.tolist() == [F, D, E]
    assert tensors["blk.0.ffn_gate_exps.weight"].shape.tolist() == [D, F, E]

    # the in-memory module (fused expert tensors) converts to the same file contents
    _, again = _read(convert_qwen3moe(model, tmp_path / "m.gguf"))
    for name in want:
        np.testing.assert_array_equal(_array(again[name]), _array(tensors[name]), err_msg=name)


def test_converted_file_gives_the_hf_logits(tmp_path: Path) -> None:
    model = _hf_model(seed=1)
    out = convert_qwen3moe(model, tmp_path / "q.gguf")
    tokens = [3, 141, 59, 26, 53, 58, 97, 93, 238, 46, 26, 43, 38, 32, 79, 50, 28, 8, 41, 97]
    with torch.no_grad():
        hf_logits = model(torch.tensor([tokens])).logits[0]
    run = ReferenceRunner.from_gguf(out)
    assert not run.kv_int8 and run.cfg.hc_count == 1 and run.cfg.sliding_window == 0
    torch.testing.assert_close(run.prefill(tokens).logits, hf_logits, rtol=0, atol=1e-4)


def test_bf16_checkpoint_and_quantized_output(tmp_path: Path) -> None:
    model = _hf_model(seed=2).to(torch.bfloat16)
    model.save_pretrained(tmp_path / "hf")
    out = tmp_path / "q8.gguf"
    args = ["convert", str(tmp_path / "hf"), str(out), "--type", "Q8_0", "--tokenizer", "bytes"]
    assert cli_main(args) == 0
    fields, tensors = _read(out)
    assert tensors["blk.0.attn_q.weight"].tensor_type == GGMLQuantizationType.Q8_0
    assert tensors["blk.0.ffn_gate_inp.weight"].tensor_type == GGMLQuantizationType.F32
    assert tensors["blk.1.attn_norm.weight"].tensor_type == GGMLQuantizationType.F32
    norm = model.state_dict()["model.layers.1.input_layernorm.weight"].float().numpy()
    np.testing.assert_array_equal(_array(tensors["blk.1.attn_norm.weight"]), norm)  # bf16 read exactly
    assert fields["tokenizer.ggml.model"] == "gpt2"


def test_unsupported_configs_are_refused(tmp_path: Path) -> None:
    model = _hf_model()
    model.save_pretrained(tmp_path / "hf")
    cfg_path = tmp_path / "hf" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    refused = (({"mlp_only_layers": [1]}, "mlp_only_layers"), ({"norm_topk_prob": False}, "norm_topk"),
               ({"decoder_sparse_step": 2}, "decoder_sparse_step"))
    for change, match in refused:
        cfg_path.write_text(json.dumps({**cfg, **change}))
        with pytest.raises(strata.ConfigError, match=match):
            convert_qwen3moe(tmp_path / "hf", tmp_path / "x.gguf")
    with pytest.raises(strata.FormatError, match="config.json"):
        convert_qwen3moe(tmp_path, tmp_path / "x.gguf")
