"""strata expert streaming against llama.cpp's mmap under the same memory cgroup limit.

One ``qwen3moe`` GGUF (both engines load it; by default a random one sized like a small real MoE,
``strata.bench.llama_compare``) is decoded teacher-forced, one token per call, over a fixed token
sequence by each engine in a child process placed in a memory cgroup whose limit is

    limit = non-expert bytes of the file + fraction × expert bytes + slack

(the same for both engines). strata runs its bounded expert store (stream mode, direct I/O, the
resident set = fraction of all experts, optionally MOCE λ); llama.cpp maps the file and leaves paging
to the kernel (its default ``use_mmap``), so under the limit it can keep about the same bytes of
experts in the page cache. Each child reports decode tok/s, MiB read from storage per token (the
process's ``/proc/self/io`` ``read_bytes`` over the decode: direct reads, buffered reads and page
faults alike), the decoding thread's blocked time per token (wall time neither on a CPU nor waiting
for one, from ``/proc/self/task/<tid>/schedstat``: page faults and reads it waited on; meaningful with
one thread, where the engines compute on the calling thread), strata's own expert stall (time its
compute waited for expert reads) and the perplexity of the sequence; the report gives each engine's
perplexity change against an unlimited reference run. Before each run the file is dropped from the
page cache. A file strata's engine refuses (e.g. ``deepseek4`` before its forward exists) gives strata
rows that say why, and the llama.cpp rows still run.

cgroup v1 (``/sys/fs/cgroup/memory``) and v2 (``memory.max``) are supported; creating a cgroup needs
root (or a delegated subtree). When it cannot, :func:`make_cgroup` raises ``CgroupUnavailable`` with
the reason and the command says so instead of measuring without a limit.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

MIB = 1 << 20
SLACK_BYTES = 256 * MIB  # the Python interpreter, numpy, the engine's KV cells and scratch


class CgroupUnavailable(RuntimeError):
    pass


@dataclass
class Cgroup:
    path: Path
    version: int

    def add_self(self) -> None:
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self) -> None:
        try:
            self.path.rmdir()
        except OSError:
            pass


def _own_cgroup(controller: str) -> str:
    """This process's cgroup path for `controller` (v1), or its unified path ("" controller, v2)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, rel = line.split(":", 2)
        if (controller and controller in controllers.split(",")) or (not controller and controllers == ""):
            return rel.lstrip("/")
    return ""


def make_cgroup(name: str, limit_bytes: int) -> Cgroup:
    """A memory cgroup below this process's own, limited to limit_bytes (swap limited too where possible)."""
    v1 = Path("/sys/fs/cgroup/memory")
    if (v1 / "memory.limit_in_bytes").exists():
        path, version = v1 / _own_cgroup("memory") / name, 1
        limit_file, swap_file = "memory.limit_in_bytes", "memory.memsw.limit_in_bytes"
    elif (Path("/sys/fs/cgroup") / "cgroup.controllers").exists():
        path, version = Path("/sys/fs/cgroup") / _own_cgroup("") / name, 2
        limit_file, swap_file = "memory.max", "memory.swap.max"
    else:
        raise CgroupUnavailable("no cgroup memory controller (neither v1 /sys/fs/cgroup/memory nor v2)")
    try:
        path.mkdir(exist_ok=True)
        (path / limit_file).write_text(str(limit_bytes))
    except OSError as e:
        raise CgroupUnavailable(f"cannot create the memory cgroup {path} ({e.strerror}); run as root or in a "
                                "delegated cgroup subtree") from None
    try:
        (path / swap_file).write_text(str(limit_bytes) if version == 1 else "0")
    except OSError:
        pass  # swap accounting off: the limit still bounds resident memory and page cache
    return Cgroup(path, version)


def evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read_bytes() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return 0


