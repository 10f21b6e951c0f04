"""`deepseek4` (DeepSeek-V4 as llama.cpp writes it): ``strata convert`` of a tiny random transformers
``DeepseekV4ForCausalLM`` directory, the keys and tensor names llama.cpp's ``src/models/deepseek4.cpp``
loads, refusals of what that architecture cannot express, and (opt-in, ``-m llama``) the reference
chain: llama.cpp (llama-cpp-python 0.3.36) running the converted file against transformers' logits.

strata's engine running these files: test_deepseek4_engine.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, GGUFReader

from strata.cli.__main__ import main as cli_main
from strata.convert import byte_level_tokenizer, convert_hf_dir
from strata.convert.deepseek4 import convert_deepseek4
from strata.errors import ConfigError, FormatError

transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "DeepseekV4ForCausalLM"):
    pytest.skip("transformers without DeepseekV4ForCausalLM (needs >= 5.23)", allow_module_level=True)

V, D, E, K, HEAD, IDX_HEADS, IDX_DIM = 300, 64, 8, 2, 64, 16, 64
SLIDING, CSA, HCA = "sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"
# One of each attention layer type; layer 0 is hash-routed.
SCHEDULE = [SLIDING, CSA, HCA, CSA]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def hf_ds4(seed: int = 0, layer_types: list[str] | None = None, n_hash: int = 1, **changes: Any) -> Any:
    """A tiny DeepSeek-V4 with O(1) activations, a nonzero selection bias and a random hash table.

    16 indexer heads: with the ReLU scorer and only a few heads, many compressed entries score exactly
    0 and the indexer's top-k is a tie that two correct implementations may break differently."""
    types = layer_types or SCHEDULE
    kw: dict[str, Any] = dict(
        vocab_size=V,
        hidden_size=D,
        moe_intermediate_size=32,
        num_hidden_layers=len(types),
        num_attention_heads=4,
        head_dim=HEAD,
        q_lora_rank=48,
        partial_rotary_factor=0.25,
        num_experts_per_tok=K,
        n_routed_experts=E,
        n_shared_experts=1,
        layer_types=types,
        mlp_layer_types=["hash_moe"] * n_hash + ["moe"] * (len(types) - n_hash),
        hc_mult=4,
        sliding_window=16,
        o_groups=2,
        o_lora_rank=24,
        index_n_heads=IDX_HEADS,
        index_head_dim=IDX_DIM,
        index_topk=3,
        max_position_embeddings=1024,
        swiglu_limit=0.8,
        routed_scaling_factor=1.5,
    )
    kw.update(changes)
    torch.manual_seed(seed)
    model = transformers.DeepseekV4ForCausalLM(transformers.DeepseekV4Config(**kw)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                zero_centred = "base" in name or "sinks" in name
                p.copy_((0.0 if zero_centred else 1.0) + 0.1 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) * p.shape[-1] ** -0.5)
        for name, b in model.named_buffers():
            if name.endswith("tid2eid"):
                b.copy_(torch.stack([torch.randperm(E)[:K] for _ in range(V)]))
            elif name.endswith("e_score_correction_bias"):
                b.copy_(0.3 * torch.randn_like(b))
    return model


def _save(model: Any, where: Path) -> Path:
    model.save_pretrained(where)  # DeepSeek's checkpoint names (layers.N.attn.wq_a ...), per-expert w1/w2/w3
    return where


def _hf_logits(model: Any, tokens: list[int]) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([tokens])).logits[0].numpy()


def _rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path, Path]:
    where = tmp_path_factory.mktemp("ds4")
    model = hf_ds4()
    src = _save(model, where / "hf")
    out = convert_deepseek4(src, where / "m.gguf", tokenizer=byte_level_tokenizer(V))
    return model, src, out


