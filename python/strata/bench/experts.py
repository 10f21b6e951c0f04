"""``bench experts``: the expert store against the resident fraction, with and without MOCE.

For each resident fraction (the expert cache as a share of all experts) and each MOCE setting, one
engine decodes the same token sequence teacher-forced, one token per window (the decode loop):

- expert miss rate (misses / experts used), bytes read per token, stall time per token, share of
  misses whose read finished before the compute needed it (prefetch hits);
- decode tokens per second;
- perplexity of the sequence (held-out text through the model's tokenizer, or for a model whose
  text means nothing — random weights — a sequence sampled from the model itself with MOCE off).

The same sequence in mmap mode (file pages dropped from the page cache first, so it starts cold)
gives the "trust the OS" row. The summary puts MOCE against plain routing at each fraction: the
relative reduction in misses and the relative change in perplexity (the cache-conditional experts
paper reports over 50% fewer misses for 0.1-3% perplexity). Results: docs/benchmarks.md.
"""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from strata import _strata
from strata.config import Config


@dataclass(frozen=True)
class MoceSetting:
    """A MOCE configuration: log-bonus λ (m = e^λ), rank-1 scale r, protection r_prot."""

    log_bonus: float = 0.0
    rank1: float = 1.0
    protect: int = 0

    @property
    def off(self) -> bool:
        return self.log_bonus <= 0.0 and (self.rank1 <= 1.0 or self.protect <= 1)

    @property
    def label(self) -> str:
        if self.off:
            return "off"
        text = f"λ={self.log_bonus:g}"
        if self.rank1 > 1.0 and self.protect > 1:
            text += f", r={self.rank1:g}, prot={self.protect}"
        return text

    def config_fields(self) -> dict[str, Any]:
        """The strata.Config fields of this setting (the engine computes m = e^λ itself)."""
        return {"moce_bonus": self.log_bonus, "moce_rank1": self.rank1, "moce_protect": self.protect}


@dataclass(frozen=True)
class BenchConfig:
    fractions: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75, 1.0)
    moce: tuple[MoceSetting, ...] = (MoceSetting(), MoceSetting(0.5), MoceSetting(1.0), MoceSetting(2.0))
    tokens: int = 128       # decode steps measured
    prompt: int = 32        # tokens prefilled first (warms the cache), not measured
    n_threads: int = 0      # compute threads (0 = all cores)
    io_threads: int = 4
    prefetch: str = "auto"  # Config.expert_prefetch: reads ahead on the next layer's predicted experts
    direct_io: str = "auto"
    with_mmap: bool = True  # also the mmap ("trust the OS") run
    seed: int = 0


@dataclass
class RunResult:
    mode: str
    fraction: float | None
    moce: str
    log_bonus: float
    slots: int
    tokens: int
    hits: int
    misses: int
    miss_rate: float
    bytes_per_token: float
    io_bytes_per_token: float
    stall_ms_per_token: float
    prefetch_hit_rate: float
    evictions: int
    tok_s: float
    ppl: float
    io: str
    selected_mass: float  # mean router probability mass of the selected experts (main layers, decode rows)
    resident_mb: float    # memory the experts held at the end (stream: slots in use; mmap: page cache)