def thread_times() -> tuple[float, float] | None:
    """(seconds on a CPU, seconds runnable but waiting for one) of the calling process's main thread,
    or None where the kernel does not say (no /proc schedstat)."""
    try:
        fields = Path(f"/proc/self/task/{os.getpid()}/schedstat").read_text().split()
        return int(fields[0]) / 1e9, int(fields[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def expert_split(path: Path) -> tuple[int, int]:
    """(expert bytes, other bytes) of a GGUF file."""
    from strata.gguf import GGUFFile

    g = GGUFFile(str(path))
    experts = sum(t.nbytes for t in g.tensors if "_exps." in t.name)
    return experts, path.stat().st_size - experts


# ---------------------------------------------------------------------------------------------
# The child: one engine, teacher-forced decode
# ---------------------------------------------------------------------------------------------


def _nll(logits: np.ndarray, target: int) -> float:
    x = logits.astype(np.float64)
    m = float(x.max())
    return float(m + math.log(float(np.exp(x - m).sum())) - x[target])


def child(engine: str, model: str, tokens: Sequence[int], threads: int, fraction: float, moce: float,
          prompt: int) -> dict[str, Any]:
    """Prefill `prompt` tokens, then decode the rest one per call; return the measurements, or
    ``{"error": why}`` when strata's engine refuses the file."""
    stall: Any = None
    if engine == "strata":
        from strata import Config, _strata

        stream = fraction < 1
        cfg = Config(threads=threads, expert_mode="stream" if stream else "mmap",
                     expert_cache=f"{fraction * 100:g}%" if stream else "0",
                     expert_direct_io="on" if stream else "auto",
                     moce_bonus=moce)
        try:
            eng = _strata.Engine(model, n_threads=threads, max_ctx=len(tokens) + 1, encode_mtp=False,
                                 settings=cfg.native())
        except _strata.StrataError as e:
            why = str(e).removeprefix(f"{model}: ")
            return {"error": f"strata refuses the file: {why}"}

        def stall() -> float:
            return float(eng.expert_totals().get("stall_s", 0.0))

        def step(ids: Sequence[int]) -> np.ndarray:
            return np.asarray(eng.eval(np.asarray(ids, dtype=np.int64)))
    else:
        import llama_cpp

        llm = llama_cpp.Llama(model_path=model, n_ctx=len(tokens) + 1, n_threads=threads,
                              n_threads_batch=threads,
                              verbose=False, n_gpu_layers=0, use_mmap=True)
        vocab = llm.n_vocab()

        def step(ids: Sequence[int]) -> np.ndarray:
            llm.eval(list(ids))
            ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
            return np.ctypeslib.as_array(ptr, shape=(vocab,)).copy()

    logits = step(tokens[:prompt])
    nll = [_nll(logits, tokens[prompt])]
    r0, times0, s0, t0 = read_bytes(), thread_times(), stall() if stall else 0.0, time.perf_counter()
    for i in range(prompt, len(tokens) - 1):
        logits = step([tokens[i]])
        nll.append(_nll(logits, tokens[i + 1]))
    seconds = time.perf_counter() - t0
    times1 = thread_times()
    n = max(len(tokens) - 1 - prompt, 1)
    blocked = None
    if times0 is not None and times1 is not None:
        blocked = max(0.0, seconds - (times1[0] - times0[0]) - (times1[1] - times0[1])) * 1e3 / n
    return {"tok_s": n / seconds if seconds > 0 else 0.0,
            "mib_per_token": (read_bytes() - r0) / MIB / n,
            "blocked_ms": blocked,
            "stall_ms": (stall() - s0) * 1e3 / n if stall else None,
            "perplexity": math.exp(sum(nll) / len(nll)), "decoded": n}


# ---------------------------------------------------------------------------------------------
# The parent: one cgroup per run
# ---------------------------------------------------------------------------------------------


@dataclass
class Run:
    engine: str
    fraction: float
    moce: float
    limit_mib: float
    tok_s: float = 0.0
    mib_per_token: float = 0.0
    perplexity: float = 0.0
    ppl_change: float = 0.0
    error: str = ""
    blocked_ms: float | None = None  # the decoding thread's blocked time per token (None: unknown)
    stall_ms: float | None = None  # strata's expert stall per token (None: not reported by the engine)


def run_one(engine: str, model: Path, tokens: Sequence[int], threads: int, fraction: float, moce: float,
            prompt: int, limit: int | None, timeout: float) -> Run:
    run = Run(engine, fraction, moce, (limit or 0) / MIB)
    group = make_cgroup(f"strata-bench-{os.getpid()}", limit) if limit else None
    evict(model)
    spec = json.dumps({"engine": engine, "model": str(model), "tokens": list(tokens), "threads": threads,
                       "fraction": fraction, "moce": moce, "prompt": prompt})
    try:
        proc = subprocess.run([sys.executable, "-m", "strata.bench.stream_cgroup", "--child", spec],
                              capture_output=True, text=True, timeout=timeout,
                              preexec_fn=group.add_self if group else None)
        if proc.returncode != 0:
            run.error = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            if proc.returncode < 0 or "Killed" in proc.stderr:
                run.error = f"killed (signal {-proc.returncode}): out of memory under the limit?"
        else:
            out = json.loads(proc.stdout.strip().splitlines()[-1])
            if "error" in out:
                run.error = out["error"]
                return run
            run.tok_s, run.mib_per_token = out["tok_s"], out["mib_per_token"]
            run.perplexity, run.blocked_ms = out["perplexity"], out["blocked_ms"]
            run.stall_ms = out["stall_ms"]
    except subprocess.TimeoutExpired:
        run.error = f"no result within {timeout:.0f} s (thrashing)"
    finally:
        if group:
            group.remove()
    return run


def render(runs: Sequence[Run], reference: str = "unlimited strata") -> str:
    lines = ["| engine | experts resident | MOCE λ | cgroup limit MiB | decode tok/s | MiB read/token | "
             f"perplexity | change vs {reference} | blocked ms/token | stall ms/token |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        if r.error:
            lines.append(f"| {r.engine} | {r.fraction:.0%} | {r.moce:g} | {r.limit_mib:.0f} | - | - | - | "
                         f"{r.error} | - | - |")
            continue
        stall = "-" if r.stall_ms is None else f"{r.stall_ms:.1f}"
        blocked = "-" if r.blocked_ms is None else f"{r.blocked_ms:.1f}"
        lines.append(f"| {r.engine} | {r.fraction:.0%} | {r.moce:g} | {r.limit_mib:.0f} | {r.tok_s:.2f} | "
                     f"{r.mib_per_token:.1f} | {r.perplexity:.4f} | {r.ppl_change:+.2%} | "
                     f"{blocked} | {stall} |")
    return "\n".join(lines)


def plot(runs: Sequence[Run], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.6))
    for label in sorted({(r.engine, r.moce) for r in runs}):
        pts = sorted((r.fraction, r.tok_s, r.mib_per_token) for r in runs
                     if (r.engine, r.moce) == label and not r.error and r.fraction < 1)
        if not pts:
            continue
        name = label[0] + (f" MOCE λ={label[1]:g}" if label[1] else "")
        a.plot([p[0] * 100 for p in pts], [p[1] for p in pts], marker="o", label=name)
        b.plot([p[0] * 100 for p in pts], [p[2] for p in pts], marker="o", label=name)
    a.set_xlabel("memory limit: experts resident (%)")
    a.set_ylabel("decode tok/s")
    a.set_yscale("log")
    b.set_xlabel("memory limit: experts resident (%)")
    b.set_ylabel("MiB read from storage per token")
    b.set_yscale("log")
    a.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "--child":
        spec = json.loads(args[1])
        print(json.dumps(child(**spec)))
        return 0
    print("usage: python -m strata.cli bench stream-vs-llama --help", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["CgroupUnavailable", "Run", "asdict", "expert_split", "make_cgroup", "plot", "render", "run_one"]
