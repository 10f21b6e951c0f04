"""``strata convert HF_DIR OUT.gguf`` on tiny Hugging Face directories made with transformers
(Qwen3-MoE and GLM-4-MoE): the directory's tokenizer (token ids equal to the HF tokenizer's), chat
template and BOS/EOS from tokenizer_config.json / generation_config.json, sharded and BF16/F16
safetensors, --outtype, the progress bar, and the converted file's logits (C++ engine) against
transformers'. An opt-in llama.cpp check (``-m llama``) loads the file in llama-cpp-python.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gguf import MODEL_ARCH, GGMLQuantizationType, GGUFReader, get_tensor_name_map
from gguf.quants import dequantize

import strata
from engine_args import F32_CELLS
from strata import _strata
from strata.cli.__main__ import main as cli_main
from strata.convert import convert_hf_dir
from strata_train.tokenizer_train import train_bytelevel_bpe

transformers = pytest.importorskip("transformers")
from test_glm4moe import hf_glm  # noqa: E402  (the same tiny GLM model)

V = 300
TEMPLATE = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
TEXTS = ["def add(a, b):\n    return a + b\n", "The quick brown fox jumps over the lazy dog. " * 3,
         "for i in range(10):\n    print(i * i)\n", "naïve café — ünïcödé ✓ 数字 123 4567"] * 20
PROMPTS = ["def add(x, y):\n    return x + y", "The lazy fox — café 42!", "<|im_start|>user\nhi<|im_end|>"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _qwen(seed: int) -> Any:
    cfg = transformers.Qwen3MoeConfig(
        vocab_size=V, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=8, num_experts_per_tok=2,
        norm_topk_prob=True, max_position_embeddings=512, rms_norm_eps=1e-6)
    torch.manual_seed(seed)
    model = transformers.Qwen3MoeForCausalLM(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            scale = p.shape[-1] ** -0.5
            p.copy_(1.0 + 0.1 * torch.randn_like(p) if p.dim() == 1 else torch.randn_like(p) * scale)
    return model


def _save_dir(model: Any, where: Path, dtype: torch.dtype = torch.float32, shard: str | None = None) -> Path:
    """The model and a trained byte-level BPE tokenizer, laid out as a Hugging Face hub directory."""
    kw = {"max_shard_size": shard} if shard else {}
    model.to(dtype).save_pretrained(where, **kw)
    model.to(torch.float32)
    tok = train_bytelevel_bpe(TEXTS, vocab_size=290, min_frequency=1)
    tok.save(str(where / "tokenizer.json"))
    (where / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "chat_template": TEMPLATE,
        "add_bos_token": False}))
    (where / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 0], "bos_token_id": 0}))
    return where


def _hf_logits(model: Any, tokens: list[int]) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([tokens])).logits[0].float().numpy()


def _rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


MODELS = {"qwen3moe": _qwen, "glm4moe": lambda seed: hf_glm(seed=seed)}


@pytest.mark.parametrize("arch", list(MODELS))
def test_convert_dir_tokenizer_and_logits(tmp_path: Path, arch: str) -> None:
    model = MODELS[arch](3)
    src = _save_dir(model, tmp_path / "hf", shard="60KB")  # sharded: several safetensors + an index
    assert len(list(src.glob("*.safetensors"))) > 1
    out = tmp_path / "m.gguf"
    assert cli_main(["convert", str(src), str(out), "--outtype", "f32"]) == 0
    calls: list[tuple[int, int, str]] = []  # what drives the CLI's progress bar
    convert_hf_dir(src, tmp_path / "again.gguf", weight_type="F32", progress=lambda *a: calls.append(a))
    assert [c[0] for c in calls] == list(range(1, len(calls) + 1)) and calls[-1][1] == len(calls)
    assert calls[-1][2].startswith("output")

    m = strata.Model(out)
    assert m.arch == arch
    hf_tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(src / "tokenizer.json"))
    for text in PROMPTS:
        want = hf_tok.encode(text, add_special_tokens=False)
        assert m.tokenizer.encode(text, add_special=False) == want, text
    meta = m.metadata
    assert meta["tokenizer.chat_template"] == TEMPLATE
    assert meta["tokenizer.ggml.eos_token_id"] == 2  # tokenizer_config's eos_token wins
    assert meta["tokenizer.ggml.bos_token_id"] == 0  # generation_config fills the missing bos
    assert meta["tokenizer.ggml.padding_token_id"] == 0
    assert len(meta["tokenizer.ggml.tokens"]) == V  # padded to the embedding rows

    tokens = m.tokenizer.encode(PROMPTS[0], add_special=False)
    got = _strata.Engine(str(out), n_threads=1, max_ctx=64, settings=F32_CELLS).eval(tokens, logits="all")
    assert _rel_diff(got, _hf_logits(model, tokens)) <= 1e-4


@pytest.mark.parametrize("arch", list(MODELS))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_checkpoints_read_exactly(tmp_path: Path, arch: str, dtype: torch.dtype) -> None:
    model = MODELS[arch](4)
    src = _save_dir(model, tmp_path / "hf", dtype=dtype)
    out = tmp_path / "m.gguf"
    assert cli_main(["convert", str(src), str(out), "--outtype", "f32", "--no-progress"]) == 0
    rounded = model.to(dtype).to(torch.float32)  # what the checkpoint holds
    tensors = {t.name: t for t in GGUFReader(str(out)).tensors}
    norm = tensors["blk.1.attn_norm.weight"]
    np.testing.assert_array_equal(np.asarray(norm.data),
                                  rounded.state_dict()["model.layers.1.input_layernorm.weight"].numpy())
    tokens = [5, 77, 123, 9, 250, 31]
    got = _strata.Engine(str(out), n_threads=1, max_ctx=64, settings=F32_CELLS).eval(tokens, logits="all")
    # float32 arithmetic on both sides; half-precision-rounded weights are less benign to the
    # summation-order differences than random float32 ones (measured up to 1.8e-4)
    assert _rel_diff(got, _hf_logits(rounded, tokens)) <= 3e-4


def _with_file_weights(model: Any, path: Path) -> Any:
    """The transformers GLM model with every weight replaced by the file's, dequantized
    (gguf.quants): the reference for a quantized file is the model it actually stores."""
    tensors = {t.name: t for t in GGUFReader(str(path)).tensors}
    names = get_tensor_name_map(MODEL_ARCH.GLM4_MOE, model.config.num_hidden_layers)

    def deq(name: str) -> torch.Tensor:
        t = tensors[name]
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))
        return torch.from_numpy(np.ascontiguousarray(dequantize(t.data, t.tensor_type).reshape(shape)))

    state = {}
    for key in model.state_dict():
        if key.endswith("mlp.experts.gate_up_proj"):
            b = "blk." + key.split(".")[2]
            state[key] = torch.cat([deq(f"{b}.ffn_gate_exps.weight"), deq(f"{b}.ffn_up_exps.weight")], dim=1)
        elif key.endswith("mlp.experts.down_proj"):
            state[key] = deq("blk." + key.split(".")[2] + ".ffn_down_exps.weight")
        elif key.endswith("e_score_correction_bias"):
            state[key] = deq("blk." + key.split(".")[2] + ".exp_probs_b.bias")
        else:
            state[key] = deq(names.get_name(key, try_suffixes=(".weight", ".bias")))
    ref = hf_glm(seed=0)
    ref.load_state_dict(state)
    return ref


@pytest.mark.parametrize("outtype,qtype,tol", [("f16", GGMLQuantizationType.F16, 1e-4),
                                               ("bf16", GGMLQuantizationType.BF16, 1e-4),
                                               ("q8_0", GGMLQuantizationType.Q8_0, 0.05),
                                               ("q4_0", GGMLQuantizationType.Q4_0, 0.05)])
def test_outtypes(tmp_path: Path, outtype: str, qtype: GGMLQuantizationType, tol: float) -> None:
    model = hf_glm(seed=6)
    src = _save_dir(model, tmp_path / "hf")
    out = tmp_path / "m.gguf"
    assert cli_main(["convert", str(src), str(out), "--outtype", outtype, "--no-progress"]) == 0
    tensors = {t.name: t for t in GGUFReader(str(out)).tensors}
    assert tensors["blk.1.ffn_up_exps.weight"].tensor_type == qtype
    assert tensors["blk.1.attn_q.weight"].tensor_type == qtype
    for f32 in ("blk.1.ffn_gate_inp.weight", "blk.1.exp_probs_b.bias", "blk.1.attn_q.bias",
                "output_norm.weight"):
        assert tensors[f32].tensor_type == GGMLQuantizationType.F32, f32
    tokens = [5, 77, 123, 9, 250, 31]
    got = _strata.Engine(str(out), n_threads=1, max_ctx=64, settings=F32_CELLS).eval(tokens, logits="all")
    # Against transformers running the weights the file stores. F16/BF16 weights meet f32
    # activations (exact products); Q8_0/Q4_0 weights meet activations rounded to Q8 blocks (as in
    # llama.cpp), an error of its own (measured 0.023 and 0.025 here).
    assert _rel_diff(got, _hf_logits(_with_file_weights(model, out), tokens)) <= tol


def test_bad_directories_give_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def fails(src: Path, match: str) -> None:
        assert cli_main(["convert", str(src), str(tmp_path / "x.gguf"), "--no-progress"]) == 1
        err = capsys.readouterr().err
        assert match in err and "Traceback" not in err, err

    (tmp_path / "empty").mkdir()
    fails(tmp_path / "empty", "no config.json")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    fails(tmp_path / "other", "cannot be converted")
    src = _save_dir(_qwen(1), tmp_path / "hf")
    (src / "tokenizer_config.json").write_text("{not json")
    fails(src, "tokenizer_config.json")
    with pytest.raises(strata.FormatError, match="no config.json"):
        convert_hf_dir(tmp_path / "empty", tmp_path / "x.gguf")


@pytest.mark.llama
def test_llama_cpp_loads_the_converted_glm(tmp_path: Path) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    model = hf_glm(seed=8)
    src = _save_dir(model, tmp_path / "hf")
    out = tmp_path / "m.gguf"
    assert cli_main(["convert", str(src), str(out), "--outtype", "f32", "--no-progress"]) == 0
    llm = llama_cpp.Llama(model_path=str(out), n_ctx=64, logits_all=True, verbose=False, n_threads=1)
    tokens = [5, 77, 123, 9, 250, 31]
    llm.eval(tokens)
    got = np.array(llm.scores[: len(tokens)], dtype=np.float32)
    assert _rel_diff(got, _hf_logits(model, tokens)) <= 1e-3  # F16 K/V in llama.cpp (measured 6.2e-4)
    ours = _strata.Engine(str(out), n_threads=1, max_ctx=64, settings=F32_CELLS).eval(tokens, logits="all")
    assert _rel_diff(ours, got) <= 1e-3  # strata against llama.cpp on the same file
    hf_tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(src / "tokenizer.json"))
    for text in PROMPTS[:2]:
        want = hf_tok.encode(text, add_special_tokens=False)
        assert llm.tokenize(text.encode(), add_bos=False, special=False) == want, text
