"""strata vs llama.cpp on the same converted Qwen3-MoE GGUF (strata.bench.llama_compare).

The tests marked ``llama`` need llama-cpp-python (a source build of llama.cpp) and are excluded from the
default run (pyproject: ``-m 'not slow and not llama'``); run them with ``pytest -m llama``. The rest
check the benchmark's own pieces (random models, agreement metrics, the CLI) without llama.cpp.

Tolerances, with llama.cpp's logits as the reference and std = their standard deviation:
- F32 weights: the same math in f32 by two implementations; max |Δ| / std < 1e-4, the same argmax at
  every position, KL < 1e-9 (measured here: 3e-6, 100%, 1e-13).
- Q8_0 weights: both engines quantize activations to q8_0 before each matrix product, so an f32
  rounding difference upstream can flip one int8 step; max |Δ| / std < 0.05, argmax at >= 90% of the
  positions, mean KL < 1e-3 (measured here on x86: bitwise equal logits).
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from strata import _strata
from strata.bench import llama_compare as lc
from strata.cli.__main__ import main as cli_main
from strata.convert import byte_level_tokenizer, convert_qwen3moe

VOCAB = 512
PROMPT = [int(t) for t in np.random.default_rng(7).integers(0, 257, 32)]


def _hf_model(seed: int = 0) -> Any:
    import torch
    import transformers

    torch.set_num_threads(1)  # tiny tensors; the machine's cores are shared
    cfg = transformers.Qwen3MoeConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=8,
        num_experts_per_tok=2, norm_topk_prob=True, max_position_embeddings=512, rms_norm_eps=1e-6,
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


def _strata_logits(path: Path) -> np.ndarray:
    # f32 cells, as llama.cpp's runner here is asked for: logits equal to float rounding.
    return lc.StrataRunner(path, n_threads=1, n_ctx=64, kv="f32").all_logits(PROMPT)


# --- without llama.cpp -------------------------------------------------------------------------


def test_agreement_metrics() -> None:
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((6, 50)).astype(np.float32)
    same = lc.logit_agreement(ref, ref)
    assert same.max_abs_diff == 0 and same.top1_agreement == 1.0
    assert same.max_kl == pytest.approx(0, abs=1e-12)
    shifted = lc.logit_agreement(ref, ref + 3.0)  # softmax ignores a constant shift
    assert shifted.max_abs_diff == pytest.approx(3.0, rel=1e-6)
    assert shifted.max_abs_diff_rel == pytest.approx(3.0 / ref.astype(np.float64).std(), rel=1e-6)
    assert shifted.mean_kl == pytest.approx(0, abs=1e-9) and shifted.top1_agreement == 1.0
    other = ref.copy()
    top = ref[0].argmax()
    other[0, top] = ref[0].min() - 1  # row 0 now has another argmax
    moved = lc.logit_agreement(ref, other)
    assert moved.top1_agreement == pytest.approx(5 / 6)
    assert moved.max_kl > 0 and moved.max_kl == pytest.approx(
        lc.logit_agreement(ref[:1], other[:1]).max_kl)
    with pytest.raises(ValueError, match="positions, vocab"):
        lc.logit_agreement(ref, ref[:, :10])


def test_random_model_is_seeded_and_runs(tmp_path: Path) -> None:
    a = lc.build_gguf(lc.TINY, tmp_path / "a.gguf", "Q8_0", seed=3)
    b = lc.build_gguf(lc.TINY, tmp_path / "b.gguf", "Q8_0", seed=3)
    c = lc.build_gguf(lc.TINY, tmp_path / "c.gguf", "Q8_0", seed=4)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    hp = _strata.Engine(str(a), n_threads=1, max_ctx=64).hparams
    assert (hp["arch"], hp["embedding_length"], hp["expert_count"]) == ("qwen3moe", 64, 8)
    auto = "f16" if "avx2" in _strata.supported_isas() else "f32"
    assert hp["vocab_size"] == 512 and hp["kv_type"] == auto
    logits = _strata_logits(a)
    assert logits.shape == (len(PROMPT), 512) and np.isfinite(logits).all()
    assert 0.5 < logits.std() < 2.0  # the N(0, 1/fan_in) weights keep activations O(1)
    # the parameter count formula matches the tensors written
    assert lc.TINY.params() == sum(
        int(np.prod(t.shape)) for t in gguf.GGUFReader(str(a)).tensors)


def test_bench_llama_is_a_cli_tool(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli_main(["bench", "llama", "--help"])
    assert exc.value.code == 0
    assert "--threads" in capsys.readouterr().out


def _saved_run(path: Path, prompt: int, with_kv: bool) -> None:
    """A ``bench llama --json`` file as run() writes it; without the K/V fields when `with_kv` is false (a
    file from before they existed)."""
    agreement = lc.logit_agreement([[0.0, 1.0, 2.0]], [[0.0, 1.0, 2.1]])
    rows = [lc.SpeedRow(threads=t, strata_prefill=300.0 * t, llama_prefill=100.0 * t, strata_decode=40.0 * t,
                        llama_decode=20.0 * t, greedy_agree=33, strata_runs={"decode_s": [0.8]},
                        llama_runs={"decode_s": [1.6]}, read_bandwidth_gbs=12.0 * t,
                        bytes_per_token=265_000_000, strata_kv_bytes_per_token=26_000_000,
                        llama_kv_bytes_per_token=26_000_000)
            for t in (1, 2)]
    report = asdict(lc.ModelReport(model="small Q8_0", path="x.gguf", file_mib=1358.0, shape=None,
                                      agreement=agreement, speed=rows, strata_kv="f32", llama_kv="f32"))
    if not with_kv:
        del report["strata_kv"], report["llama_kv"]
        for row in report["speed"]:
            del row["strata_kv_bytes_per_token"], row["llama_kv_bytes_per_token"]
    doc = {"machine": {"cpu": "Test CPU"}, "settings": {"prompt": prompt, "decode": 32}, "models": [report]}
    path.write_text(json.dumps(doc), encoding="utf-8")


def test_from_json_replays_the_tables_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    new, old = tmp_path / "p512.json", tmp_path / "p128-old.json"
    _saved_run(new, 512, with_kv=True)
    _saved_run(old, 128, with_kv=False)
    settings, reports = lc.load_report(new)
    assert settings["prompt"] == 512 and settings["cpu"] == "Test CPU"
    row = reports[0].speed[1]
    assert row.strata_decode == 80.0 and row.strata_kv_bytes_per_token == 26_000_000
    assert lc.load_report(old)[1][0].speed[0].strata_kv_bytes_per_token == 0  # the field's default
    assert (reports[0].strata_kv, reports[0].llama_kv) == ("f32", "f32")
    assert (lc.load_report(old)[1][0].strata_kv, lc.load_report(old)[1][0].llama_kv) == ("", "")

    png = tmp_path / "out.png"
    argv = ["bench", "llama", "--from-json", str(new), "--from-json", str(old), "--plot", str(png)]
    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    # one table set per prompt length, each with that run's rows: 128 first
    assert out.index("prefill: 128 tokens") < out.index("prefill: 512 tokens")
    # the cell types where the file has them, nothing where it predates them
    assert out.count("small Q8_0: 1358 MiB; K/V cells strata f32, llama.cpp f32") == 1
    assert out.count("small Q8_0: 1358 MiB\n") == 1
    floor_512 = out.split("prefill: 512 tokens")[1].split("decode against the bandwidth floor")[1]
    cells = floor_512.splitlines()[3].split()  # small Q8_0, 1 thread: 265 MB x 40 tok/s / 12 GB/s
    assert cells[:6] == ["small", "Q8_0", "1", "265", "12.0", "88%"]
    assert cells[7:9] == ["26.0", "97%"]  # + 26 MB of K/V per token
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_from_json_refuses_a_file_that_is_not_a_report(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"models": [{"model": "x"}]}), encoding="utf-8")
    assert cli_main(["bench", "llama", "--from-json", str(bad)]) == 1
    assert "not a bench llama --json file" in capsys.readouterr().err
    assert cli_main(["bench", "llama", "--from-json", str(tmp_path / "missing.json")]) == 1


# --- with llama.cpp ----------------------------------------------------------------------------

llama = pytest.mark.llama


def _llama_logits(path: Path) -> np.ndarray:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail("the llama tests need llama-cpp-python (pip install llama-cpp-python)")
    return lc.LlamaRunner(path, n_threads=1, n_ctx=64, logits_all=True, kv="f32").all_logits(PROMPT)


@llama
def test_llama_cpp_agrees_with_strata_f32(tmp_path: Path) -> None:
    model = _hf_model()
    path = convert_qwen3moe(model, tmp_path / "f32.gguf", tokenizer=byte_level_tokenizer(VOCAB),
                            weight_type="F32")
    ref, ours = _llama_logits(path), _strata_logits(path)
    a = lc.logit_agreement(ref, ours)
    assert a.max_abs_diff_rel < 1e-4, a
    assert a.top1_agreement == 1.0, a
    assert a.max_kl < 1e-9, a
    import torch

    with torch.no_grad():  # and both are the Hugging Face model
        hf = model(torch.tensor([PROMPT])).logits[0].numpy()
    assert lc.logit_agreement(hf, ref).max_abs_diff_rel < 1e-4


@llama
def test_llama_cpp_agrees_with_strata_q8_0(tmp_path: Path) -> None:
    path = convert_qwen3moe(_hf_model(1), tmp_path / "q8.gguf", tokenizer=byte_level_tokenizer(VOCAB),
                            weight_type="Q8_0")
    a = lc.logit_agreement(_llama_logits(path), _strata_logits(path))
    assert a.max_abs_diff_rel < 0.05, a
    assert a.top1_agreement >= 0.9, a
    assert a.mean_kl < 1e-3, a


@llama
def test_compare_model_reports_both_engines(tmp_path: Path) -> None:
    path = lc.build_gguf(lc.TINY, tmp_path / "tiny.gguf", "Q8_0")
    r = lc.compare_model(path, "tiny", lc.TINY, threads=[1], n_prompt=8, n_decode=3, n_agree=8, repeats=1,
                         seed=0, kv="f32", log=lambda _: None, strata_kv="f32")
    assert r.agreement.positions == 8 and r.agreement.max_abs_diff_rel < 0.05
    assert (r.strata_kv, r.llama_kv) == ("f32", "f32")
    # Each engine's default cells (bench llama's --kv auto): strata's auto, llama.cpp's f16, the K/V bytes
    # at each one's own type. fp16 rounding (llama.cpp also rounds Q to fp16 for its K·Q) moves single
    # logits by up to ~0.1 of their spread here, not the distributions.
    d = lc.compare_model(path, "tiny", lc.TINY, threads=[1], n_prompt=8, n_decode=3, n_agree=8, repeats=1,
                         seed=0, kv="auto", log=lambda _: None)
    auto = "f16" if "avx2" in _strata.supported_isas() else "f32"
    assert (d.strata_kv, d.llama_kv) == (auto, "f16")
    assert d.agreement.mean_kl < 1e-3 and d.agreement.top1_agreement >= 0.875, d.agreement
    ratio = 1 if auto == "f16" else 2
    assert d.speed[0].strata_kv_bytes_per_token == d.speed[0].llama_kv_bytes_per_token * ratio
    assert r.speed[0].strata_kv_bytes_per_token == 2 * d.speed[0].llama_kv_bytes_per_token > 0
    (row,) = r.speed
    assert row.threads == 1
    assert min(row.strata_prefill, row.llama_prefill, row.strata_decode, row.llama_decode) > 0
    assert 0 <= row.greedy_agree <= 4
    text = lc.render([r], 8, 3, markdown=True)
    assert "| tiny | 1 |" in text and "max \\|Δ\\| / std" in text  # pipes in a cell escaped


def test_preflight_turns_a_crashing_child_into_a_message(tmp_path: Path) -> None:
    # What a fault inside llama.cpp does to the process that runs it (session 23: its AMX kernels).
    crash = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    msg = lc.llama_preflight(tmp_path / "m.gguf", 1, script=crash)
    assert msg is not None and "SIGSEGV" in msg and "m.gguf" in msg
    raised = "raise RuntimeError('failed to load model')"
    msg = lc.llama_preflight(tmp_path / "m.gguf", 1, script=raised)
    assert msg is not None and "exit 1" in msg and "failed to load model" in msg
    assert lc.llama_preflight(tmp_path / "m.gguf", 1, script="pass") is None
    msg = lc.llama_preflight(tmp_path / "m.gguf", 1, script="import time; time.sleep(30)", timeout_s=0.5)
    assert msg is not None and "within" in msg


@llama
def test_preflight_passes_on_a_model_llama_cpp_runs(tmp_path: Path) -> None:
    path = convert_qwen3moe(_hf_model(2), tmp_path / "q8.gguf", tokenizer=byte_level_tokenizer(VOCAB),
                            weight_type="Q8_0")
    assert lc.llama_preflight(path, 1, "f16") is None


def test_thread_scaling_is_reported_against_one_thread() -> None:
    agreement = lc.logit_agreement([[0.0, 1.0, 2.0]], [[0.0, 1.0, 2.1]])

    def row(t: int, strata: float, llama: float, bw: float) -> lc.SpeedRow:
        return lc.SpeedRow(threads=t, strata_prefill=100.0 * t, llama_prefill=60.0, strata_decode=strata,
                           llama_decode=llama, greedy_agree=33, strata_runs={}, llama_runs={},
                           read_bandwidth_gbs=bw, bytes_per_token=1)

    def report(name: str, rows: list[lc.SpeedRow]) -> lc.ModelReport:
        return lc.ModelReport(model=name, path="x.gguf", file_mib=1.0, shape=None, agreement=agreement,
                              speed=rows)

    both = report("small Q4_0", [row(1, 100.0, 60.0, 20.0), row(2, 153.0, 90.0, 32.0)])
    no_one = report("small Q8_0", [row(2, 90.0, 70.0, 33.0)])
    assert lc.scaling_rows([both, no_one]) == [
        ["small Q4_0", "2", "1.53x", "1.50x", "1.60x", "2.00x", "1.00x"]]
    text = lc.render([both, no_one], 128, 32, markdown=True)
    assert "| small Q4_0 | 2 | 1.53x | 1.50x | 1.60x | 2.00x | 1.00x |" in text
    assert "thread scaling" in text
    assert "thread scaling" not in lc.render([no_one], 128, 32, markdown=False)