@dataclass
class BenchReport:
    model: str
    model_bytes: int
    expert_bytes: int
    layers: int
    experts_per_layer: int
    experts_used: int
    sequence: str
    config: BenchConfig
    runs: list[RunResult] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["config"]["moce"] = [m.label for m in self.config.moce]
        d["summary"] = self.summary()
        return d

    def run(self, fraction: float | None, moce: str, mode: str = "stream") -> RunResult | None:
        for r in self.runs:
            if r.mode == mode and r.fraction == fraction and r.moce == moce:
                return r
        return None

    def summary(self) -> list[dict[str, Any]]:
        """Per fraction and MOCE setting: misses and perplexity relative to plain routing."""
        out = []
        for r in self.runs:
            if r.mode != "stream" or r.moce == "off":
                continue
            base = self.run(r.fraction, "off")
            if base is None:
                continue
            out.append({
                "fraction": r.fraction, "moce": r.moce,
                "miss_reduction": 1.0 - r.misses / base.misses if base.misses else 0.0,
                "ppl_change": r.ppl / base.ppl - 1.0,
                "bytes_reduction": (1.0 - r.bytes_per_token / base.bytes_per_token
                                    if base.bytes_per_token else 0.0),
                "speedup": r.tok_s / base.tok_s if base.tok_s else 0.0,
            })
        return out


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {"platform": platform.platform(), "python": platform.python_version(),
                            "cpus": os.cpu_count()}
    try:
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo", encoding="utf-8") as f:
            info["memory_gb"] = round(int(f.readline().split()[1]) / 1e6, 1)
    except OSError:
        pass
    return info


def drop_page_cache(path: str | Path) -> None:
    """Ask the OS to forget the file's cached pages (clean pages of a file need no privileges)."""
    if not hasattr(os, "posix_fadvise"):
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # dirty pages (a file just written) would stay cached
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _log_softmax_at(logits: np.ndarray, token: int) -> float:
    x = logits.astype(np.float64)
    m = float(x.max())
    return float(x[token] - m - math.log(float(np.exp(x - m).sum())))


def sampled_sequence(path: str | Path, n: int, seed: int, n_threads: int = 0) -> list[int]:
    """n tokens sampled (temperature 1) from the model itself, MOCE off, mmap: a typical sequence."""
    eng = _strata.Engine(str(path), n_threads=n_threads, max_ctx=n + 8)
    rng = np.random.default_rng(seed)
    toks = [int(rng.integers(0, eng.vocab_size))]
    logits = eng.eval(toks)
    while len(toks) < n:
        p = np.exp(logits.astype(np.float64) - float(logits.max()))
        t = int(rng.choice(len(p), p=p / p.sum()))
        toks.append(t)
        logits = eng.eval([t])
    return toks


def text_sequence(path: str | Path, text_file: str | Path, n: int) -> list[int]:
    """The first n tokens of a held-out text file through the model's own tokenizer."""
    from strata.gguf import GGUFFile
    from strata.tokenizer import Tokenizer

    tok = Tokenizer.from_gguf_metadata(GGUFFile(path).metadata)
    ids = tok.encode(Path(text_file).read_text(encoding="utf-8"))
    if len(ids) < n:
        raise ValueError(f"{text_file}: {len(ids)} tokens, the benchmark needs {n}")
    return [int(i) for i in ids[:n]]


