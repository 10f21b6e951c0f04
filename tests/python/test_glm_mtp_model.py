"""The glm4moe head-to-head model's trainer (strata_train.glm_mtp_*): its math equals transformers'
Glm4MoeForCausalLM and strata's engine (main rows and the nextn drafter's chain), its Q8_0 packing
equals gguf.quants, and the pieces rebuild a Hugging Face directory that `strata convert` reads."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from gguf.constants import GGMLQuantizationType
from gguf.quants import quantize

from engine_args import F32_CELLS, engine
from strata import _strata
from strata.convert import convert_hf_dir
from strata_train.glm_mtp_model import GlmMtpConfig, GlmMtpModel
from strata_train.glm_mtp_pack import PIECE_BYTES, pack, quantize_q8_0, read_blob, unpack, unpacked_tensors
from strata_train.glm_mtp_train import main as train_main

transformers = pytest.importorskip("transformers")

TINY = GlmMtpConfig(vocab=256, d=64, layers=3, dense=1, heads=4, kv_heads=2, head_dim=16, ffn=96,
                    experts=8, top_k=2, expert_ffn=32, shared=1, scale=1.5, context=128)
PROMPT = [3, 17, 250, 9, 41, 41, 7, 100, 12, 5, 77, 200]


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


def _tokenizer(path: Path) -> Path:
    """A byte-level BPE tokenizer.json of 256 tokens (the 256 bytes, no merges) + an EOS among them."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.save(str(path))
    return path


@pytest.fixture(scope="module")
def trained_like(tmp_path_factory: pytest.TempPathFactory) -> tuple[GlmMtpModel, Path]:
    """A random tiny model with non-trivial norms and selection biases, its weights rounded through
    the Q8_0 pieces (so the PyTorch model and the GGUF hold the same numbers), converted to F32."""
    root = tmp_path_factory.mktemp("glm-mtp-model")
    torch.manual_seed(5)
    model = GlmMtpModel(TINY)
    model.reset_parameters(std=0.08)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(0.2 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.normal_(0.0, 0.05)
        for moe in model.moe_layers():
            moe.gate.e_score_correction_bias.normal_(0.0, 0.2)
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    pack(state, TINY.experts, root / "pieces", {"hf_config": TINY.hf_config(None, None)})
    unpack(root / "pieces", root / "hf", _tokenizer(root / "tokenizer.json"))
    # the rounded weights back into the model
    index, blob = read_blob(root / "pieces")
    rounded = dict(unpacked_tensors(index, blob))
    new_state = {}
    for k in model.state_dict():
        if ".mlp.experts." in k:
            prefix, kind = k.rsplit(".", 1)
            new_state[k] = torch.stack([torch.from_numpy(rounded[f"{prefix}.{e}.{kind}_proj.weight"].copy())
                                        for e in range(TINY.experts)])
        else:
            new_state[k] = torch.from_numpy(rounded[k].copy())
    model.load_state_dict(new_state)
    gguf = convert_hf_dir(root / "hf", root / "m.gguf", weight_type="F32")
    return model.eval(), gguf


def test_q8_0_packing_equals_gguf_quants() -> None:
    x = np.random.default_rng(3).normal(size=(6, 96)).astype(np.float32)
    x[1, :32] = 0.0  # an all-zero block
    q, d = quantize_q8_0(x)
    blocks = np.concatenate([d.reshape(-1, 1).view(np.uint8), q.reshape(-1, 32).view(np.uint8)], axis=1)
    assert blocks.tobytes() == quantize(x, GGMLQuantizationType.Q8_0).tobytes()


def test_main_logits_equal_transformers_and_strata(trained_like: tuple[GlmMtpModel, Path]) -> None:
    model, gguf = trained_like
    hf_dir = gguf.parent / "hf"
    hf = transformers.Glm4MoeForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32).eval()
    tokens = torch.tensor([PROMPT])
    with torch.no_grad():
        ours = model.lm_head(model.model.norm(model.hidden(tokens)))[0].numpy()
        want = hf(tokens).logits[0].numpy()
    assert _rel(ours, want) <= 1e-4
    eng = _strata.Engine(str(gguf), n_threads=1, max_ctx=64, settings=F32_CELLS)
    assert _rel(eng.eval(PROMPT), want[-1]) <= 1e-4


