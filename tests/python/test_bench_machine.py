"""strata.bench.machine: what `bench llama` prints beside its figures — the last-level cache read from
sysfs, context switches and busy CPUs of the process, and the weight bytes a decode token reads."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import gguf

from strata.bench import llama_compare as lc
from strata.bench import machine


def _cache(root: Path, index: int, level: int, kind: str, size: str) -> None:
    d = root / "cpu0" / "cache" / f"index{index}"
    d.mkdir(parents=True)
    (d / "level").write_text(f"{level}\n")
    (d / "type").write_text(f"{kind}\n")
    (d / "size").write_text(f"{size}\n")


def test_llc_is_the_highest_data_level(tmp_path: Path) -> None:
    _cache(tmp_path, 0, 1, "Data", "48K")
    _cache(tmp_path, 1, 1, "Instruction", "32K")
    _cache(tmp_path, 2, 2, "Unified", "2048K")
    _cache(tmp_path, 3, 3, "Unified", "32768K")
    assert machine.llc_bytes(tmp_path) == 32 << 20
    assert machine.llc_bytes(tmp_path / "nowhere") == 0


def test_llc_of_this_machine_is_plausible() -> None:
    llc = machine.llc_bytes()
    assert llc == 0 or (1 << 18) <= llc <= (4 << 30)


def test_meter_counts_switches_and_cpu_time() -> None:
    meter = machine.ProcessMeter()
    meter.start()

    def sleeper() -> None:
        for _ in range(20):
            time.sleep(0.001)  # each sleep is a voluntary context switch of this thread

    t = threading.Thread(target=sleeper)
    t.start()
    end = time.perf_counter() + 0.05
    while time.perf_counter() < end:  # keep this thread busy
        pass
    t.join()
    c = meter.stop()
    assert c.switches >= 20
    assert c.wall_s >= 0.05
    assert 0.0 < c.busy_cpus() <= 4.0


def test_decode_bytes_per_token_counts_k_of_e_experts(tmp_path: Path) -> None:
    path = lc.build_gguf(lc.TINY, tmp_path / "tiny.gguf", "Q8_0", seed=1)
    reader = gguf.GGUFReader(str(path))
    dense = sum(int(t.n_bytes) for t in reader.tensors
                if "_exps." not in t.name and t.name != "token_embd.weight")
    experts = sum(int(t.n_bytes) for t in reader.tensors if "_exps." in t.name)
    s = lc.TINY
    assert experts > 0 and dense > 0
    assert machine.decode_bytes_per_token(path) == dense + experts * s.experts_used // s.experts


def test_kv_bytes_per_token_counts_every_attended_cell(tmp_path: Path) -> None:
    path = lc.build_gguf(lc.TINY, tmp_path / "tiny.gguf", "Q8_0", seed=1)
    s = lc.TINY
    per_cell_f32 = s.layers * s.kv_heads * 2 * s.head_dim * 4
    # 10 prompt cells, then decode steps attending 11, 12, 13 cells: 12 on average
    assert machine.kv_bytes_per_token(path, 10, 3, 4) == per_cell_f32 * 12
    assert machine.kv_bytes_per_token(path, 10, 3, 2) == per_cell_f32 * 6
    assert machine.kv_bytes_per_token(path, 100, 2, 4) == round(per_cell_f32 * 101.5)


def test_report_has_the_floor_table() -> None:
    agreement = lc.logit_agreement([[0.0, 1.0]], [[0.0, 1.0]])
    row = lc.SpeedRow(threads=2, strata_prefill=100.0, llama_prefill=50.0, strata_decode=20.0,
                      llama_decode=10.0, greedy_agree=3, strata_runs={}, llama_runs={},
                      strata_switches_per_token=1.5,
                      llama_switches_per_token=0.25, strata_busy_cpus=1.9, llama_busy_cpus=1.98,
                      read_bandwidth_gbs=10.0, bytes_per_token=250_000_000,
                      strata_kv_bytes_per_token=50_000_000, llama_kv_bytes_per_token=20_000_000)
    assert row.bandwidth_fraction(20.0) == 0.5
    assert row.bandwidth_fraction(20.0, row.strata_kv_bytes_per_token) == 0.6
    report = lc.ModelReport(model="small Q8_0", path="x.gguf", file_mib=1.0, shape=None, agreement=agreement,
                            speed=[row])
    text = lc.render([report], 128, 32, markdown=False)
    floor = text.split("decode against the bandwidth floor")[1]
    cells = floor.splitlines()[3].split()
    assert cells[:4] == ["small", "Q8_0", "2", "250"]
    assert cells[4:7] == ["10.0", "50%", "25%"]
    assert cells[7:10] == ["50.0", "/", "20.0"]  # K/V MB per token, strata / llama.cpp (cell types differ)
    assert cells[10:] == ["60%", "27%", "1.5", "0.2", "1.90", "1.98"]


def test_machine_info_names_cpu_isa_and_llc() -> None:
    info = lc.machine_info()
    assert info["cpu"] and info["isa"]
    assert info["llc_bytes"] == machine.llc_bytes()
