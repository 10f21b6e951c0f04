"""Block-format mixes of a tiny `qwen3moe` model load and run: a Q5_K_M-style and a Q3_K_M-style
file (per-tensor types chosen as llama.cpp's mixes choose them, expert and dense matrices alike;
norms and the router stay F32), one with IQ2_XS / IQ3_XXS experts (the spec's reference
deployment stores experts in IQ2_XS), one with IQ2_XXS experts (llama.cpp's IQ2_XXS files of MoE
models), one with IQ2_S / IQ3_S experts (the types of llama.cpp's IQ2_M and IQ3_S / IQ3_M files),
one with IQ1_S / IQ1_M experts (llama.cpp's IQ1_S / IQ1_M files, unsloth's UD-IQ1 quants) and one
of the 32-column types llama-quantize falls back to where rows are not a multiple of 256 wide (Q5_1,
IQ4_NL, Q8_0), written from the F32 conversion with the test encoders of kquant_pack.py and
iquant_pack.py (gguf-py's for Q5_1 and Q8_0).

- The engine's logits on each mix equal the PyTorch reference run on the same file decoded by
  ``gguf.quants.dequantize`` (the engine quantizes activations to Q8_K blocks, as ggml does, so the
  bound is that of the other block formats in test_engine_parity.py: 3e-2 of the logit range).
- They stay close to the F32 model's logits (bounds below, measured with margin), the Q5_K_M mix
  closer than the Q3_K_M one; every mix's distance to F32 is its decoded reference's (the
  weights' own error) plus at most the activation rounding.
- ``strata inspect`` names the new types in its per-type totals.
- A matrix of a type strata has no kernels for (Q4_1) is refused at load with a FormatError naming it.
- The Metal backend (emulated) runs every mix (Q3_K, Q5_K, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
  IQ1_M and the fallback types among its GEMV formats) like its decoded reference.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
from gguf import quants as gq

import iquant_pack
import kquant_pack
import strata
from engine_args import F32_CELLS
from strata import _strata
from strata.cli.__main__ import main as cli_main
from strata.convert import convert_qwen3moe
from strata_train import ReferenceRunner

transformers = pytest.importorskip("transformers")

Mix = Callable[[str, int], str]


def q5_k_m(name: str, layer: int) -> str:
    if name == "output.weight" or (layer == 0 and ("attn_v" in name or "ffn_down" in name)):
        return "Q6_K"
    return "Q5_K"


def q3_k_m(name: str, layer: int) -> str:
    if name == "output.weight":
        return "Q6_K"
    if "attn_v" in name or "ffn_down" in name:
        return "Q5_K" if layer == 0 else "Q4_K"
    if "attn_output" in name:
        return "Q4_K"
    return "Q3_K"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def f32_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Rows of every matrix a multiple of 256, so every matrix can take a K-quant. Every token takes
    # all 8 experts (weighted by the router's softmax): every expert tensor is used, and no top-k
    # choice can flip under the small perturbations compared here (one flipped expert moves the
    # logits of a random model far more than the formats' own error does).
    cfg = transformers.Qwen3MoeConfig(
        vocab_size=300, hidden_size=256, intermediate_size=256, moe_intermediate_size=256,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        num_experts=8, num_experts_per_tok=8, norm_topk_prob=True, max_position_embeddings=512,
        rms_norm_eps=1e-6,
    )
    torch.manual_seed(0)
    model = transformers.Qwen3MoeForCausalLM(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) * p.shape[-1] ** -0.5)
    return convert_qwen3moe(model, tmp_path_factory.mktemp("mix") / "f32.gguf")


def iq_experts(name: str, layer: int) -> str:
    if "ffn_gate_exps" in name or "ffn_up_exps" in name:
        return "IQ2_XS"
    if "ffn_down_exps" in name:
        return "IQ3_XXS"
    return "Q6_K" if name == "output.weight" else "Q4_K"


def iq2_xxs_experts(name: str, layer: int) -> str:
    """Experts as in llama.cpp's IQ2_XXS files of MoE models (and unsloth's UD-IQ2_XXS): every expert
    matrix IQ2_XXS; attention Q4_K, output Q6_K."""
    if "_exps" in name:
        return "IQ2_XXS"
    return "Q6_K" if name == "output.weight" else "Q4_K"


def iq_s_experts(name: str, layer: int) -> str:
    """Experts in the two types of llama.cpp's IQ2_M and IQ3_S / IQ3_M files: gate and up IQ2_S,
    down IQ3_S; attention Q4_K, output Q6_K."""
    if "ffn_gate_exps" in name or "ffn_up_exps" in name:
        return "IQ2_S"
    if "ffn_down_exps" in name:
        return "IQ3_S"
    return "Q6_K" if name == "output.weight" else "Q4_K"


def iq1_experts(name: str, layer: int) -> str:
    """Experts in the two types of llama.cpp's IQ1_S / IQ1_M files (and unsloth's UD-IQ1 quants of
    large MoE models): gate and up IQ1_S, down IQ1_M; attention Q4_K, output Q6_K."""
    if "ffn_gate_exps" in name or "ffn_up_exps" in name:
        return "IQ1_S"
    if "ffn_down_exps" in name:
        return "IQ1_M"
    return "Q6_K" if name == "output.weight" else "Q4_K"


def fallbacks(name: str, layer: int) -> str:
    """The 32-column types llama-quantize writes for K-quant tensors whose rows are not a multiple of
    256 wide (GLM-4.5-Air's experts): Q5_1 for Q5_K, IQ4_NL for IQ4_XS, Q8_0 for Q6_K."""
    if name == "output.weight":
        return "Q8_0"
    if "ffn_down" in name or "attn_v" in name:
        return "Q5_1"
    return "IQ4_NL"


def encode(arr: np.ndarray, type_name: str) -> np.ndarray:
    if type_name in ("Q8_0", "Q5_1", "Q4_1"):  # gguf-py's own quantizers
        return np.asarray(gq.quantize(arr, GGMLQuantizationType[type_name]))
    return (iquant_pack if type_name.startswith("IQ") else kquant_pack).quantize(arr, type_name)


def write_mix(src: Path, dst: Path, mix: Mix) -> dict[str, str]:
    """Copy ``src`` with every matrix but the router re-encoded as ``mix`` says; returns name -> type."""
    reader = GGUFReader(str(src))
    arch = str(reader.fields["general.architecture"].contents())
    writer = GGUFWriter(str(dst), arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = GGUFValueType(field.types[0])
        sub = GGUFValueType(field.types[-1]) if vtype == GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), vtype, sub_type=sub)
    chosen: dict[str, str] = {}
    for t in reader.tensors:
        assert t.tensor_type == GGMLQuantizationType.F32
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))
        arr = np.asarray(t.data, dtype=np.float32).reshape(shape)
        layer = int(t.name.split(".")[1]) if t.name.startswith("blk.") else -1
        if arr.ndim == 1 or "ffn_gate_inp" in t.name:
            writer.add_tensor(t.name, arr)
            chosen[t.name] = "F32"
            continue
        type_name = mix(t.name, layer)
        data = encode(arr, type_name)
        writer.add_tensor(t.name, data, raw_dtype=GGMLQuantizationType[type_name])
        chosen[t.name] = type_name
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return chosen