def test_draft_chain_equals_strata(trained_like: tuple[GlmMtpModel, Path]) -> None:
    model, gguf = trained_like
    eng = engine(gguf, n_threads=1, max_ctx=64, mtp_sink=0, mtp_window=2051, kv_type="f32")
    t = int(eng.eval(PROMPT).argmax())
    steps = 3
    logits, drafts = eng.mtp_draft(t, n_steps=steps)
    mtp = model.nextn
    with torch.no_grad():
        hn = model.model.norm(model.hidden(torch.tensor([PROMPT])))[0]
        states, toks = [*hn], [*PROMPT[1:], t]
        for j in range(steps):
            emb = model.model.embed_tokens(torch.tensor([toks]))
            y = mtp.step(emb, torch.stack(states)[None], model.rope, torch.arange(len(toks)))[0]
            s = mtp.shared_head.norm(y)
            want = model.lm_head(s[-1]).numpy()
            assert _rel(logits[j], want) <= 1e-4, j
            assert int(drafts[j]) == int(want.argmax()), j
            states.append(s[-1])
            toks.append(int(drafts[j]))


def test_trainer_runs_and_its_pieces_convert(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(0)
    rng.integers(0, 255, size=4000).astype(np.uint16).tofile(data / "train.bin")
    rng.integers(0, 255, size=600).astype(np.uint16).tofile(data / "heldout.bin")
    (data / "manifest.json").write_text(json.dumps({"dtype": "uint16"}))
    _tokenizer(data / "tokenizer.json")
    cfg = json.dumps({k: v for k, v in vars(replace(TINY, layers=2)).items()})
    report = train_main(["--data", str(data), "--out", str(tmp_path / "pack"), "--steps", "3", "--batch", "2",
                         "--seq", "32", "--eval-every", "2", "--eval-windows", "2", "--warmup", "1",
                         "--model-json", cfg, "--device", "cpu"])
    assert report["steps_run"] == 3 and len(report["evals"]) == 2
    assert all(np.isfinite(v) for v in report["final_heldout"].values())
    index = json.loads((tmp_path / "pack" / "pack_index.json").read_text())
    assert all((tmp_path / "pack" / p).stat().st_size <= PIECE_BYTES for p in index["pieces"])
    unpack(tmp_path / "pack", tmp_path / "hf", data / "tokenizer.json")
    gguf = convert_hf_dir(tmp_path / "hf", tmp_path / "m.gguf", weight_type="Q8_0")
    eng = _strata.Engine(str(gguf), n_threads=1, max_ctx=64)
    assert eng.has_mtp
    logits, drafts = eng.mtp_draft(int(eng.eval([1, 2, 3]).argmax()), n_steps=2)
    assert len(drafts) == 2 and np.isfinite(logits).all()


def _bench_module():  # bench/ is not a package: load the head-to-head script by path
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "bench" / "glm_mtp_vs_llama.py"
    spec = importlib.util.spec_from_file_location("glm_mtp_vs_llama", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_bench_strata_side_drafts_with_the_nextn_layer(trained_like: tuple[GlmMtpModel, Path]) -> None:
    """The head-to-head bench's strata runs on a glm4moe file with a nextn layer: plain and drafting
    give the same greedy text, drafting reports rounds, tokens and per-step acceptance."""
    import strata

    bench = _bench_module()
    _, gguf = trained_like
    model = strata.Model(str(gguf))
    prompt = "".join(chr(c) for c in b"abc abc abc abc")
    off = bench.run_strata(model, prompt, 1, 24, 0)
    on = bench.run_strata(model, prompt, 1, 24, 3)
    assert off.tokens == on.tokens == 23 and off.seconds > 0 and on.seconds > 0
    assert on.text == off.text and off.rounds == 0
    assert on.rounds > 0 and on.round_tokens >= on.rounds and len(on.acceptance) == 3
    assert on.drafted >= on.rounds and 0 <= on.accepted <= on.drafted
