"""``bench experts`` and its generated model, on shapes small enough to run in seconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine_args import engine
from strata import _strata
from strata.bench import experts as eb
from strata.bench.expert_model import ExpertModelShape, make_expert_model
from strata.gguf import GGUFFile

PYTHON_DIR = str(Path(__file__).resolve().parents[2] / "python")
SMALL = ExpertModelShape(layers=2, d=128, experts=16, experts_used=4, expert_ffn=128, shared_ffn=64, heads=2,
                         head_dim=64, vocab=300)


@pytest.fixture(scope="module")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_expert_model(tmp_path_factory.mktemp("bench") / "small.gguf", SMALL, seed=3)


def test_generated_model_is_valid_and_streams_exactly(small_model: Path) -> None:
    f = GGUFFile(small_model)
    gate = f.tensor("blk.0.ffn_gate_exps.weight")
    assert gate.type == "Q8_0" and gate.numpy_shape == (16, 128, 128)
    experts = sum(t.nbytes for t in f.tensors if t.name.endswith("_exps.weight"))
    assert experts == SMALL.expert_bytes()
    # Q8_0 blocks: the fp16 scale is the same everywhere, the quants vary.
    raw = f.tensor_bytes("blk.1.ffn_down_exps.weight").reshape(-1, 34)
    assert len(np.unique(raw[:, :2], axis=0)) == 1 and raw[:, 2:].std() > 50
    prompt = list(range(1, 40))
    a = _strata.Engine(str(small_model), n_threads=2, max_ctx=64).eval(prompt, logits="all")
    b = engine(small_model, n_threads=2, max_ctx=64, expert_mode="stream", expert_cache=0.2).eval(prompt,
                                                                                                 logits="all")
    assert np.isfinite(a).all() and a.std() > 0.1
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    assert ExpertModelShape.for_size(3.0).expert_bytes() == pytest.approx(3e9, rel=0.15)


def test_bench_report(small_model: Path) -> None:
    cfg = eb.BenchConfig(fractions=(0.1, 0.5, 1.0), moce=(eb.MoceSetting(), eb.MoceSetting(2.0)), tokens=16,
                         prompt=4, n_threads=2, io_threads=2, prefetch="off")
    report = eb.run_bench(small_model, cfg)
    assert [r.mode for r in report.runs] == ["mmap"] + ["stream"] * 6
    off = [r for r in report.runs if r.moce == "off"]
    # MOCE off: the logits do not depend on the cache, so neither does the perplexity.
    assert len({r.ppl for r in off}) == 1
    assert all(r.tokens == 16 for r in report.runs)
    small, full = report.run(0.1, "off"), report.run(1.0, "off")
    assert small is not None and full is not None
    assert small.misses > full.misses and small.bytes_per_token > full.bytes_per_token
    for r in report.runs:
        assert 0.0 <= r.miss_rate <= 1.0 and r.tok_s > 0 and r.ppl > 1.0
        if r.mode == "stream":  # without prefetch every read is a miss's
            assert r.bytes_per_token == pytest.approx(r.misses * SMALL.expert_bytes() / (3 * 16) / r.tokens)
    summary = report.summary()
    assert [(s["fraction"], s["moce"]) for s in summary] == [(0.1, "λ=2"), (0.5, "λ=2"), (1.0, "λ=2")]
    text = eb.markdown(report, "cmd")
    assert "| stream | 10% (5) | off |" in text and "MOCE against plain routing" in text
    json.dumps(report.as_dict())


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # conftest.py sets PYTHONPATH to reach the strata under test (installed or dev build).
    return subprocess.run([sys.executable, "-m", "strata.cli", "bench", "experts", *args],
                          capture_output=True, text=True, env=env, timeout=300, check=False)


def test_cli(small_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    md = tmp_path / "r.md"
    proc = _cli("--model", str(small_model), "--tokens", "6", "--prompt", "3", "--fractions", "0.25,1",
                "--bonus", "1", "--threads", "2", "--no-mmap", "--json", str(out), "--markdown", str(md))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert len(data["runs"]) == 4 and data["config"]["moce"] == ["off", "λ=1"]
    assert "bench experts --model" in md.read_text()
    bad = _cli()
    assert bad.returncode == 2 and "--model" in bad.stderr