def rel(a: np.ndarray, b: np.ndarray) -> float:
    """Relative Frobenius distance of two logit arrays."""
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def top1(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(np.argmax(a, -1) == np.argmax(b, -1)))


def logits(path: Path, ids: list[int]) -> np.ndarray:
    # f32 cells: the mixes are compared with their decoded reference to float rounding
    eng = _strata.Engine(str(path), n_threads=2, max_ctx=64, settings=F32_CELLS)
    return np.asarray(eng.eval(ids, logits="all"))


def reference(path: Path, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return ReferenceRunner.from_gguf(path, capacity=64).prefill(ids).logits.numpy()


# Measured (seeded; AVX2 on Zen 4): engine vs decoded reference 0.023 / 0.021 / 0.024 for
# Q5_K_M / Q3_K_M / IQ experts; vs F32 0.13 / 0.42 / 0.38, equal to the decoded references'
# own distance to F32 (the weights' error with these simple encoders). The fallback types
# (AVX-512 on Zen 4): 0.015 against the decoded reference, 0.269 against F32 (reference 0.268).
# IQ2_XXS experts (AVX-512 EPYC): 0.023 against the decoded reference, 0.445 against F32 (reference 0.445).
# IQ2_S / IQ3_S experts (AVX-512 EPYC): 0.023 against the decoded reference, 0.361 against F32
# (reference 0.359). IQ1_S / IQ1_M experts (AVX-512 EPYC): 0.020 against the decoded reference, 0.494
# against F32 (reference 0.494); 6.0e-7 from it on metal-emu.
USED = {
    "q5_k_m": {"F32", "Q5_K", "Q6_K"},
    "q3_k_m": {"F32", "Q3_K", "Q4_K", "Q5_K", "Q6_K"},
    "iq_experts": {"F32", "IQ2_XS", "IQ3_XXS", "Q4_K", "Q6_K"},
    "iq2_xxs_experts": {"F32", "IQ2_XXS", "Q4_K", "Q6_K"},
    "iq_s_experts": {"F32", "IQ2_S", "IQ3_S", "Q4_K", "Q6_K"},
    "iq1_experts": {"F32", "IQ1_S", "IQ1_M", "Q4_K", "Q6_K"},
    "fallbacks": {"F32", "Q8_0", "Q5_1", "IQ4_NL"},
}
UP_EXPS = {
    "q5_k_m": "Q5_K", "q3_k_m": "Q3_K", "iq_experts": "IQ2_XS", "iq2_xxs_experts": "IQ2_XXS",
    "iq_s_experts": "IQ2_S", "iq1_experts": "IQ1_S", "fallbacks": "IQ4_NL",
}


@pytest.mark.parametrize(
    ("mix", "to_f32"),
    [
        (q5_k_m, 0.2), (q3_k_m, 0.6), (iq_experts, 0.6), (iq2_xxs_experts, 0.6), (iq_s_experts, 0.6),
        (iq1_experts, 0.6), (fallbacks, 0.35),
    ],
)
def test_mix_runs_like_its_decoded_reference_and_near_f32(
    f32_file: Path, tmp_path: Path, mix: Mix, to_f32: float
) -> None:
    path = tmp_path / f"{mix.__name__}.gguf"
    chosen = write_mix(f32_file, path, mix)
    assert set(chosen.values()) == USED[mix.__name__]
    assert chosen["blk.1.ffn_up_exps.weight"] == UP_EXPS[mix.__name__]  # experts too
    ids = [int(t) for t in np.random.default_rng(1).integers(0, 300, 24)]
    got, want = logits(path, ids), reference(path, ids)
    # The engine rounds each matrix's input to Q8_K blocks (about 0.6% per product on 256-wide
    # rows); over the ~16 products in series here that is about 2.5%.
    assert rel(got, want) <= 5e-2
    assert top1(got, want) >= 0.9
    full, full_ref = logits(f32_file, ids), reference(f32_file, ids)
    err = rel(got, full)
    print(f"{mix.__name__}: engine vs decoded reference {rel(got, want):.3f}, vs F32 {err:.3f} "
          f"(decoded reference vs F32 {rel(want, full_ref):.3f}), top-1 with F32 {top1(got, full):.2f}")
    assert err <= to_f32
    assert err <= rel(want, full_ref) + 5e-2  # the engine adds no more than its activation rounding


@pytest.mark.parametrize("mix", [q3_k_m, iq_experts, iq2_xxs_experts, iq_s_experts, iq1_experts, fallbacks])
def test_inspect_names_the_types(
    f32_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], mix: Mix
) -> None:
    path = tmp_path / "mix.gguf"
    chosen = write_mix(f32_file, path, mix)
    assert cli_main(["inspect", str(path), "--json", "--no-tensors"]) == 0
    text = json.dumps(json.loads(capsys.readouterr().out))
    for name in USED[mix.__name__]:
        assert f'"{name}"' in text
    assert cli_main(["inspect", str(path)]) == 0
    listing = capsys.readouterr().out
    for tname in ("blk.0.ffn_up_exps.weight", "output.weight"):
        line = next(ln for ln in listing.splitlines() if ln.split()[:1] == [tname])
        assert chosen[tname] in line