def run_one(path: str | Path, tokens: Sequence[int], cfg: BenchConfig, mode: str, fraction: float | None,
            moce: MoceSetting) -> RunResult:
    """Prefill cfg.prompt tokens, then decode the rest teacher-forced one token at a time."""
    settings: dict[str, Any] = {"expert_mode": mode, "expert_io_threads": cfg.io_threads,
                                "expert_prefetch": cfg.prefetch,
                                "expert_direct_io": cfg.direct_io}
    if mode == "stream" and fraction is not None:
        settings["expert_cache"] = f"{fraction * 100:g}%"
    if not moce.off:
        settings.update(moce.config_fields())
    if mode == "mmap":
        drop_page_cache(path)
    # mmap: misses = uses whose pages were not in the page cache (the page-cache probe).
    eng = _strata.Engine(str(path), n_threads=cfg.n_threads, max_ctx=len(tokens) + 8,
                         settings=Config(**settings).native(), expert_page_cache_probe=mode == "mmap")
    eng.set_route_trace(True)
    main_layers = int(eng.hparams["layers"])
    p = cfg.prompt
    eng.eval(list(tokens[:p]), logits="none")
    eng.reset_expert_stats()
    nll = 0.0
    mass = 0.0
    n = 0
    seconds = 0.0
    for i in range(p, len(tokens) - 1):
        t0 = time.perf_counter()
        logits = eng.eval([tokens[i]])
        seconds += time.perf_counter() - t0  # the trace read below is not decode time
        nll -= _log_softmax_at(logits, tokens[i + 1])
        for layer in eng.route_trace()[:main_layers]:
            mass += float(np.take_along_axis(layer["probs"], layer["ids"].astype(np.int64), axis=1).sum())
        n += 1
    st = eng.expert_stats()
    tot = st["total"]
    used = tot["hits"] + tot["misses"]
    return RunResult(
        mode=mode, fraction=fraction, moce=moce.label, log_bonus=moce.log_bonus, slots=int(st["slots"]),
        tokens=n,
        hits=int(tot["hits"]), misses=int(tot["misses"]), miss_rate=tot["misses"] / used if used else 0.0,
        bytes_per_token=tot["bytes_read"] / n, io_bytes_per_token=tot["io_bytes"] / n,
        stall_ms_per_token=1e3 * tot["stall_s"] / n,
        prefetch_hit_rate=tot["prefetch_hits"] / tot["misses"] if tot["misses"] else 1.0,
        evictions=int(tot["evictions"]), tok_s=n / seconds if seconds > 0 else 0.0, ppl=math.exp(nll / n),
        io=str(st["io"]), selected_mass=mass / (n * main_layers), resident_mb=st["resident_bytes"] / 1e6,
    )


def run_bench(path: str | Path, cfg: BenchConfig, text: str | Path | None = None,
              progress: Callable[[str], None] | None = None) -> BenchReport:
    t_start = time.perf_counter()
    n = cfg.prompt + cfg.tokens + 1
    if text is not None:
        tokens = text_sequence(path, text, n)
        sequence = f"held-out text {text}"
    else:
        tokens = sampled_sequence(path, n, cfg.seed, cfg.n_threads)
        sequence = f"sampled from the model (seed {cfg.seed}, temperature 1, MOCE off)"
    probe = _strata.Engine(str(path), max_ctx=16)
    st = probe.expert_stats()
    hp = probe.hparams
    del probe
    report = BenchReport(
        model=str(path), model_bytes=Path(path).stat().st_size, expert_bytes=int(st["expert_bytes_total"]),
        layers=int(st["layers"]), experts_per_layer=int(st["experts_per_layer"]),
        experts_used=int(hp["expert_used_count"]), sequence=sequence, config=cfg, machine=machine_info(),
    )
    plan: list[tuple[str, float | None, MoceSetting]] = []
    if cfg.with_mmap:
        plan.append(("mmap", None, MoceSetting()))
    for resident_fraction in cfg.fractions:
        for m in cfg.moce:
            plan.append(("stream", resident_fraction, m))
    for i, (mode, fraction, m) in enumerate(plan):
        if progress:
            where = "mmap" if mode == "mmap" else f"{fraction:.0%} resident"
            progress(f"[{i + 1}/{len(plan)}] {where}, MOCE {m.label}")
        report.runs.append(run_one(path, tokens, cfg, mode, fraction, m))
    report.machine["load_average_after"] = machine_info().get("load_average")
    report.seconds = time.perf_counter() - t_start
    return report


# --- output ----------------------------------------------------------------------------------------

COLUMNS = ("mode", "resident", "MOCE", "miss rate", "MB read/token", "stall ms/token", "prefetch hits",
           "tok/s", "perplexity", "selected mass", "expert MB held")


