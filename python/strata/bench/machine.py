"""Facts about the machine and the process that a speed figure needs beside it.

- the CPU model (``/proc/cpuinfo``), the ISA path strata's kernels run (``strata.build_info``), the
  last-level cache size (sysfs ``cache/index*/size``, the highest level);
- the measured memory read bandwidth per thread count (``strata.quant.read_bandwidth``: one streaming
  pass over a buffer 8x the last-level cache, at least 512 MiB);
- the process's context switches (``getrusage(RUSAGE_SELF)``: voluntary + involuntary, every thread
  of the process, ended ones included) and CPU time, so a run reports switches per token and busy
  CPUs (CPU seconds / wall seconds);
- the weight bytes one decode token reads from a ``qwen3moe`` GGUF (every tensor but the embedding, whose
  one row is negligible, with the 3-D expert tensors counted at ``experts_used / experts``);
- the K/V bytes one decode token reads: every layer's cached keys and values of the cells it attends
  (all earlier positions and its own), which a long prompt adds to the weights' bytes.
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass
from pathlib import Path

_SYS_CPU = Path("/sys/devices/system/cpu")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(("model name", "Model name")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def _size_bytes(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * scale


def llc_bytes(sys_cpu: Path = _SYS_CPU) -> int:
    """Size of cpu0's highest cache level (sysfs); 0 when the kernel does not say."""
    best_level, best = -1, 0
    for index in sorted((sys_cpu / "cpu0" / "cache").glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = _size_bytes((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind in ("Unified", "Data") and level > best_level:
            best_level, best = level, size
    return best


def active_isa() -> str:
    import strata

    return str(strata.build_info()["active_isa"])


def read_bandwidth_gbs(threads: int, llc: int, reps: int = 3) -> float:
    """Best-of-reps streaming read rate in GB/s over a buffer far larger than the cache."""
    from strata.quant import read_bandwidth

    return read_bandwidth(max(512 << 20, 8 * llc), threads, reps)


def _usage() -> tuple[int, float]:
    """(context switches, CPU seconds) of the whole process so far."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return int(u.ru_nvcsw + u.ru_nivcsw), float(u.ru_utime + u.ru_stime)


@dataclass
class Counters:
    """Context switches and CPU time of this process between start() and stop()."""

    switches: int = 0
    cpu_s: float = 0.0
    wall_s: float = 0.0

    def busy_cpus(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0


class ProcessMeter:
    def __init__(self) -> None:
        self._switches = 0
        self._cpu = 0.0
        self._wall = 0.0

    def start(self) -> None:
        self._switches, self._cpu = _usage()
        self._wall = time.perf_counter()

    def stop(self) -> Counters:
        wall = time.perf_counter() - self._wall
        switches, cpu = _usage()
        return Counters(switches=switches - self._switches, cpu_s=cpu - self._cpu, wall_s=wall)


def decode_bytes_per_token(path: Path) -> int:
    """Weight bytes a decode token reads from this qwen3moe GGUF (see the module docstring)."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    arch = str(bytes(reader.fields["general.architecture"].parts[-1]), "utf-8")

    def scalar(key: str) -> int:
        return int(reader.fields[f"{arch}.{key}"].parts[-1][0])

    experts, used = scalar("expert_count"), scalar("expert_used_count")
    total = 0
    for t in reader.tensors:
        if t.name == "token_embd.weight":
            continue
        n = int(t.n_bytes)
        total += n * used // experts if "_exps." in t.name else n
    return total


def kv_bytes_per_token(path: Path, n_prompt: int, n_decode: int, bytes_per_value: int) -> int:
    """K/V bytes a decode step reads on average over `n_decode` steps after an `n_prompt`-token prompt, each
    layer's cells stored at `bytes_per_value` (4 for f32, 2 for f16): step i attends the n_prompt + i + 1
    cells up to its own, so the mean is n_prompt + (n_decode + 1) / 2 cells, each of layers x kv_heads
    keys and values of key_length (the cell shape of the engine's own reading of the file)."""
    from strata import _strata

    hp = _strata.inspect_model(str(path))["hparams"]
    per_cell = int(hp["layers"]) * int(hp["head_count_kv"]) * 2 * int(hp["key_length"]) * bytes_per_value
    return round(per_cell * (n_prompt + (n_decode + 1) / 2))