def _fields(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    reader = GGUFReader(str(path))
    fields = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    return fields, {t.name: t for t in reader.tensors}


def test_keys_are_the_ones_llama_cpp_reads(converted: tuple[Any, Path, Path]) -> None:
    fields, _ = _fields(converted[2])
    a = "deepseek4"
    assert fields["general.architecture"] == a
    want = {
        "block_count": 4,
        "embedding_length": D,
        "attention.head_count": 4,
        "attention.head_count_kv": 1,
        "attention.key_length": HEAD,
        "attention.value_length": HEAD,
        "rope.dimension_count": 16,
        "rope.freq_base": 10000.0,
        "attention.compress_rope_freq_base": 160000.0,
        "attention.q_lora_rank": 48,
        "attention.sliding_window": 16,
        "attention.output_group_count": 2,
        "attention.output_lora_rank": 24,
        "attention.compress_ratios": [0, 4, 128, 4],
        "attention.indexer.head_count": IDX_HEADS,
        "attention.indexer.key_length": IDX_DIM,
        "attention.indexer.top_k": 3,
        "hyper_connection.count": 4,
        "hyper_connection.sinkhorn_iterations": 20,
        "hyper_connection.epsilon": 1e-6,
        "hash_layer_count": 1,
        "expert_count": E,
        "expert_used_count": K,
        "expert_feed_forward_length": 32,
        "expert_shared_count": 1,
        "expert_weights_scale": 1.5,
        "expert_weights_norm": True,
        "expert_gating_func": 4,
        "nextn_predict_layers": 0,
        "swiglu_clamp_exp": [0.8] * 4,
        "swiglu_clamp_shexp": [0.8] * 4,
    }
    for key, value in want.items():
        assert fields[f"{a}.{key}"] == pytest.approx(value), key


def test_tensor_names_and_layouts(converted: tuple[Any, Path, Path]) -> None:
    model, _, out = converted
    _, tensors = _fields(out)
    per_layer = {
        "attn_norm.weight",
        "attn_sinks.weight",
        "attn_q_a.weight",
        "attn_q_a_norm.weight",
        "attn_q_b.weight",
        "attn_kv.weight",
        "attn_kv_a_norm.weight",
        "attn_output_a.weight",
        "attn_output_b.weight",
        "ffn_norm.weight",
        "ffn_gate_inp.weight",
        "ffn_gate_exps.weight",
        "ffn_up_exps.weight",
        "ffn_down_exps.weight",
        "ffn_gate_shexp.weight",
        "ffn_up_shexp.weight",
        "ffn_down_shexp.weight",
    } | {f"hc_{p}_{w}.weight" for p in ("attn", "ffn") for w in ("fn", "base", "scale")}
    compressor = {f"attn_compressor_{w}.weight" for w in ("kv", "gate", "ape", "norm")}
    indexer = {"indexer.proj.weight", "indexer.attn_q_b.weight"} | {
        f"indexer_compressor_{w}.weight" for w in ("kv", "gate", "ape", "norm")
    }
    want = {
        "token_embd.weight",
        "output.weight",
        "output_norm.weight",
        "output_hc_fn.weight",
        "output_hc_base.weight",
        "output_hc_scale.weight",
    }
    for i, kind in enumerate(SCHEDULE):
        leaves = per_layer | (compressor if kind != SLIDING else set()) | (indexer if kind == CSA else set())
        leaves |= {"ffn_gate_tid2eid.weight"} if i == 0 else {"exp_probs_b.bias"}
        want |= {f"blk.{i}.{leaf}" for leaf in leaves}
    assert set(tensors) == want
    # ggml shapes are numpy's reversed: ape is {coff * head_dim, ratio}, tid2eid {n_used, n_vocab} I32
    assert list(tensors["blk.1.attn_compressor_ape.weight"].shape) == [2 * HEAD, 4]
    assert list(tensors["blk.2.attn_compressor_ape.weight"].shape) == [HEAD, 128]
    hashed = tensors["blk.0.ffn_gate_tid2eid.weight"]
    assert hashed.tensor_type == GGMLQuantizationType.I32 and list(hashed.shape) == [K, V]
    np.testing.assert_array_equal(
        np.asarray(hashed.data).reshape(V, K), model.model.layers[0].mlp.gate.tid2eid.numpy()
    )
    # the routed experts: w1 / w3 / w2 per expert on disk, gate / up / down stacks in the file
    gate_up = model.model.layers[1].mlp.experts.gate_up_proj.detach().numpy()
    np.testing.assert_array_equal(np.asarray(tensors["blk.1.ffn_up_exps.weight"].data), gate_up[:, 32:])
    np.testing.assert_array_equal(
        np.asarray(tensors["blk.3.exp_probs_b.bias"].data),
        model.model.layers[3].mlp.gate.e_score_correction_bias.numpy(),
    )


def test_cli_convert_and_quantised_storage(converted: tuple[Any, Path, Path], tmp_path: Path) -> None:
    _, src, _ = converted
    out = tmp_path / "q.gguf"
    assert (
        cli_main(
            ["convert", str(src), str(out), "--outtype", "q8_0", "--tokenizer", "bytes", "--no-progress"]
        )
        == 0
    )
    _, tensors = _fields(out)
    assert tensors["blk.1.ffn_gate_exps.weight"].tensor_type == GGMLQuantizationType.Q8_0
    assert tensors["blk.1.attn_q_a.weight"].tensor_type == GGMLQuantizationType.Q8_0
    assert (
        tensors["blk.1.attn_q_b.weight"].tensor_type == GGMLQuantizationType.F16
    )  # rows of 48: no Q8_0 block
    for kept in (
        "blk.1.hc_attn_fn.weight",
        "blk.1.attn_compressor_ape.weight",
        "blk.1.ffn_gate_inp.weight",
        "blk.1.attn_sinks.weight",
        "output_hc_fn.weight",
    ):
        assert tensors[kept].tensor_type == GGMLQuantizationType.F32, kept


def _hub_layout(src: Path, where: Path) -> Path:
    """The directory as DeepSeek publishes it: no ``model.`` prefix, ``embed`` / ``hc_head_fn`` /
    ``attn.kv_norm`` names, and the legacy config keys (``compress_ratios``, ``num_hash_layers``,
    ``qk_rope_head_dim``, ``rope_scaling``) that transformers folds into its own at load time."""
    from safetensors.numpy import load_file, save_file

    where.mkdir()
    renames = {
        "embed_tokens.weight": "embed.weight",
        "hc_head.hc_fn": "hc_head_fn",
        "hc_head.hc_base": "hc_head_base",
        "hc_head.hc_scale": "hc_head_scale",
    }
    tensors = {}
    for name, arr in load_file(str(src / "model.safetensors")).items():
        short = name.removeprefix("model.")
        if short.endswith(".attn.norm.weight"):  # DeepSeek's release: attn.kv_norm
            short = short.removesuffix("norm.weight") + "kv_norm.weight"
        tensors[renames.get(short, short)] = arr
    save_file(tensors, str(where / "model.safetensors"))
    cfg = json.loads((src / "config.json").read_text())
    ratios = {SLIDING: 0, CSA: 4, HCA: 128}
    cfg["compress_ratios"] = [ratios[t] for t in cfg.pop("layer_types")]
    cfg["num_hash_layers"] = cfg.pop("mlp_layer_types").count("hash_moe")
    cfg["qk_rope_head_dim"] = int(cfg["head_dim"] * cfg.pop("partial_rotary_factor"))
    compress = cfg.pop("rope_parameters")["compress"]
    if compress["rope_type"] == "yarn":
        cfg["rope_scaling"] = {
            "type": "yarn",
            "factor": compress["factor"],
            "beta_fast": compress["beta_fast"],
            "beta_slow": compress["beta_slow"],
            "original_max_position_embeddings": compress["original_max_position_embeddings"],
        }
    for key in ("compress_rates", "dtype", "transformers_version"):
        cfg.pop(key, None)
    (where / "config.json").write_text(json.dumps(cfg))
    return where


def test_the_hub_layout_converts_to_the_same_file(tmp_path: Path) -> None:
    model = hf_ds4(seed=4, rope_parameters=YARN)
    saved = _save(model, tmp_path / "hf")
    hub = _hub_layout(saved, tmp_path / "hub")
    # transformers reads the hub layout as the same model (so the layout above is a real one)
    again = transformers.DeepseekV4ForCausalLM.from_pretrained(hub).eval()
    tokens = list(range(3, 40))
    np.testing.assert_allclose(_hf_logits(again, tokens), _hf_logits(model, tokens), rtol=0, atol=1e-5)
    a = convert_hf_dir(saved, tmp_path / "a.gguf", tokenizer="none")
    b = convert_hf_dir(hub, tmp_path / "b.gguf", tokenizer="none")
    (fa, ta), (fb, tb) = _fields(a), _fields(b)
    fa.pop("general.name"), fb.pop("general.name")
    assert fa == fb and fa["deepseek4.rope.scaling.type"] == "yarn"
    assert set(ta) == set(tb)
    for name in ta:
        np.testing.assert_array_equal(np.asarray(ta[name].data), np.asarray(tb[name].data), err_msg=name)


def test_tied_embeddings_write_an_explicit_output(tmp_path: Path) -> None:
    model = hf_ds4(seed=5, tie_word_embeddings=True)
    out = convert_hf_dir(
        _save(model, tmp_path / "hf"), tmp_path / "t.gguf", weight_type="F32", tokenizer="none"
    )
    _, tensors = _fields(out)
    np.testing.assert_array_equal(
        np.asarray(tensors["output.weight"].data), model.model.embed_tokens.weight.detach().numpy()
    )


def test_fp8_checkpoints_are_refused(converted: tuple[Any, Path, Path], tmp_path: Path) -> None:
    src = _edited(converted[1], tmp_path / "hf", quantization_config={"quant_method": "fp8"})
    with pytest.raises(ConfigError, match="FP8"):
        convert_hf_dir(src, tmp_path / "x.gguf", tokenizer="none")


def _edited(src: Path, where: Path, **changes: Any) -> Path:
    shutil.copytree(src, where)
    cfg = json.loads((where / "config.json").read_text())
    cfg.update(changes)
    (where / "config.json").write_text(json.dumps(cfg))
    return where


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"compress_rates": {"compressed_sparse_attention": 8, "heavily_compressed_attention": 128}},
            "compress_rates",
        ),
        ({"hc_mult": 2}, "hc_mult"),
        ({"mlp_layer_types": ["moe", "hash_moe", "moe", "moe"]}, "leading run"),
        ({"scoring_func": "softmax"}, "sqrtsoftplus"),
        ({"n_shared_experts": 2}, "n_shared_experts"),
        ({"layer_types": [SLIDING, "full_attention", HCA, CSA]}, "layer_types"),
    ],
)
def test_configs_llama_cpp_cannot_express_are_refused(
    converted: tuple[Any, Path, Path], tmp_path: Path, changes: dict[str, Any], message: str
) -> None:
    src = _edited(converted[1], tmp_path / "hf", **changes)
    with pytest.raises(ConfigError, match=message):
        convert_hf_dir(src, tmp_path / "x.gguf", tokenizer="none")