def table_rows(report: BenchReport) -> list[list[str]]:
    rows = []
    for r in report.runs:
        rows.append([
            r.mode, "-" if r.fraction is None else f"{r.fraction:.0%} ({r.slots})", r.moce,
            f"{r.miss_rate:.3f}", f"{r.bytes_per_token / 1e6:.3f}",
            # mmap mode has no reads of its own to wait for: page faults are compute time there.
            "-" if r.mode == "mmap" else f"{r.stall_ms_per_token:.2f}",
            "-" if r.mode == "mmap" else f"{r.prefetch_hit_rate:.2f}",
            f"{r.tok_s:.2f}", f"{r.ppl:.4f}", f"{r.selected_mass:.3f}", f"{r.resident_mb:.0f}",
        ])
    return rows


SUMMARY_COLUMNS = ("resident", "MOCE", "fewer misses", "perplexity change", "fewer bytes", "speed vs off")


def summary_rows(report: BenchReport) -> list[list[str]]:
    return [[f"{s['fraction']:.0%}", s["moce"], f"{100 * s['miss_reduction']:+.1f}%",
             f"{100 * s['ppl_change']:+.2f}%", f"{100 * s['bytes_reduction']:+.1f}%", f"{s['speedup']:.2f}x"]
            for s in report.summary()]


def markdown(report: BenchReport, command: str = "") -> str:
    def md(columns: Sequence[str], rows: list[list[str]]) -> str:
        lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)

    m = report.machine
    head = [
        f"Model `{Path(report.model).name}`: {report.model_bytes / 1e9:.2f} GB on disk, experts "
        f"{report.expert_bytes / 1e9:.2f} GB ({report.layers} MoE layers x {report.experts_per_layer} "
        f"experts, {report.experts_used} used per token). Sequence: {report.sequence}; "
        f"{report.config.prompt} tokens prefilled, then {report.config.tokens} decode steps measured.",
        f"Machine: {m.get('cpu', '?')}, {m.get('cpus', '?')} CPUs, {m.get('memory_gb', '?')} GB; load "
        f"average before {m.get('load_average')}, after {m.get('load_average_after')}; "
        f"{report.seconds:.0f} s in all.",
    ]
    if command:
        head.append(f"Command: `{command}`")
    head.append("Miss rate: misses / experts used (one (layer, expert) per window); MB read: expert bytes "
                "read from the file per decode token; prefetch hits: misses whose read was done when the "
                "compute reached them; selected mass: router probability of the chosen experts, per layer "
                "and token.")
    io = sorted({r.io for r in report.runs if r.mode == "stream"})
    if io:
        head.append(f"Expert reads: {', '.join(io)}; {report.config.io_threads} I/O threads.")
    text = "\n".join(head) + "\n\n" + md(COLUMNS, table_rows(report)) + "\n"
    summary = summary_rows(report)
    if not summary:  # only MOCE off was run (--bonus 0): nothing to compare against
        return text + "\nNo MOCE runs (no bonus λ > 0), so no comparison against plain routing.\n"
    return text + "\nMOCE against plain routing:\n\n" + md(SUMMARY_COLUMNS, summary) + "\n"


def plot(report: BenchReport, path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    panels = (("miss_rate", "expert miss rate", 1.0), ("bytes_per_token", "MB read per token", 1e-6),
              ("tok_s", "decode tokens/s", 1.0), ("ppl", "perplexity", 1.0))
    labels = [m.label for m in report.config.moce]
    mmap = report.run(None, "off", "mmap")
    for ax, (key, title, scale) in zip(axes.flat, panels, strict=True):
        for label in labels:
            rs = sorted((r for r in report.runs if r.mode == "stream" and r.moce == label),
                        key=lambda r: r.fraction or 0.0)
            xs = [100 * (r.fraction or 0.0) for r in rs]
            ax.plot(xs, [getattr(r, key) * scale for r in rs], marker="o", label=f"MOCE {label}")
        if mmap is not None:
            ax.axhline(getattr(mmap, key) * scale, color="k", linestyle=":",
                       label="mmap (page cache dropped before the run)")
        ax.set_xlabel("resident experts (% of all)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(f"{Path(report.model).name}: expert store vs resident fraction", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
