"""Decode speed with the drafter off, adaptive (auto) and forced on, through the public ``generate`` path.

Each case (temperature × threads × expert store) runs the modes alternately — off, auto, on, off, auto,
on, … — ``runs`` times, each run a fresh session generating ``max_tokens`` tokens from the same prompt
with a fixed seed, and reports the median decode tok/s per mode, the speed-up of each mode over ``off``
(the ratio of medians), tokens per round, the draft counts chosen, the per-step acceptance, adaptive
speculation's estimated and measured gain, and the expert MiB read per generated token (stream mode).
At temperature 0 it also checks that every mode produced the same text (``same_text``). Measures only.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import strata

MODES: dict[str, bool | None] = {"off": False, "auto": None, "on": True}
# Suffixes add settings to a mode: "+w" streaming-aware verification windows (Config.moce_window, the
# run's window log-bonus; the text may differ from plain decoding's, so same_text leaves such modes out),
# "+c" exact window cuts (Config.moce_window_cut, the run's τ) and "+r" a drafter that routes among the
# resident experts (Config.moce_drafter_resident); the last two keep plain decoding's text. A mode
# without +c / +r runs with those settings off, so the library's defaults are "auto+c+r" at τ = 0.5.
WINDOW_SUFFIX = "+w"
CUT_SUFFIX = "+c"
RESIDENT_SUFFIX = "+r"
SUFFIXES = (WINDOW_SUFFIX, CUT_SUFFIX, RESIDENT_SUFFIX)


def _split_mode(mode: str) -> tuple[str, set[str]]:
    base, *rest = mode.split("+")
    return base, {"+" + r for r in rest}


def mode_base(mode: str) -> str:
    """off / auto / on without its suffixes."""
    return _split_mode(mode)[0]


def mode_config(mode: str, window: float, cut: float = 0.5) -> dict[str, Any]:
    """Config fields of a mode name: off / auto / on, with any of the suffixes +w, +c, +r."""
    base, suffixes = _split_mode(mode)
    if base not in MODES or not suffixes <= set(SUFFIXES):
        raise ValueError(f"unknown drafter mode {mode!r}: expected off, auto or on, with any of +w, +c, +r")
    return {"speculative": MODES[base], "moce_window": window if WINDOW_SUFFIX in suffixes else 0.0,
            "moce_window_cut": cut if CUT_SUFFIX in suffixes else 0.0,
            "moce_drafter_resident": RESIDENT_SUFFIX in suffixes}


PROMPT = ("import os\nimport sys\n\n\ndef parse_args(argv):\n    \"\"\"Parse the command line.\"\"\"\n"
          "    import argparse\n    p = argparse.ArgumentParser(description=__doc__)\n")


@dataclass
class ModeResult:
    mode: str
    tok_s: list[float] = field(default_factory=list)
    # Generated tokens per CPU-second of the process over the whole call (prefill included): on a shared
    # host this moves less than wall time, since time the scheduler gives to others is not counted.
    cpu_tok_s: list[float] = field(default_factory=list)
    tokens_per_round: float = 0.0
    draft_counts: list[int] = field(default_factory=list)
    acceptance: list[float] = field(default_factory=list)
    estimated_gain: float = 0.0
    measured_gain: float = 0.0
    mib_per_token: float = 0.0
    cut_drafts: int = 0  # drafts exact window cuts dropped in the last run (stream mode, +c)
    text: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.tok_s) if self.tok_s else 0.0

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu_tok_s) if self.cpu_tok_s else 0.0


@dataclass
class Case:
    temperature: float
    threads: int
    store: str  # "mmap" or e.g. "stream 25% direct"
    modes: dict[str, ModeResult]

    def speedup(self, mode: str) -> float:
        base = self.modes["off"].median
        return self.modes[mode].median / base if base > 0 else 0.0

    def cpu_speedup(self, mode: str) -> float:
        base = self.modes["off"].cpu_median
        return self.modes[mode].cpu_median / base if base > 0 else 0.0

    @property
    def same_text(self) -> bool | None:
        if self.temperature > 0:
            return None
        texts = {m.text for name, m in self.modes.items() if WINDOW_SUFFIX not in _split_mode(name)[1]}
        return len(texts) == 1


def _store_config(store: str) -> dict[str, Any]:
    """ "mmap" or "stream FRACTION[ direct][ prefetch=auto|on|off]" -> Config fields (without "direct":
    buffered reads; without "prefetch=": the default, auto)."""
    parts = store.split()
    if parts[0] == "mmap":
        return {"expert_mode": "mmap"}
    if parts[0] != "stream" or len(parts) < 2:
        raise ValueError(f"unknown expert store {store!r}: expected mmap or "
                         "'stream FRACTION [direct] [prefetch=...]'")
    cfg: dict[str, Any] = {"expert_mode": "stream", "expert_cache": parts[1]}
    cfg["expert_direct_io"] = "on" if "direct" in parts[2:] else "off"
    for p in parts[2:]:
        if p.startswith("prefetch="):
            cfg["expert_prefetch"] = p.split("=", 1)[1]
        elif p != "direct":
            raise ValueError(f"unknown expert store option {p!r} in {store!r}: "
                             "expected direct or prefetch=...")
    return cfg


def run_case(model: strata.Model, temperature: float, threads: int, store: str, *, modes: list[str],
             runs: int, max_tokens: int, draft_steps: int, prompt: str = PROMPT, window: float = 1.0,
             cut: float = 0.5) -> Case:
    results = {m: ModeResult(m) for m in modes}
    extra = _store_config(store)
    for _ in range(runs):
        for m in modes:
            cfg = strata.Config(threads=threads, draft_steps=draft_steps, **mode_config(m, window, cut),
                                **extra)
            s = model.session(config=cfg, sampling=strata.SamplingPolicy(temperature=temperature, seed=1))
            cpu0 = time.process_time()
            text = "".join(s.generate(prompt, max_tokens=max_tokens))
            cpu = time.process_time() - cpu0
            st = s.stats
            r = results[m]
            r.tok_s.append(st.decode_tokens_per_second)
            r.cpu_tok_s.append(st.generated_tokens / cpu if cpu > 0 else 0.0)
            r.text = text
            r.tokens_per_round = st.tokens_per_round
            r.draft_counts = list(st.draft_counts)
            r.acceptance = list(st.acceptance)
            r.estimated_gain = st.estimated_gain
            r.measured_gain = st.measured_gain
            r.mib_per_token = st.expert_bytes_per_token / (1 << 20)
            r.cut_drafts = st.window_cut_drafts
    return Case(temperature, threads, store, results)


def run(model_path: str | None, *, temperatures: list[float], threads: list[int], stores: list[str],
        modes: list[str], runs: int, max_tokens: int, draft_steps: int, window: float = 1.0,
        cut: float = 0.5) -> list[Case]:
    model = strata.Model(model_path)
    return [run_case(model, t, n, store, modes=modes, runs=runs, max_tokens=max_tokens,
                     draft_steps=draft_steps, window=window, cut=cut)
            for store in stores for n in threads for t in temperatures]


def render(cases: list[Case]) -> str:
    head = ("| store | temp | threads | mode | tok/s (median) | × off | tok/CPU-s | × off | tokens/round | "
            "drafts verified (0,1,2,..) | drafts cut | acceptance per step | est. / meas. gain | "
            "expert MiB/token | same text |")
    lines = [head, "|" + "---|" * 15]
    for c in cases:
        for m, r in c.modes.items():
            acc = ", ".join(f"{a:.2f}" for a in r.acceptance) or "-"
            counts = ",".join(str(x) for x in r.draft_counts) or "-"
            meas = f"{r.measured_gain:.2f}" if r.measured_gain > 0 else "-"  # 0: not measured (stats.py)
            gain = f"{r.estimated_gain:.2f} / {meas}" if m.startswith("auto") else "-"
            same = "-" if c.same_text is None else ("yes" if c.same_text else "NO")
            lines.append(f"| {c.store} | {c.temperature:g} | {c.threads} | {m} | {r.median:.1f} | "
                         f"{c.speedup(m):.2f} | {r.cpu_median:.1f} | {c.cpu_speedup(m):.2f} | "
                         f"{r.tokens_per_round:.2f} | {counts} | {r.cut_drafts} | {acc} | {gain} | "
                         f"{r.mib_per_token:.2f} | {same} |")
    return "\n".join(lines)


def as_json(cases: list[Case]) -> list[dict[str, Any]]:
    out = []
    for c in cases:
        d = asdict(c)
        for m in c.modes:
            d["modes"][m]["median"] = c.modes[m].median
            d["modes"][m]["speedup"] = c.speedup(m)
            d["modes"][m]["cpu_median"] = c.modes[m].cpu_median
            d["modes"][m]["cpu_speedup"] = c.cpu_speedup(m)
            d["modes"][m].pop("text")
        d["same_text"] = c.same_text
        out.append(d)
    return out


def cases_from_json(docs: list[dict[str, Any]]) -> list[Case]:
    """The cases of ``as_json`` output, e.g. to plot several runs together. The texts are not in the JSON
    (its ``same_text`` is), so ``same_text`` of a loaded case says nothing."""
    fields = {f for f in ModeResult.__dataclass_fields__ if f != "text"}
    out = []
    for d in docs:
        modes = {m: ModeResult(**{k: v for k, v in r.items() if k in fields}) for m, r in d["modes"].items()}
        out.append(Case(float(d["temperature"]), int(d["threads"]), str(d["store"]), modes))
    return out


def plot(cases: list[Case], path: Path, title: str) -> None:
    """Speed-up over drafting off per case and mode: against the first draft step's acceptance (left) and,
    for stream stores, against the expert MiB read per token relative to drafting off (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = [m for c in cases for m in c.modes if m != "off"]
    modes = list(dict.fromkeys(modes))
    streamed = [c for c in cases if c.modes["off"].mib_per_token > 0]
    fig, axes = plt.subplots(1, 2 if streamed else 1, figsize=(11 if streamed else 6.5, 4.2), squeeze=False)
    left, markers = axes[0][0], "osv^<>Dp*"
    for i, mode in enumerate(modes):
        have = [c for c in cases if mode in c.modes and c.modes[mode].acceptance]
        if have:
            xs = [c.modes[mode].acceptance[0] for c in have]
            ys = [c.speedup(mode) for c in have]
            left.scatter(xs, ys, marker=markers[i % len(markers)], label=f"drafter {mode}")
            for c, x, y in zip(have, xs, ys, strict=True):
                left.annotate(f"{c.store}, t={c.temperature:g}, {c.threads}thr", (x, y), fontsize=6,
                              xytext=(3, 3), textcoords="offset points")
    left.axhline(1.0, color="grey", lw=0.8)
    left.set_xlabel("acceptance of draft step 0 (of the drafts verified)")
    left.set_ylabel("decode speed-up over drafting off (median tok/s ratio)")
    left.legend(fontsize=7)
    if streamed:
        right = axes[0][1]
        for i, mode in enumerate(modes):
            have = [c for c in streamed if mode in c.modes]
            if not have:
                continue
            xs = [c.modes[mode].mib_per_token / c.modes["off"].mib_per_token for c in have]
            ys = [c.speedup(mode) for c in have]
            right.scatter(xs, ys, marker=markers[i % len(markers)], label=f"drafter {mode}")
            for c, x, y in zip(have, xs, ys, strict=True):
                right.annotate(c.store, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
        right.axhline(1.0, color="grey", lw=0.8)
        right.axvline(1.0, color="grey", lw=0.8)
        right.set_xlabel("expert MiB read per token ÷ drafting off's")
        right.set_ylabel("decode speed-up over drafting off")
        right.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