def test_a_missing_config_key_is_named(converted: tuple[Any, Path, Path], tmp_path: Path) -> None:
    src = _edited(converted[1], tmp_path / "hf")
    cfg = json.loads((src / "config.json").read_text())
    del cfg["o_groups"]
    (src / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="no 'o_groups'"):
        convert_hf_dir(src, tmp_path / "x.gguf", tokenizer="none")


def test_a_tensor_that_does_not_fit_the_config_is_refused(
    converted: tuple[Any, Path, Path], tmp_path: Path
) -> None:
    src = _edited(converted[1], tmp_path / "hf", o_lora_rank=12)
    with pytest.raises(FormatError, match="attn_output_a.weight: shape"):
        convert_hf_dir(src, tmp_path / "x.gguf", tokenizer="none")


# --- the reference chain: llama.cpp on the converted file against transformers (opt-in) ---


def _indexer_margins(model: Any, tokens: list[int]) -> float:
    """The smallest gap between the k-th and (k+1)-th indexer score over all queries and CSA layers
    (transformers' scores); a near tie lets rounding pick a different compressed entry."""
    scores: list[torch.Tensor] = []
    hooks = [
        layer.self_attn.compressor.indexer.scorer.register_forward_hook(
            lambda _m, _i, out: scores.append(out.detach())
        )
        for layer in model.model.layers
        if layer.self_attn.layer_type == CSA
    ]
    try:
        _hf_logits(model, tokens)
    finally:
        for h in hooks:
            h.remove()
    k, gap = model.config.index_topk, np.inf
    for s in scores:
        s = s[0].numpy()
        for row in range(s.shape[0]):
            visible = np.sort(s[row, : (row + 1) // 4])[::-1]
            if len(visible) > k:
                gap = min(gap, float(visible[k - 1] - visible[k]))
    return gap


# YaRN on the compressed layers' RoPE, as V4-Flash ships it (factor 16 there); it moves transformers'
# logits by 0.53 relative here, so wrong rope.scaling keys would fail the comparison.
YARN = {
    "rope_type": "yarn",
    "factor": 4.0,
    "original_max_position_embeddings": 64,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
}
VARIANTS: dict[str, dict[str, Any]] = {
    "sliding_csa_hca_csa": {},
    "hca_csa_hca_csa_two_hash": {"layer_types": [HCA, CSA, HCA, CSA], "n_hash": 2},
    "yarn_compressed_rope": {"rope_parameters": YARN},
}


@pytest.mark.llama
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_llama_cpp_logits_equal_transformers(tmp_path: Path, variant: str) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    model = hf_ds4(seed=3, **VARIANTS[variant])
    out = convert_hf_dir(
        _save(model, tmp_path / "hf"), tmp_path / "m.gguf", weight_type="F32", tokenizer="bytes"
    )
    tokens = [int(t) for t in np.random.default_rng(7).integers(0, V, size=300)]  # two HCA windows of 128
    want = _hf_logits(model, tokens)
    assert _indexer_margins(model, tokens) > 5e-5  # F32 rounding differences are ~1e-6
    f32 = 0  # GGML_TYPE_F32 K/V: with F16 cells, rounding flips near-tied indexer picks
    llm = llama_cpp.Llama(
        model_path=str(out), n_ctx=512, logits_all=True, verbose=False, n_threads=1, type_k=f32, type_v=f32
    )
    llm.eval(tokens[:200])  # prefill, then one token at a time (the compressors' decode path)
    for t in tokens[200:]:
        llm.eval([t])
    got = np.array(llm.scores[: len(tokens)], dtype=np.float32)
    assert _rel_diff(got, want) <= 1e-4


# --- the MTP layer (mtp.0.*): llama.cpp's --mtp file ---

# The MTP test model: the MTP layer is a routed block, so its stand-in below is a routed layer of the
# same attention type (layer 1, sliding, as V4-Flash's MTP layer; layer 2 for CSA).
MTP_SCHEDULE = [HCA, SLIDING, CSA, HCA]


def _with_mtp(src: Path, like_layer: int, seed: int = 11) -> dict[str, np.ndarray]:
    """Write the MTP layer into the saved directory (its own mtp.safetensors) under DeepSeek's names.

    Shapes come from outside our converter: the block part copies the shapes of a saved main layer of
    the same kind (DeepSeek's MTPBlock is a Block), the extras are DeepSeek's reference MTPBlock
    (inference/model.py): e_proj and h_proj Linear(dim, dim), enorm / hnorm / norm RMSNorm(dim),
    hc_head_fn [hc, hc * dim], hc_head_base [hc], hc_head_scale [1]. Values follow hf_ds4's recipe."""
    from safetensors.numpy import load_file, save_file

    rng = np.random.default_rng(seed)

    def value(rest: str, shape: tuple[int, ...]) -> np.ndarray:
        if rest.endswith("gate.bias"):
            return (0.3 * rng.standard_normal(shape)).astype(np.float32)
        if len(shape) == 1:
            centre = 0.0 if ("base" in rest or "sink" in rest) else 1.0
            return (centre + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        return (rng.standard_normal(shape) * shape[-1] ** -0.5).astype(np.float32)

    prefix = f"model.layers.{like_layer}."
    out: dict[str, np.ndarray] = {}
    for name, arr in load_file(str(src / "model.safetensors")).items():
        if name.startswith(prefix):
            rest = name[len(prefix) :].replace("attn.norm.weight", "attn.kv_norm.weight")
            out["mtp.0." + rest] = value(rest, arr.shape)
    extras = {
        "e_proj.weight": (D, D),
        "h_proj.weight": (D, D),
        "enorm.weight": (D,),
        "hnorm.weight": (D,),
        "norm.weight": (D,),
        "hc_head_fn": (4, 4 * D),
        "hc_head_base": (4,),
        "hc_head_scale": (1,),
    }
    for rest, shape in extras.items():
        out["mtp.0." + rest] = value(rest, shape)
    save_file(out, str(src / "mtp.safetensors"))
    return out


@pytest.fixture(scope="module")
def with_mtp(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, np.ndarray]]:
    where = tmp_path_factory.mktemp("ds4mtp")
    plain = _save(hf_ds4(seed=6, layer_types=MTP_SCHEDULE), where / "plain")
    src = Path(shutil.copytree(plain, where / "hf"))
    return plain, src, _with_mtp(src, like_layer=1)


def test_the_mtp_file_is_llama_cpps_layout(
    with_mtp: tuple[Path, Path, dict[str, np.ndarray]], tmp_path: Path
) -> None:
    _, src, mtp = with_mtp
    out = convert_deepseek4(
        src, tmp_path / "mtp.gguf", weight_type="F32", tokenizer=byte_level_tokenizer(V), mtp=True
    )
    fields, tensors = _fields(out)
    a = "deepseek4"
    assert fields[f"{a}.block_count"] == 5 and fields[f"{a}.nextn_predict_layers"] == 1
    assert fields[f"{a}.attention.compress_ratios"] == [128, 0, 4, 128, 0]  # the MTP layer: sliding
    assert len(fields[f"{a}.swiglu_clamp_exp"]) == len(fields[f"{a}.swiglu_clamp_shexp"]) == 5
    assert fields[f"{a}.hash_layer_count"] == 1
    block = {
        "attn_norm",
        "attn_sinks",
        "attn_q_a",
        "attn_q_a_norm",
        "attn_q_b",
        "attn_kv",
        "attn_kv_a_norm",
        "attn_output_a",
        "attn_output_b",
        "ffn_norm",
        "ffn_gate_inp",
        "ffn_gate_exps",
        "ffn_up_exps",
        "ffn_down_exps",
        "ffn_gate_shexp",
        "ffn_up_shexp",
        "ffn_down_shexp",
        "nextn.eh_proj",
        "nextn.enorm",
        "nextn.hnorm",
        "nextn.shared_head_norm",
    } | {f"hc_{p}_{w}" for p in ("attn", "ffn") for w in ("fn", "base", "scale")}
    want = {f"blk.4.{t}.weight" for t in block} | {"blk.4.exp_probs_b.bias"}
    want |= {f"{t}.weight" for t in ("token_embd", "output", "output_norm")}
    want |= {f"output_hc_{w}.weight" for w in ("fn", "base", "scale")}
    assert set(tensors) == want  # no trunk block, no hash table
    # ggml shapes as llama.cpp's load_arch_tensors creates them ({ne0, ne1}, innermost first)
    assert list(tensors["blk.4.nextn.eh_proj.weight"].shape) == [2 * D, D]
    assert list(tensors["output_hc_fn.weight"].shape) == [4 * D, 4]
    assert list(tensors["output_hc_scale.weight"].shape) == [1]
    assert list(tensors["blk.4.ffn_gate_exps.weight"].shape) == [D, 32, E]

    def data(name: str) -> np.ndarray:
        t = tensors[name]
        return np.asarray(t.data).reshape([int(n) for n in reversed(t.shape)])

    # eh_proj · [enorm(e); hnorm(h)] = e_proj · enorm(e) + h_proj · hnorm(h): the input halves in that order
    eh = np.concatenate([mtp["mtp.0.e_proj.weight"], mtp["mtp.0.h_proj.weight"]], axis=1)
    np.testing.assert_array_equal(data("blk.4.nextn.eh_proj.weight"), eh)
    np.testing.assert_array_equal(data("output_hc_fn.weight"), mtp["mtp.0.hc_head_fn"])  # the MTP's own head
    np.testing.assert_array_equal(data("blk.4.nextn.shared_head_norm.weight"), mtp["mtp.0.norm.weight"])
    np.testing.assert_array_equal(data("blk.4.attn_kv_a_norm.weight"), mtp["mtp.0.attn.kv_norm.weight"])
    up = np.stack([mtp[f"mtp.0.ffn.experts.{x}.w3.weight"] for x in range(E)])
    np.testing.assert_array_equal(data("blk.4.ffn_up_exps.weight"), up)
    head = convert_deepseek4(
        src, tmp_path / "main.gguf", weight_type="F32", tokenizer=byte_level_tokenizer(V)
    )
    _, main = _fields(head)
    for shared in ("token_embd.weight", "output.weight", "output_norm.weight"):
        np.testing.assert_array_equal(data(shared), np.asarray(main[shared].data).reshape(data(shared).shape))
    for kept in ("blk.4.hc_attn_fn.weight", "blk.4.nextn.enorm.weight", "output_hc_scale.weight"):
        assert tensors[kept].tensor_type == GGMLQuantizationType.F32, kept


def test_the_main_file_is_unchanged_by_the_mtp_layer(
    with_mtp: tuple[Path, Path, dict[str, np.ndarray]], tmp_path: Path
) -> None:
    plain, src, _ = with_mtp
    a = convert_hf_dir(plain, tmp_path / "a.gguf", tokenizer="bytes", name="m")
    b = convert_hf_dir(src, tmp_path / "b.gguf", tokenizer="bytes", name="m")
    assert a.read_bytes() == b.read_bytes()
    assert _fields(b)[0]["deepseek4.nextn_predict_layers"] == 0


def test_a_compressed_mtp_layer_and_the_hub_ratio(tmp_path: Path) -> None:
    plain = _save(hf_ds4(seed=7, layer_types=MTP_SCHEDULE), tmp_path / "plain")
    src = Path(shutil.copytree(plain, tmp_path / "hf"))
    _with_mtp(src, like_layer=2)  # a CSA layer: compressor and indexer
    out = convert_deepseek4(src, tmp_path / "mtp.gguf", mtp=True)
    fields, tensors = _fields(out)
    assert fields["deepseek4.attention.compress_ratios"][-1] == 4
    assert list(tensors["blk.4.attn_compressor_ape.weight"].shape) == [2 * HEAD, 4]
    assert "blk.4.indexer.attn_q_b.weight" in tensors
    # DeepSeek's config lists the MTP layer's ratio (compress_ratios has L + 1 entries); it must agree
    hub = _hub_layout(src, tmp_path / "hub")
    shutil.copy(src / "mtp.safetensors", hub)
    cfg = json.loads((hub / "config.json").read_text())
    assert convert_deepseek4(
        _edited(hub, tmp_path / "ok", compress_ratios=cfg["compress_ratios"] + [4]),
        tmp_path / "ok.gguf",
        mtp=True,
    ).is_file()
    with pytest.raises(FormatError, match="MTP layer compression ratio 128"):
        convert_deepseek4(
            _edited(hub, tmp_path / "bad", compress_ratios=cfg["compress_ratios"] + [128]),
            tmp_path / "bad.gguf",
            mtp=True,
        )


def test_mtp_without_an_mtp_layer_is_refused(converted: tuple[Any, Path, Path], tmp_path: Path) -> None:
    with pytest.raises(FormatError, match=r"no mtp\.0\.\* tensors"):
        convert_deepseek4(converted[1], tmp_path / "x.gguf", mtp=True)


def test_cli_convert_mtp(with_mtp: tuple[Path, Path, dict[str, np.ndarray]], tmp_path: Path) -> None:
    out = tmp_path / "mtp-q.gguf"
    argv = [
        "convert",
        str(with_mtp[1]),
        str(out),
        "--mtp",
        "--outtype",
        "q8_0",
        "--tokenizer",
        "bytes",
        "--no-progress",
    ]
    assert cli_main(argv) == 0
    _, tensors = _fields(out)
    assert tensors["blk.4.nextn.eh_proj.weight"].tensor_type == GGMLQuantizationType.Q8_0
    assert tensors["blk.4.ffn_gate_exps.weight"].tensor_type == GGMLQuantizationType.Q8_0


@pytest.mark.llama
def test_llama_cpp_loads_the_mtp_file(
    with_mtp: tuple[Path, Path, dict[str, np.ndarray]], tmp_path: Path
) -> None:
    """llama.cpp's loader creates every MTP tensor with its own shapes (load_mtp on) and counts the file's
    tensors; the main file still decodes the same logits with the MTP layer in the checkpoint."""
    llama_cpp = pytest.importorskip("llama_cpp")
    plain, src, _ = with_mtp
    mtp = convert_deepseek4(
        src, tmp_path / "mtp.gguf", weight_type="F32", tokenizer=byte_level_tokenizer(V), mtp=True
    )
    params = llama_cpp.llama_model_default_params()
    params.load_mtp = True
    params.use_mmap = False
    model = llama_cpp.llama_model_load_from_file(str(mtp).encode(), params)
    assert model, "llama.cpp refused the MTP file"
    try:
        assert llama_cpp.llama_model_n_layer_nextn(model) == 1
        assert llama_cpp.llama_model_n_layer(model) == 4  # the trunk blocks the MTP layer follows
    finally:
        llama_cpp.llama_model_free(model)
    logits = []
    for d in (plain, src):
        out = convert_hf_dir(d, tmp_path / f"{d.name}.gguf", weight_type="F32", tokenizer="bytes")
        llm = llama_cpp.Llama(model_path=str(out), n_ctx=64, logits_all=True, verbose=False, n_threads=1)
        llm.eval(list(range(3, 40)))
        logits.append(np.array(llm.scores[:37], dtype=np.float32))
        del llm
    assert np.isfinite(logits[0]).all()
    np.testing.assert_array_equal(logits[0], logits[1])


class MtpReference:
    """Rows (h_q, token q+1) through the MTP layer in transformers: logits and output streams."""

    def __init__(self, saved: Path, mtp: dict[str, np.ndarray], where: Path) -> None:
        from safetensors.numpy import load_file, save_file

        cfg = json.loads((saved / "config.json").read_text())
        cfg.update(num_hidden_layers=1, layer_types=[SLIDING], mlp_layer_types=["moe"])
        where.mkdir()
        (where / "config.json").write_text(json.dumps(cfg))
        main = load_file(str(saved / "model.safetensors"))
        glue = {"e_proj.weight", "h_proj.weight", "enorm.weight", "hnorm.weight", "norm.weight"}
        block = {
            "layers.0." + k.removeprefix("mtp.0."): v
            for k, v in mtp.items()
            if k.removeprefix("mtp.0.") not in glue and not k.startswith("mtp.0.hc_head")
        }
        block |= {"embed.weight": main["model.embed_tokens.weight"], "head.weight": main["head.weight"]}
        block |= {"norm.weight": mtp["mtp.0.norm.weight"]}
        block |= {f"hc_head_{w}": mtp[f"mtp.0.hc_head_{w}"] for w in ("fn", "base", "scale")}
        save_file(block, str(where / "model.safetensors"))
        self.ref, info = transformers.DeepseekV4ForCausalLM.from_pretrained(where, output_loading_info=True)
        assert not any(info.values()), info
        self.ref.eval()
        self.mtp = mtp

    def rows(self, h: torch.Tensor, tokens: list[int]) -> tuple[np.ndarray, torch.Tensor]:
        """h [n, 4, D]: the rows' input streams; tokens [n]: the next tokens.
        Returns (logits [n, V], output streams [n, 4, D])."""

        def w(name: str) -> torch.Tensor:
            return torch.from_numpy(self.mtp["mtp.0." + name])

        def rms(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight

        nxt = torch.tensor([tokens])
        out: list[torch.Tensor] = []
        layer = self.ref.model.layers[0]
        with torch.no_grad():
            e = rms(self.ref.model.embed_tokens(nxt[0]), w("enorm.weight")) @ w("e_proj.weight").T
            x = (e[:, None, :] + rms(h, w("hnorm.weight")) @ w("h_proj.weight").T)[None].contiguous()
            pre = layer.register_forward_pre_hook(lambda _m, a, kw: ((x,) + a[1:], kw), with_kwargs=True)
            post = layer.register_forward_hook(
                lambda _m, _a, o: out.append((o[0] if isinstance(o, tuple) else o)[0].detach()))
            try:
                logits = self.ref(input_ids=nxt).logits[0].numpy()
            finally:
                pre.remove()
                post.remove()
        return logits, out[0]


def _main_streams(model: Any, tokens: list[int]) -> torch.Tensor:
    streams: list[torch.Tensor] = []
    hook = model.model.hc_head.register_forward_pre_hook(lambda _m, a: streams.append(a[0].detach()))
    try:
        _hf_logits(model, tokens)
    finally:
        hook.remove()
    return streams[0][0].float()


def _mtp_reference(
    model: Any, saved: Path, mtp: dict[str, np.ndarray], tokens: list[int], where: Path
) -> tuple[np.ndarray, np.ndarray]:
    """(the main model's final streams h [n, 4, D], the MTP logits [n, V]) for rows p = 0..n-1, each the
    pair (h_p, token p + 1), computed outside llama.cpp and outside our converter: DeepSeek's MTPBlock
    glue (`e_proj(enorm(embed(t))) + h_proj(hnorm(h))` per stream) in torch around transformers' own
    block and head, a one-layer DeepseekV4ForCausalLM loaded from the MTP tensors under DeepSeek's
    names (its norm and hyper-connection head the MTP layer's, embedding and LM head the main model's)."""
    h = _main_streams(model, tokens[:-1])
    logits, _ = MtpReference(saved, mtp, where).rows(h, tokens[1:])
    return h.numpy(), logits


@pytest.mark.llama
def test_llama_cpp_mtp_logits_equal_deepseeks_mtp_block(tmp_path: Path) -> None:
    """llama.cpp's MTP graph (a context of type MTP on the converted MTP file, fed the main model's
    streams and the next tokens through llama_batch_ext) against _mtp_reference, over 40 rows (more
    than the sliding window of 16). head_dim 128: with head_dim equal to the indexer's key length
    (64, 64) llama.cpp's MTP context divides by zero while sizing a K rotation for its (empty)
    non-sliding cache."""
    import ctypes

    llama_cpp = pytest.importorskip("llama_cpp")
    model = hf_ds4(seed=6, layer_types=MTP_SCHEDULE, head_dim=128)
    saved = _save(model, tmp_path / "hf")
    mtp = _with_mtp(saved, like_layer=1)
    out = convert_deepseek4(
        saved, tmp_path / "mtp.gguf", weight_type="F32", tokenizer=byte_level_tokenizer(V), mtp=True
    )
    tokens = [int(t) for t in np.random.default_rng(5).integers(0, V, size=41)]
    h, want = _mtp_reference(model, saved, mtp, tokens, tmp_path / "ref")

    params = llama_cpp.llama_model_default_params()
    params.load_mtp = True
    lm = llama_cpp.llama_model_load_from_file(str(out).encode(), params)
    assert lm
    cp = llama_cpp.llama_context_default_params()
    cp.ctx_type = llama_cpp.LLAMA_CONTEXT_TYPE_MTP
    cp.n_ctx = cp.n_batch = cp.n_ubatch = 128
    cp.n_threads = cp.n_threads_batch = 1
    cp.type_k = cp.type_v = 0  # F32 cells
    cp.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED  # its CPU kernel rounds through F16
    ctx = llama_cpp.llama_init_from_model(lm, cp)
    batch = llama_cpp.llama_batch_ext_init(ctx)
    try:
        assert ctx and batch
        rows = np.ascontiguousarray(h.reshape(len(h), -1), dtype=np.float32)  # [n, 4 * D], stream-major
        positions = [(llama_cpp.llama_pos * 1)(i + 1) for i in range(len(rows))]  # each row at its token's
        for i, row in enumerate(rows):
            idx = llama_cpp.llama_batch_ext_add_token(batch, 0, tokens[i + 1])
            embd = llama_cpp.llama_embd(row.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), 1, row.size)
            assert llama_cpp.llama_batch_ext_set_embd_token(batch, idx, embd)  # the hidden state goes here
            assert llama_cpp.llama_batch_ext_set_pos(batch, idx, positions[i])
            assert llama_cpp.llama_batch_ext_set_output_logits(batch, idx, True)
        assert llama_cpp.llama_process(ctx, llama_cpp.LLAMA_PROCESS_TYPE_DECODE, batch) == 0
        got = np.stack(
            [
                np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, i), shape=(V,))
                for i in range(len(rows))
            ]
        )
    finally:
        llama_cpp.llama_batch_ext_free(batch)
        llama_cpp.llama_free(ctx)
        llama_cpp.llama_model_free(lm)
    assert _rel_diff(got, want) <= 1e-5
    assert (got.argmax(1) == want.argmax(1)).all()
