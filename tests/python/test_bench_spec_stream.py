"""bench spec-speed and bench stream-vs-llama, measured small: the tables they print and the numbers
their cases carry (the speed figures themselves are not checked: benchmarks measure, never gate)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

import strata
from strata.bench import llama_compare as lc
from strata.bench import spec_speed
from strata.bench import stream_cgroup as sc


def test_spec_speed_case_on_the_demo() -> None:
    model = strata.Model()
    case = spec_speed.run_case(model, 0.0, 1, "mmap", modes=["off", "auto", "on"], runs=2, max_tokens=24,
                               draft_steps=3)
    assert case.same_text is True
    assert all(len(r.tok_s) == 2 and r.median > 0 for r in case.modes.values())
    assert case.speedup("off") == pytest.approx(1.0)
    assert sum(case.modes["on"].draft_counts) > 0 and case.modes["off"].draft_counts == []
    table = spec_speed.render([case])
    assert table.count("\n") == 4 and "| mmap | 0 | 1 | auto |" in table
    doc = spec_speed.as_json([case])
    assert doc[0]["same_text"] is True and "text" not in doc[0]["modes"]["off"]


def test_store_config_strings() -> None:
    assert spec_speed._store_config("mmap") == {"expert_mode": "mmap"}
    assert spec_speed._store_config("stream 25% direct") == {
        "expert_mode": "stream", "expert_cache": "25%", "expert_direct_io": "on"}
    assert spec_speed._store_config("stream 50%")["expert_direct_io"] == "off"
    assert spec_speed._store_config("stream 25% direct prefetch=off") == {
        "expert_mode": "stream", "expert_cache": "25%", "expert_direct_io": "on", "expert_prefetch": "off"}
    for bad in ("stream", "disk 25%", "stream 25% fast"):
        with pytest.raises(ValueError):
            spec_speed._store_config(bad)


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return lc.build_gguf(lc.TINY, tmp_path_factory.mktemp("q") / "tiny.gguf", "Q8_0")


def test_stream_child_measures_strata(qwen: Path) -> None:
    tokens = lc.prompt_tokens(20, lc.TINY.vocab, seed=1)
    full = sc.child("strata", str(qwen), tokens, 1, 1.0, 0.0, 4)
    part = sc.child("strata", str(qwen), tokens, 1, 0.5, 0.0, 4)
    assert full["decoded"] == part["decoded"] == 15
    assert math.isfinite(full["perplexity"]) and full["perplexity"] > 1
    # MOCE off: streaming changes what is read, never the logits.
    assert part["perplexity"] == pytest.approx(full["perplexity"], rel=1e-9)
    assert part["mib_per_token"] >= 0 and full["tok_s"] > 0
    experts, other = sc.expert_split(qwen)
    assert experts > 0 and other > 0 and experts + other == qwen.stat().st_size


def test_stream_render_and_errors() -> None:
    runs = [sc.Run("strata", 0.25, 0.0, 500, 10.0, 2.5, 3.0, 0.0),
            sc.Run("llama.cpp", 0.25, 0.0, 500, error="no result within 60 s (thrashing)")]
    table = sc.render(runs)
    assert "| strata | 25% | 0 | 500 | 10.00 | 2.5 | 3.0000 | +0.00% |" in table
    assert "thrashing" in table.splitlines()[-1]


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a memory cgroup needs root")
def test_cgroup_limits_a_child(qwen: Path) -> None:
    try:
        group = sc.make_cgroup(f"strata-test-{os.getpid()}", 512 << 20)
    except sc.CgroupUnavailable as e:
        pytest.skip(str(e))
    try:
        limit_file = "memory.limit_in_bytes" if group.version == 1 else "memory.max"
        assert int((group.path / limit_file).read_text()) == 512 << 20
    finally:
        group.remove()
    assert not group.path.exists()
    tokens = lc.prompt_tokens(12, lc.TINY.vocab, seed=2)
    run = sc.run_one("strata", qwen, tokens, 1, 0.5, 0.0, 4, 400 << 20, 120)
    assert not run.error and run.tok_s > 0