@pytest.mark.parametrize(
    "mix", [q3_k_m, q5_k_m, iq_experts, iq2_xxs_experts, iq_s_experts, iq1_experts, fallbacks]
)
def test_metal_backend_runs_every_mix(f32_file: Path, tmp_path: Path, mix: Mix) -> None:
    """Every mix on the emulated Metal backend (Q3_K, Q5_K, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
    IQ1_M, Q5_1, IQ4_NL among its GEMV formats): its logits are the decoded reference's, as the CPU
    engine's are (the Metal GEMVs multiply f32 activations, so closer than the CPU's q8 blocks;
    measured 7e-7)."""
    path = tmp_path / f"{mix.__name__}.gguf"
    chosen = write_mix(f32_file, path, mix)
    assert chosen["blk.1.ffn_up_exps.weight"] == UP_EXPS[mix.__name__]
    ids = [int(t) for t in np.random.default_rng(3).integers(0, 300, 12)]
    eng = _strata.Engine(str(path), backend="metal-emu", max_ctx=64)
    got = np.asarray(eng.eval(ids, logits="all"))
    want = reference(path, ids)
    print(f"{mix.__name__} on metal-emu: vs decoded reference {rel(got, want):.2e}, "
          f"top-1 {top1(got, want):.2f}")
    assert rel(got, want) <= 5e-2
    assert top1(got, want) >= 0.9


def test_a_type_without_kernels_is_refused_at_load(f32_file: Path, tmp_path: Path) -> None:
    """Q4_1 (gguf-py writes it; strata has no kernels for it): a FormatError naming the tensor and type."""
    path = tmp_path / "q4_1.gguf"
    write_mix(f32_file, path, lambda name, layer: "Q4_1" if "ffn_up_exps" in name else "Q8_0")
    message = r"blk\.0\.ffn_up_exps\.weight has type Q4_1, which strata cannot compute with"
    with pytest.raises(strata.FormatError, match=message):
        _strata.Engine(str(path), n_threads=1, max_ctx=32)
