"""The DeepSeek-V4 streaming benchmark: the random ``deepseek4`` model of V4-Flash's layer structure
(``strata.bench.ds4_model``, ``bench ds4-model``) and ``bench stream-vs-llama`` on it; a file strata's
engine refuses must give rows that say so, with llama.cpp still measured. (The speed figures are not
checked: benchmarks measure, never gate.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize

from strata.bench import llama_compare as lc
from strata.bench import stream_cgroup as sc
from strata.bench.ds4_model import Ds4Shape, make_ds4_model
from strata.cli.__main__ import main as cli_main
from strata.cli.bench_ds4_model_cmd import TINY


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_ds4_model(tmp_path_factory.mktemp("ds4") / "tiny.gguf", TINY, seed=0)


def _read(path: Path) -> tuple[dict[str, object], dict[str, object]]:
    reader = GGUFReader(str(path))
    fields = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    return fields, {t.name: t for t in reader.tensors}


def test_the_model_has_v4_flashs_layer_structure(tiny: Path) -> None:
    fields, tensors = _read(tiny)
    a = "deepseek4"
    assert fields["general.architecture"] == a and fields[f"{a}.block_count"] == 4
    assert fields[f"{a}.attention.compress_ratios"] == [0, 0, 4, 128]  # sliding, sliding, CSA, HCA
    assert fields[f"{a}.hash_layer_count"] == 1 and fields[f"{a}.nextn_predict_layers"] == 0
    assert fields[f"{a}.hyper_connection.count"] == 4 and fields[f"{a}.expert_gating_func"] == 4
    assert fields[f"{a}.swiglu_clamp_exp"] == [10.0] * 4
    assert "blk.1.attn_compressor_kv.weight" not in tensors
    assert "blk.2.indexer.attn_q_b.weight" in tensors and "blk.3.indexer.attn_q_b.weight" not in tensors
    assert "blk.3.attn_compressor_ape.weight" in tensors
    table = tensors["blk.0.ffn_gate_tid2eid.weight"]  # hash-routed: distinct valid experts per token
    ids = np.asarray(table.data).reshape(TINY.vocab, TINY.experts_used)
    assert ids.min() >= 0 and ids.max() < TINY.experts
    assert all(len(set(row)) == TINY.experts_used for row in ids.tolist())
    assert "blk.0.exp_probs_b.bias" not in tensors and "blk.1.exp_probs_b.bias" in tensors
    up = tensors["blk.1.ffn_up_exps.weight"]
    assert up.tensor_type == GGMLQuantizationType.Q8_0
    assert tensors["blk.1.hc_attn_fn.weight"].tensor_type == GGMLQuantizationType.F32
    # the weights' scale is N(0, 1/in), as the tests' random models that keep activations O(1)
    w = dequantize(np.asarray(up.data), GGMLQuantizationType.Q8_0)
    assert np.std(w) == pytest.approx(TINY.d**-0.5, rel=0.05)
    experts = sum(int(t.n_bytes) for n, t in tensors.items() if "_exps." in n)
    assert experts == TINY.expert_bytes()


def test_the_model_is_seeded(tiny: Path, tmp_path: Path) -> None:
    again = make_ds4_model(tmp_path / "again.gguf", TINY, seed=0)
    other = make_ds4_model(tmp_path / "other.gguf", TINY, seed=1)
    assert again.read_bytes() == tiny.read_bytes()
    assert other.read_bytes() != tiny.read_bytes() and other.stat().st_size == tiny.stat().st_size


def test_q4_0_and_the_default_size(tmp_path: Path) -> None:
    q4 = make_ds4_model(tmp_path / "q4.gguf", TINY.with_changes(expert_type="Q4_0"))
    _, tensors = _read(q4)
    up = tensors["blk.1.ffn_up_exps.weight"]
    assert up.tensor_type == GGMLQuantizationType.Q4_0
    w = dequantize(np.asarray(up.data), GGMLQuantizationType.Q4_0)
    assert np.std(w) == pytest.approx(TINY.d**-0.5, rel=0.05)
    # the benchmark's default: 2448 MiB of Q8_0 experts, 4x the expert cache at 25 % resident
    assert Ds4Shape().expert_bytes() == 2448 << 20


def test_shapes_llama_cpp_cannot_run_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="layers >= 4"):
        Ds4Shape(layers=3).check()
    with pytest.raises(ValueError, match="multiples of 32"):
        Ds4Shape(expert_ffn=100).check()
    assert cli_main(["bench", "ds4-model", "--layers", "2", "--out", str(tmp_path)]) == 2
    assert "layers >= 4" in capsys.readouterr().err
    assert cli_main(["bench", "ds4-model", "--tiny", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip().endswith(TINY.file_name(0))


def test_the_harness_reports_strata_refusing_a_file(tiny: Path, tmp_path: Path) -> None:
    """A file strata's engine refuses (here an architecture nobody knows: the tiny model renamed) gives a
    run that says why, not a crash."""
    unknown = tmp_path / "unknown.gguf"
    unknown.write_bytes(tiny.read_bytes().replace(b"deepseek4", b"deepseek9"))
    tokens = lc.prompt_tokens(12, TINY.vocab, seed=1)
    out = sc.child("strata", str(unknown), tokens, 1, 0.5, 0.0, 4)
    assert set(out) == {"error"} and out["error"].startswith(
        "strata refuses the file: general.architecture = 'deepseek9' is not supported"
    )
    run = sc.run_one("strata", unknown, tokens, 1, 1.0, 0.0, 4, None, 60)
    assert run.error.startswith("strata refuses the file") and run.tok_s == 0
    row = sc.render([run], "unlimited llama.cpp").splitlines()
    assert "change vs unlimited llama.cpp" in row[0] and "is not supported" in row[-1]


def test_the_child_reports_blocked_time_and_strata_stall(tmp_path: Path) -> None:
    model = lc.build_gguf(lc.TINY, tmp_path / "qwen.gguf", "Q8_0")
    tokens = lc.prompt_tokens(20, lc.TINY.vocab, seed=1)
    out = sc.child("strata", str(model), tokens, 1, 0.5, 0.0, 4)
    assert out["blocked_ms"] >= 0 and out["stall_ms"] is not None and out["stall_ms"] >= 0
    times = sc.thread_times()
    assert times is not None and times[0] > 0 and times[1] >= 0
    row = sc.render([sc.Run("strata", 0.5, 0.0, 300, 1.0, 2.0, 3.0)]).splitlines()[-1]
    assert row.endswith("| - | - |")  # blocked and stall unknown: shown as such, not as 0


@pytest.mark.llama
def test_llama_cpp_decodes_the_model_finitely(tiny: Path) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    llm = llama_cpp.Llama(model_path=str(tiny), n_ctx=512, logits_all=True, verbose=False, n_threads=1)
    tokens = lc.prompt_tokens(300, TINY.vocab, seed=3)  # past two HCA windows of 128
    llm.eval(tokens[:100])
    for t in tokens[100:]:
        llm.eval([t])
    logits = np.array(llm.scores[:300], dtype=np.float32)
    assert np.isfinite(logits).all() and 0.1 < float(logits.std()) < 100


@pytest.mark.llama
@pytest.mark.skipif(os.geteuid() != 0, reason="creating a memory cgroup needs root")
def test_stream_vs_llama_on_a_deepseek4_file(tiny: Path, tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    report = tmp_path / "runs.json"
    argv = ["bench", "stream-vs-llama", "--model", str(tiny), "--fractions", "0.5", "--tokens", "6",
            "--prompt", "4", "--threads", "1", "--timeout", "120", "--json", str(report)]
    assert cli_main(argv) == 0
    doc = json.loads(report.read_text())
    runs = doc["runs"]
    assert [(r["engine"], r["fraction"], r["moce"]) for r in runs] == [
        ("strata", 1.0, 0.0), ("llama.cpp", 1.0, 0.0), ("strata", 0.5, 0.0), ("strata", 0.5, 1.0),
        ("llama.cpp", 0.5, 0.0)]
    llama = [r for r in runs if r["engine"] == "llama.cpp"]
    assert all(not r["error"] and r["tok_s"] > 0 and r["blocked_ms"] >= 0 for r in llama)
    assert llama[1]["limit_mib"] > 0 and llama[1]["perplexity"] == pytest.approx(llama[0]["perplexity"])
    strata = [r for r in runs if r["engine"] == "strata"]
    if strata[0]["error"]:  # no deepseek4 in the engine: strata rows say so, llama.cpp is the reference
        assert doc["reference"] == "unlimited llama.cpp"
        assert all(r["error"].startswith("strata refuses the file") for r in strata)
    else:  # the engine runs deepseek4: strata rows measured against unlimited strata
        assert doc["reference"] == "unlimited strata"
        assert all(not r["error"] and r["tok_s"] > 0 and r["stall_ms"] is not None for r in strata)
