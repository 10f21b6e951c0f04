"""``strata.Config``: the one typed view of every ``STRATA_*`` setting (docs/settings.md).

Two ways to get one:

- ``Config(threads=4, draft_steps=2, ...)``: explicit. A bad value raises :class:`ConfigError` naming
  the field, the variable it stands for and the rule.
- ``Config.from_env()``: from the process environment (or any mapping). Settings are validated in
  groups, as the C++ core does: a group with any malformed, non-finite, out-of-range,
  too-long or empty value is rejected as a whole with ONE diagnostic (a :class:`ConfigWarning`) and
  falls back to its defaults; a group is never half-applied. ``strict=True`` raises instead.

The settings the C++ core reads (retention, MTP cells, verification rule, MOCE routing, Metal, expert
store, cpu) are validated by the one C++ settings parser (``strata._strata.Settings``), so Python and
C++ can never disagree on what a value means; :meth:`Config.native` hands them to an engine once, as
one typed object. The settings the Python layer adds (threads, backend, context, speculation) follow
the same rules here and reach the engine as its constructor's arguments (threads, backend, context)
or stay in the session (speculation). Every setting, its type, default and range:
``docs/settings.md``.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from strata.errors import ConfigError

__all__ = ["SETTINGS", "Config", "ConfigWarning", "Setting", "server_env"]


class ConfigWarning(UserWarning):
    """A ``STRATA_*`` environment setting was rejected (its group fell back to defaults) or unknown."""


@dataclass(frozen=True)
class Setting:
    """One ``STRATA_*`` variable: the Config field it fills, its group and its rule."""

    env: str
    field: str
    group: str
    default: str
    rule: str
    native: bool  # validated by the C++ settings parser (_strata.Settings), else by this module


# Groups validated by the C++ parser (_strata.Settings): retention, mtp, sampling, moce, metal, experts,
# cpu. Groups of this module: threads, backend, context, speculation. The order is the order of
# docs/settings.md.
SETTINGS: tuple[Setting, ...] = (
    Setting("STRATA_THREADS", "threads", "threads", "0",
            "integer 0..1024; worker threads of each session's engine (0 = the shared pool, one per core)",
            False),
    Setting("STRATA_BACKEND", "backend", "backend", "cpu",
            "cpu | metal-emu | metal; metal-emu runs the Metal kernels on the CPU threadgroup emulator (any "
            "platform, slow; parity checks), metal the GPU (macOS builds with metal-cpp only)", False),
    Setting("STRATA_CONTEXT", "context_length", "context", "0",
            "integer 0 or 16..1048576; KV cells per session (0 = the model's context length, at most 32768)",
            False),
    Setting("STRATA_SPECULATIVE", "speculative", "speculation", "auto",
            "auto | on | off (also 1/0, true/false, yes/no); MTP speculative decoding: auto = when the model "
            "has an MTP layer, each round verifies the number of drafts (0..draft_steps, 0 = a plain step) "
            "that the measured window and draft costs and the live acceptance say is fastest; on = always "
            "draft_steps; off = never", False),
    Setting("STRATA_DRAFT_STEPS", "draft_steps", "speculation", "3",
            "integer 1..16; drafts the MTP chain proposes per round", False),
    Setting("STRATA_DRAFT_CHAINED", "draft_chained", "speculation", "on",
            "on | off (also 1/0, true/false, yes/no); chained drafting (the whole chain, then retention) or "
            "non-chained (each step judged as it is drafted; drafting stops at the first failure)", False),
    Setting("STRATA_SPEC_SAMPLE", "spec_sample", "sampling", "exact",
            "exact | greedy; verification rule for temperature > 0 (greedy = legacy greedy-match)", True),
    Setting("STRATA_METAL_SPEC_MIN_P_SCHEDULE", "spec_min_p_schedule", "retention", "unset",
            "1 to 8 comma-separated probabilities in [0, 1]; per-step draft floor, the last repeats; a valid "
            "value (even \"0\") turns the retention policy on", True),
    Setting("STRATA_METAL_SPEC_MIN_CUM_P", "spec_min_cum_p", "retention", "unset",
            "probability in [0, 1]; keep draft j only while p0·…·pj >= it (0 disables the gate); a valid "
            "value turns the retention policy on", True),
    Setting("STRATA_METAL_MTP_SINK", "mtp_sink", "mtp", "64", "integer 0..1024; drafter attention sink cells "
            "(0 = off)", True),
    Setting("STRATA_METAL_MTP_WIN", "mtp_window", "mtp", "256", "integer 1..2051; drafter attention window "
            "in cells", True),
    Setting("STRATA_METAL_MTP_Q4", "mtp_q4", "mtp", "0", "1 or 0; requantize the drafter's q/o "
            "projections, fc and shared expert to Q4_0 (Lloyd fit) at load (not with _Q5)", True),
    Setting("STRATA_METAL_MTP_Q5", "mtp_q5", "mtp", "0", "1 or 0; requantize the same drafter weights to "
            "Q5_0 at load (not with STRATA_METAL_MTP_Q4)", True),
    Setting("STRATA_METAL_MTP_DRAFT_Q4", "mtp_draft_q4", "mtp", "1", "1 or 0; the drafter in Q4_0 (ggml's "
            "rule) where stored wider: R-11's tensors unless _Q4 / _Q5, and a gathered head (drafts only)",
            True),
    Setting("STRATA_MOCE_BONUS", "moce_bonus", "moce", "0",
            "log-bonus λ in [-8, 8]; resident expert scores are scaled by e^λ when e^λ > 1", True),
    Setting("STRATA_MOCE_RANK1", "moce_rank1", "moce", "1",
            "rank-1 scale r in (0, 1024]; used only when r > 1 and protect > 1", True),
    Setting("STRATA_MOCE_PROTECT", "moce_protect", "moce", "0",
            "integer 0..64 (r_prot); the first rank that gets the bonus is max(1, r_prot)", True),
    Setting("STRATA_MOCE_DRAFT", "moce_draft", "moce", "0",
            "boolean (1/0, true/false, on/off, yes/no); draft rows get the squared bonus and r_prot = 1",
            True),
    Setting("STRATA_MOCE_WINDOW", "moce_window", "moce", "0",
            "log-bonus λw in [0, 8] (0 = off); streaming-aware verification windows: draft rows are routed "
            "with the draft-row rule (b = e^λw, m = b², r_prot = 1) against the residency plus every expert "
            "the window has already requested (the target row's choices included)", True),
    Setting("STRATA_MOCE_WINDOW_CUT", "moce_window_cut", "moce", "0.5",
            "probability τ in [0, 1] (0 = off); exact window cuts in stream mode: a verification window "
            "drops a draft row, and the rows after it, at the first layer where it would read an expert "
            "that is not resident and not read for an earlier row, unless the product of the drafter's "
            "probabilities before it is >= τ (the text stays plain decoding's)", True),
    Setting("STRATA_MOCE_DRAFTER_RESIDENT", "moce_drafter_resident", "moce", "1",
            "boolean (1/0, true/false, on/off, yes/no); stream mode: the drafter's rows pick their experts "
            "among the resident ones (when at least K are), so draft steps read no expert; changes drafts "
            "only, never the verified text", True),
    Setting("STRATA_METALLIB", "metallib", "metal", "unset",
            "path of strata.metallib, the compiled Metal kernels the metal backend loads (<= 4096 bytes)",
            True),
    Setting("STRATA_METAL_MTP_TILE", "metal_mtp_tile", "metal", "unset",
            "L,R,S,K; the drafter's wide-class GEMV tile on the Metal backends (L in {8,16,32}, "
            "R in {1,2,4}, S in {1,2,4,8}, K in {1,2,4,8}, R*K <= 16)", True),
    Setting("STRATA_EXPERT_MODE", "expert_mode", "experts", "mmap",
            "mmap | stream; routed experts from the file mapping or a bounded resident set", True),
    Setting("STRATA_EXPERT_CACHE", "expert_cache", "experts", "0",
            "resident-set size: bytes with an optional K/M/G/T suffix (\"512M\"), a percentage of all "
            "experts (\"25%\") or 0 = every expert", True),
    Setting("STRATA_EXPERT_DIRECT_IO", "expert_direct_io", "experts", "auto", "auto | on | off", True),
    Setting("STRATA_EXPERT_IO_THREADS", "expert_io_threads", "experts", "4",
            "integer 0..64; expert reader threads (0 = read on the compute thread)", True),
    Setting("STRATA_EXPERT_PREFETCH", "expert_prefetch", "experts", "auto",
            "auto | on | off; stream mode: read the experts each MoE layer's router ranks top-K for the "
            "next layer while it computes (auto: per layer, while at least 70 % of those reads get used)",
            True),
    Setting("STRATA_ISA", "isa", "cpu", "auto",
            "auto | avx512+amx | avx512 | avx2 | neon-i8mm | neon-dotprod | neon | scalar; force a lower CPU "
            "kernel path (auto = the best this CPU runs, AMX tiles included where usable; avx512 = "
            "without AMX)",
            True),
    Setting("STRATA_REPACK", "repack", "cpu", "auto",
            "auto | on | off; interleave Q4_0/Q5_0/Q5_1/Q8_0/Q2_K..Q6_K/IQ4_XS/IQ4_NL weight rows at load",
            True),
    Setting("STRATA_KV_TYPE", "kv_type", "kv", "auto",
            "auto | f32 | f16 | int8; how K/V cells are stored (auto: int8 for strata, fp16 for qwen3moe / "
            "glm4moe on x86-64 CPUs with AVX2+FMA+F16C, else f32); cpu backend, not deepseek4", True),
)

# Read by the HTTP server (docs/server.md), not Config fields; known, so never "unknown setting".
SERVER_ENVS = ("STRATA_API_KEY", "STRATA_MAX_BODY")
# Read once per process by the C++ kernels (docs/settings.md), validated with the cpu group; not Config
# fields: STRATA_PREFETCH = auto | off | bytes, the decode GEMVs' software-prefetch distance.
PROCESS_ENVS = ("STRATA_PREFETCH",)
# Read when a strata.Model is made (strata.spec_cost_cache), not Config fields: STRATA_SPEC_CACHE = on |
# off, the cross-process cache of adaptive speculation's costs; STRATA_CACHE_DIR = its folder.
MODEL_ENVS = ("STRATA_SPEC_CACHE", "STRATA_CACHE_DIR")



def server_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The HTTP server's variables of ``environ`` (default ``os.environ``) that are set and not empty:
    ``STRATA_API_KEY`` and ``STRATA_MAX_BODY`` (docs/server.md; the server checks their values). With
    :meth:`Config.from_env` this is the one reader of ``STRATA_*`` variables in the Python layer."""
    env = os.environ if environ is None else environ
    return {k: str(env[k]) for k in SERVER_ENVS if env.get(k)}


_BY_ENV = {s.env: s for s in SETTINGS}
_BY_FIELD = {s.field: s for s in SETTINGS}

MAX_THREADS = 1024
MIN_CONTEXT = 16
MAX_CONTEXT = 1 << 20
MAX_DRAFT_STEPS = 16

_FALLBACK = {
    "threads": "the shared thread pool applies",
    "backend": "the cpu backend applies",
    "context": "the model's context length applies",
    "speculation": "speculation settings ignored, defaults auto / 3 drafts apply",
}

_INT_RE = re.compile(r"[+-]?[0-9]+")
# The spellings of a boolean setting (also read by strata.spec_cost_cache for STRATA_SPEC_CACHE).
ON_WORDS = frozenset({"1", "true", "on", "yes"})
OFF_WORDS = frozenset({"0", "false", "off", "no"})


@dataclass(frozen=True)
class Config:
    """Engine and decoding settings of a session; each field is one ``STRATA_*`` variable.

    Attributes:
        threads: worker threads of each session's engine; 0 = the process-wide pool (one per core).
        backend: compute backend: ``"cpu"``, ``"metal-emu"`` (the Metal kernels on the CPU threadgroup
            emulator: any platform, slow — for parity checks) or ``"metal"`` (the GPU; macOS builds with
            metal-cpp only, elsewhere a ConfigError). See docs/metal.md.
        context_length: KV cells per session; 0 = the model's context length (at most 32768).
        speculative: MTP speculative decoding: ``None`` (auto) = adaptive when the model has an MTP layer
            (each round verifies as many drafts, 0..draft_steps, as measured costs and acceptance say
            pay); ``True`` = always ``draft_steps``; ``False`` = never.
        draft_steps: drafts the MTP chain proposes per round (1..16).
        draft_chained: chained drafting (all ``draft_steps`` drafted, then retention keeps a prefix) or
            non-chained (each step judged by retention as it is drafted; docs/drafting.md).
        spec_sample: verification rule at temperature > 0: ``"exact"`` speculative sampling (the output
            distribution is exactly the model's) or ``"greedy"`` (legacy greedy-match, for comparison).
        spec_min_p_schedule: per-step draft floor of the draft-retention rule (docs/drafting.md), 1 to 8
            probabilities; ``None`` = unset.
        spec_min_cum_p: cumulative draft floor of the draft-retention rule in [0, 1]; ``None`` = unset.
        mtp_sink: drafter attention sink cells (0..1024).
        mtp_window: drafter attention window in cells (1..2051).
        mtp_q4, mtp_q5: low-bit drafter weights (the drafter-format rule, docs/drafting.md):
            requantize the MTP block's q/o projections, fc_embedding, fc_hidden and shared expert to
            Q4_0 (Lloyd) resp. Q5_0 at load; not both.
        mtp_draft_q4: the drafter's restricted-vocabulary head, when it is a gathered copy of the output
            rows stored wider than Q4_0 (the demo model's Q8_0), requantized to Q4_0 per session: a draft
            step reads it whole. Only the drafts can change; the verified output is exact either way.
        moce_bonus, moce_rank1, moce_protect, moce_draft: cache-aware MOCE routing (docs/routing.md);
            they change the selection only where there is a residency map (``expert_mode="stream"``).
        moce_window: streaming-aware verification windows, a log-bonus in [0, 8] (0 = off): the draft
            rows of a verification window prefer the experts the window already requested (in mmap mode
            too). Changes the verified rows, so the text is no longer exactly plain decoding's.
        moce_window_cut: exact window cuts, a probability τ in [0, 1] (default 0.5; 0 = off; stream
            mode only): a draft row whose chance of being needed (the product of the drafter's
            probabilities of the drafts before it) is below τ is dropped from its verification window,
            with the rows after it, where it would read an expert that is neither resident nor read for
            an earlier row. The text stays exactly plain decoding's; the window reads fewer experts and
            verifies fewer drafts.
        moce_drafter_resident: (default on) stream mode: the drafter's rows pick their experts among
            the resident ones (when at least K are), so a draft step reads no expert. Changes the drafts
            (and so the acceptance), never the verified text.
        expert_mode: ``"mmap"`` (experts from the file mapping) or ``"stream"`` (a bounded resident set).
        expert_cache: the resident set's size: ``"30%"`` of all experts, ``"512M"``, bytes, or ``"0"`` =
            every expert (an int is bytes).
        expert_direct_io: ``"auto"``, ``"on"`` or ``"off"`` (O_DIRECT reads of the stream mode).
        expert_io_threads: expert reader threads (0..64; 0 = read on the compute thread).
        expert_prefetch: ``"auto"`` (default), ``"on"`` or ``"off"``. Stream mode: while a MoE layer
            computes, read the experts the next layer's router ranks top-K on this layer's input
            (docs/experts.md, "Prefetch"); auto does so per layer while at least 70 % of those reads get
            used. Changes what is read and when, never the logits (with MOCE off).
        metallib: the path of strata.metallib for ``backend="metal"``; ``""`` = unset.
        metal_mtp_tile: the drafter's wide-class GEMV tile ``"L,R,S,K"`` on the Metal backends; ``""`` =
            the default tiles (docs/metal.md).
        isa: CPU kernel path: ``"auto"`` (the best this CPU runs), or ``"avx512+amx"``,
            ``"avx512"`` (without AMX), ``"avx2"``, ``"neon-i8mm"``, ``"neon-dotprod"``, ``"neon"``,
            ``"scalar"`` to force one (process-wide, applied when a model is loaded; a path this CPU
            cannot run is a ConfigError).
        repack: ``"auto"``, ``"on"`` or ``"off"``: interleave Q4_0 / Q5_0 / Q8_0 / Q2_K / Q3_K / Q4_K / Q5_K /
            Q6_K / IQ4_XS / IQ4_NL / Q5_1 weight rows at load for the kernels (docs/quantization.md).
        kv_type: how K/V cells are stored: ``"auto"`` (int8 for strata; fp16 for qwen3moe / glm4moe on
            x86-64 CPUs with AVX2+FMA+F16C, as llama.cpp's default cache, f32 elsewhere), ``"f32"``
            (logits equal to transformers' to float rounding), ``"f16"`` (half the bytes of f32) or
            ``"int8"`` (one fp16 scale per 64 values). CPU backend; deepseek4 keeps its own (docs/engine.md).
    """

    threads: int = 0
    backend: Literal["cpu", "metal-emu", "metal"] = "cpu"
    context_length: int = 0
    speculative: bool | None = None
    draft_steps: int = 3
    draft_chained: bool = True
    spec_sample: Literal["exact", "greedy"] = "exact"
    spec_min_p_schedule: tuple[float, ...] | None = None
    spec_min_cum_p: float | None = None
    mtp_sink: int = 64
    mtp_window: int = 256
    mtp_q4: bool = False
    mtp_q5: bool = False
    mtp_draft_q4: bool = True
    moce_bonus: float = 0.0
    moce_rank1: float = 1.0
    moce_protect: int = 0
    moce_draft: bool = False
    moce_window: float = 0.0
    moce_window_cut: float = 0.5
    moce_drafter_resident: bool = True
    expert_mode: Literal["mmap", "stream"] = "mmap"
    expert_cache: str = "0"
    expert_direct_io: Literal["auto", "on", "off"] = "auto"
    expert_io_threads: int = 4
    expert_prefetch: Literal["auto", "on", "off"] = "auto"
    metallib: str = ""
    metal_mtp_tile: str = ""
    isa: str = "auto"
    repack: Literal["auto", "on", "off"] = "auto"
    kv_type: Literal["auto", "f32", "f16", "int8"] = "auto"

    def __post_init__(self) -> None:
        if isinstance(self.spec_min_p_schedule, (list, tuple)):
            object.__setattr__(self, "spec_min_p_schedule", tuple(self.spec_min_p_schedule))
        if isinstance(self.spec_sample, str):
            object.__setattr__(self, "spec_sample", self.spec_sample.strip().lower())
        if isinstance(self.backend, str):
            object.__setattr__(self, "backend", self.backend.strip().lower())
        if isinstance(self.expert_prefetch, bool):  # True / False read as on / off
            object.__setattr__(self, "expert_prefetch", "on" if self.expert_prefetch else "off")
        for field in ("expert_mode", "expert_direct_io", "expert_prefetch", "isa", "repack", "kv_type"):
            if isinstance(getattr(self, field), str):
                object.__setattr__(self, field, getattr(self, field).strip().lower())
        if _is_int(self.expert_cache):
            object.__setattr__(self, "expert_cache", str(self.expert_cache))
        if isinstance(self.expert_cache, str):
            object.__setattr__(self, "expert_cache", self.expert_cache.strip())
        self._check_types()
        problems = _python_groups(self._python_env())
        if problems:
            raise ConfigError(_field_message(problems[0][1]))
        native_env = self._native_env()
        native, diagnostics = _strata_module().Settings.parse(native_env)
        if diagnostics:
            raise ConfigError(_field_message(_clip_values(str(diagnostics[0]), native_env)))
        values = native.as_dict()
        # The parser's canonical forms: "L,R,S,K" tiles, trimmed paths, "1" -> "on", ...
        object.__setattr__(self, "metal_mtp_tile", values["metal"]["mtp_tile"])
        object.__setattr__(self, "metallib", values["metal"]["metallib"])
        object.__setattr__(self, "expert_mode", values["experts"]["mode"])
        object.__setattr__(self, "expert_direct_io", values["experts"]["direct_io"])
        object.__setattr__(self, "expert_prefetch", values["experts"]["prefetch"])
        object.__setattr__(self, "repack", values["cpu"]["repack"])
        object.__setattr__(self, "kv_type", values["kv_type"])

    # ------------------------------------------------------------------------------ construction
    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, strict: bool = False) -> Config:
        """The settings of ``environ`` (default ``os.environ``); only ``STRATA_*`` keys are read.

        Each rejected group gives one :class:`ConfigWarning` and falls back to its defaults; unknown
        ``STRATA_*`` variables give one warning naming them. ``strict=True`` raises
        :class:`ConfigError` with every diagnostic instead.
        """
        config, diagnostics = cls.parse_env(environ)
        if diagnostics and strict:
            raise ConfigError("; ".join(diagnostics))
        for d in diagnostics:
            warnings.warn(d, ConfigWarning, stacklevel=2)
        return config

    @classmethod
    def parse_env(cls, environ: Mapping[str, str] | None = None) -> tuple[Config, list[str]]:
        """``(config, diagnostics)`` of ``environ`` without warning: the pure form of :meth:`from_env`."""
        env = {k: str(v) for k, v in (os.environ if environ is None else environ).items()
               if k.startswith("STRATA_")}
        native_env = {k: v for k, v in env.items()
                      if (k in _BY_ENV and _BY_ENV[k].native) or k in PROCESS_ENVS}
        settings, native_diagnostics = _strata_module().Settings.parse(native_env)
        native = settings.as_dict()
        diagnostics = [str(d) for d in native_diagnostics]
        values: dict[str, Any] = {
            "spec_sample": native["spec_sample"],
            "kv_type": native["kv_type"],
            "mtp_sink": int(native["mtp"]["sink"]),
            "mtp_window": int(native["mtp"]["window"]),
            "mtp_q4": bool(native["mtp"]["q4"]),
            "mtp_q5": bool(native["mtp"]["q5"]),
            "mtp_draft_q4": bool(native["mtp"]["draft_q4"]),
            "moce_bonus": float(native["moce"]["log_bonus"]),
            "moce_rank1": float(native["moce"]["rank1"]),
            "moce_protect": int(native["moce"]["protect"]),
            "moce_draft": bool(native["moce"]["draft"]),
            "moce_window": float(native["moce"]["window"]),
            "moce_window_cut": float(native["moce"]["window_cut"]),
            "moce_drafter_resident": bool(native["moce"]["drafter_resident"]),
            "metallib": str(native["metal"]["metallib"]),
            "metal_mtp_tile": str(native["metal"]["mtp_tile"]),
        }
        # The C++ settings hold float32; keep the text's own value when the group was accepted.
        if "retention" not in _rejected_groups(diagnostics):
            if "STRATA_METAL_SPEC_MIN_P_SCHEDULE" in env:
                values["spec_min_p_schedule"] = tuple(
                    float(p) for p in env["STRATA_METAL_SPEC_MIN_P_SCHEDULE"].split(","))
            if "STRATA_METAL_SPEC_MIN_CUM_P" in env:
                values["spec_min_cum_p"] = float(env["STRATA_METAL_SPEC_MIN_CUM_P"])
        if "moce" not in _rejected_groups(diagnostics):
            for name, key in (("STRATA_MOCE_BONUS", "moce_bonus"), ("STRATA_MOCE_RANK1", "moce_rank1"),
                              ("STRATA_MOCE_WINDOW", "moce_window"),
                              ("STRATA_MOCE_WINDOW_CUT", "moce_window_cut")):
                if name in env:
                    values[key] = float(env[name])
        problems = _python_groups(env)
        rejected = {group for group, _ in problems}
        diagnostics += [d for _, d in problems]
        values.update(_python_values(env, rejected))
        if "experts" not in _rejected_groups(diagnostics):
            # The parser's canonical names for mode / direct I/O; the cache keeps its text (its meaning).
            values["expert_mode"] = native["experts"]["mode"]
            values["expert_direct_io"] = native["experts"]["direct_io"]
            values["expert_io_threads"] = int(native["experts"]["io_threads"])
            values["expert_prefetch"] = native["experts"]["prefetch"]
            if "STRATA_EXPERT_CACHE" in env:
                values["expert_cache"] = env["STRATA_EXPERT_CACHE"].strip()
        if "cpu" not in _rejected_groups(diagnostics):
            values["isa"] = native["cpu"]["isa"]
            values["repack"] = native["cpu"]["repack"]
        cache_switch = env.get("STRATA_SPEC_CACHE")
        if cache_switch is not None and cache_switch.strip().lower() not in ON_WORDS | OFF_WORDS:
            diagnostics.append(f'STRATA_SPEC_CACHE: expected on or off, got "{_clip(cache_switch)}" '
                               "— the speculation cost cache stays on")
        known_elsewhere = SERVER_ENVS + PROCESS_ENVS + MODEL_ENVS
        unknown = sorted(k for k in env if k not in _BY_ENV and k not in known_elsewhere)
        if unknown:
            diagnostics.append(_unknown_message(unknown))
        return cls(**values), [_clip_values(d, env) for d in diagnostics]

    def replace(self, **changes: Any) -> Config:
        """A copy with some fields changed (validated like the constructor)."""
        return dataclasses.replace(self, **changes)

    # --------------------------------------------------------------------------------- exporting
    def to_env(self) -> dict[str, str]:
        """The ``STRATA_*`` variables that reproduce this config (unset retention settings are left out).

        ``Config.from_env(config.to_env()) == config`` for every valid config.
        """
        return {**self._python_env(), **self._native_env()}

    def _python_env(self) -> dict[str, str]:
        return {
            "STRATA_THREADS": str(self.threads),
            "STRATA_BACKEND": str(self.backend),
            "STRATA_CONTEXT": str(self.context_length),
            "STRATA_SPECULATIVE": {None: "auto", True: "on", False: "off"}[self.speculative],
            "STRATA_DRAFT_STEPS": str(self.draft_steps),
            "STRATA_DRAFT_CHAINED": "on" if self.draft_chained else "off",
        }

    def _native_env(self) -> dict[str, str]:
        env = {
            "STRATA_SPEC_SAMPLE": str(self.spec_sample),
            "STRATA_METAL_MTP_SINK": str(self.mtp_sink),
            "STRATA_METAL_MTP_WIN": str(self.mtp_window),
            "STRATA_METAL_MTP_Q4": "1" if self.mtp_q4 else "0",
            "STRATA_METAL_MTP_Q5": "1" if self.mtp_q5 else "0",
            "STRATA_METAL_MTP_DRAFT_Q4": "1" if self.mtp_draft_q4 else "0",
            "STRATA_MOCE_BONUS": _num(self.moce_bonus),
            "STRATA_MOCE_RANK1": _num(self.moce_rank1),
            "STRATA_MOCE_PROTECT": str(self.moce_protect),
            "STRATA_MOCE_DRAFT": "1" if self.moce_draft else "0",
            "STRATA_MOCE_WINDOW": _num(self.moce_window),
            "STRATA_MOCE_WINDOW_CUT": _num(self.moce_window_cut),
            "STRATA_MOCE_DRAFTER_RESIDENT": "1" if self.moce_drafter_resident else "0",
        }
        if self.spec_min_p_schedule is not None:
            env["STRATA_METAL_SPEC_MIN_P_SCHEDULE"] = ",".join(_num(p) for p in self.spec_min_p_schedule)
        if self.spec_min_cum_p is not None:
            env["STRATA_METAL_SPEC_MIN_CUM_P"] = _num(self.spec_min_cum_p)
        if self.metallib:
            env["STRATA_METALLIB"] = self.metallib
        if self.metal_mtp_tile:
            env["STRATA_METAL_MTP_TILE"] = self.metal_mtp_tile
        env.update({
            "STRATA_EXPERT_MODE": str(self.expert_mode),
            "STRATA_EXPERT_CACHE": str(self.expert_cache),
            "STRATA_EXPERT_DIRECT_IO": str(self.expert_direct_io),
            "STRATA_EXPERT_IO_THREADS": str(self.expert_io_threads),
            "STRATA_EXPERT_PREFETCH": str(self.expert_prefetch),
            "STRATA_ISA": str(self.isa),
            "STRATA_REPACK": str(self.repack),
            "STRATA_KV_TYPE": str(self.kv_type),
        })
        return env

    def apply_cpu(self) -> None:
        """Make ``isa`` the process's kernel path (``"auto"`` leaves the path as it is)."""
        if self.isa != "auto":
            _strata_module().force_isa(self.isa)

    def native(self) -> Any:
        """The engine's typed ``_strata.Settings`` of this config (every setting the C++ core reads:
        MTP cells and drafter format, retention, verification rule, MOCE routing, Metal, expert store,
        repack, K/V cell type), validated by the C++ settings parser; ``_strata.Engine(settings=...)``
        takes it once."""
        return _strata_module().Settings(self._native_env())

    @property
    def mtp_requant(self) -> str | None:
        """The drafter weight format R-11's settings ask for (docs/drafting.md): ``"q4"``, ``"q5"`` or
        ``None``. ``None`` leaves the default format, ``mtp_draft_q4`` (Q4_0 by ggml's rule where stored
        wider, CPU backend), which the engine reports as ``Engine.mtp_requant == "q4-ggml"``."""
        return "q4" if self.mtp_q4 else "q5" if self.mtp_q5 else None

    @property
    def retention_on(self) -> bool:
        """Whether the draft-retention policy is on (either retention setting is set)."""
        return self.spec_min_p_schedule is not None or self.spec_min_cum_p is not None

    # ------------------------------------------------------------------------------------ checks
    def _check_types(self) -> None:
        def need(ok: bool, field: str, what: str) -> None:
            if not ok:
                s = _BY_FIELD[field]
                shown = _clip(repr(getattr(self, field)))
                raise ConfigError(f"Config.{field} ({s.env}) must be {what}, got {shown}")

        for field in ("threads", "context_length", "draft_steps", "mtp_sink", "mtp_window", "moce_protect",
                      "expert_io_threads"):
            need(_is_int(getattr(self, field)), field, "an integer")
        for field in ("moce_bonus", "moce_rank1", "moce_window", "moce_window_cut"):
            need(_is_number(getattr(self, field)), field, "a number")
        need(isinstance(self.moce_draft, bool), "moce_draft", "True or False")
        need(isinstance(self.moce_drafter_resident, bool), "moce_drafter_resident", "True or False")
        need(isinstance(self.expert_prefetch, str), "expert_prefetch", "'auto', 'on' or 'off'")
        need(isinstance(self.draft_chained, bool), "draft_chained", "True or False")
        need(isinstance(self.mtp_q4, bool), "mtp_q4", "True or False")
        need(isinstance(self.mtp_q5, bool), "mtp_q5", "True or False")
        need(isinstance(self.mtp_draft_q4, bool), "mtp_draft_q4", "True or False")
        need(self.speculative is None or isinstance(self.speculative, bool), "speculative",
             "None (auto), True or False")
        need(isinstance(self.spec_sample, str), "spec_sample", "'exact' or 'greedy'")
        need(isinstance(self.backend, str), "backend", "'cpu', 'metal-emu' or 'metal'")
        need(isinstance(self.expert_mode, str), "expert_mode", "'mmap' or 'stream'")
        need(isinstance(self.expert_cache, str), "expert_cache",
             "a size string ('30%', '512M', '0') or bytes")
        need(isinstance(self.expert_direct_io, str), "expert_direct_io", "'auto', 'on' or 'off'")
        need(isinstance(self.metallib, str), "metallib", "a path (str)")
        need(isinstance(self.metal_mtp_tile, str), "metal_mtp_tile", "an 'L,R,S,K' string")
        need(isinstance(self.isa, str), "isa",
             "'auto', 'avx512+amx', 'avx512', 'avx2', 'neon-i8mm', 'neon-dotprod', 'neon' or 'scalar'")
        need(isinstance(self.repack, str), "repack", "'auto', 'on' or 'off'")
        need(isinstance(self.kv_type, str), "kv_type", "'auto', 'f32', 'f16' or 'int8'")
        need(self.spec_min_cum_p is None or _is_number(self.spec_min_cum_p), "spec_min_cum_p",
             "None or a number in [0, 1]")
        sched = self.spec_min_p_schedule
        need(sched is None or (isinstance(sched, tuple) and all(_is_number(p) for p in sched)),
             "spec_min_p_schedule", "None or a sequence of 1 to 8 probabilities")
        # Values the text form cannot carry faithfully are refused here rather than by the parser.
        for field in ("moce_bonus", "moce_rank1", "moce_window", "moce_window_cut", "spec_min_cum_p"):
            v = getattr(self, field)
            need(v is None or math.isfinite(v), field, "finite")
        need(sched is None or all(math.isfinite(p) for p in sched), "spec_min_p_schedule",
             "finite probabilities")

    def describe(self) -> list[tuple[str, str, str]]:
        """``(variable, value, default)`` for every setting, for display."""
        env = self.to_env()
        return [(s.env, env.get(s.env, "unset"), s.default) for s in SETTINGS]


# ----------------------------------------------------------------------------------------- helpers
def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _num(v: float) -> str:
    return repr(float(v))


_ECHO_CHARS = 80  # a diagnostic quotes at most this much of a bad value (a variable may hold megabytes)
_LONG_WORD_RE = re.compile(r"[^\s…]{" + str(_ECHO_CHARS + 1) + ",}")
_MAX_INT_DIGITS = 24  # more significant digits than any setting's range; int() refuses > 4300 digits


def _clip(text: str) -> str:
    """``text`` as a diagnostic quotes it: at most ~80 characters, with the full length when cut."""
    if len(text) <= _ECHO_CHARS:
        return text
    return f"{text[:_ECHO_CHARS - 20]}…({len(text)} characters)"


def _clip_values(diagnostic: str, env: Mapping[str, str]) -> str:
    """A diagnostic with every long value of ``env`` it quotes clipped (the C++ parser quotes values)."""
    for value in env.values():
        if len(value) > _ECHO_CHARS and value in diagnostic:
            diagnostic = diagnostic.replace(value, _clip(value))
        stripped = value.strip()
        if len(stripped) > _ECHO_CHARS and stripped in diagnostic:
            diagnostic = diagnostic.replace(stripped, _clip(stripped))
    # Parts of a value (one item of a list) and anything else overlong, quoted or not.
    return _LONG_WORD_RE.sub(lambda m: _clip(m.group()), diagnostic)


def _to_int(t: str) -> int:
    """int() of a checked integer text, leading zeros dropped first (int() refuses > 4300 digits)."""
    sign = "-" if t.startswith("-") else ""
    return int(sign + (t.lstrip("+-").lstrip("0") or "0"))


def _parse_int(text: str, lo: int, hi: int) -> tuple[int | None, str]:
    t = text.strip()
    if not _INT_RE.fullmatch(t):
        return None, f'not an integer: "{_clip(text)}"'
    if len(t.lstrip("+-").lstrip("0")) > _MAX_INT_DIGITS:  # out of every range, and too long for int()
        return None, f"{_clip(t)} is outside [{lo}, {hi}]"
    v = _to_int(t)
    if not lo <= v <= hi:
        return None, f"{t} is outside [{lo}, {hi}]"
    return v, ""


def _python_groups(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """(group, diagnostic) of each rejected Python-side group, in settings order."""
    problems: dict[str, str] = {}

    def reject(group: str, name: str, why: str) -> None:
        problems.setdefault(group, f"{name}: {why} — {_FALLBACK[group]}")

    if "STRATA_THREADS" in env:
        v, why = _parse_int(env["STRATA_THREADS"], 0, MAX_THREADS)
        if v is None:
            reject("threads", "STRATA_THREADS", why)
    if "STRATA_BACKEND" in env:
        why = _backend_problem(env["STRATA_BACKEND"])
        if why:
            reject("backend", "STRATA_BACKEND", why)
    if "STRATA_CONTEXT" in env:
        v, why = _parse_int(env["STRATA_CONTEXT"], 0, MAX_CONTEXT)
        if v is None:
            reject("context", "STRATA_CONTEXT", why)
        elif 0 < v < MIN_CONTEXT:
            reject("context", "STRATA_CONTEXT",
                   f"{v} is below the minimum of {MIN_CONTEXT} (0 = the model's)")
    if "STRATA_SPECULATIVE" in env:
        s = env["STRATA_SPECULATIVE"].strip().lower()
        if s != "auto" and s not in ON_WORDS and s not in OFF_WORDS:
            reject("speculation", "STRATA_SPECULATIVE",
                   f'expected auto, on or off, got "{_clip(env["STRATA_SPECULATIVE"])}"')
    if "STRATA_DRAFT_STEPS" in env:
        v, why = _parse_int(env["STRATA_DRAFT_STEPS"], 1, MAX_DRAFT_STEPS)
        if v is None:
            reject("speculation", "STRATA_DRAFT_STEPS", why)
    if "STRATA_DRAFT_CHAINED" in env:
        c = env["STRATA_DRAFT_CHAINED"].strip().lower()
        if c not in ON_WORDS and c not in OFF_WORDS:
            reject("speculation", "STRATA_DRAFT_CHAINED",
                   f'expected on or off, got "{_clip(env["STRATA_DRAFT_CHAINED"])}"')
    order = ["threads", "backend", "context", "speculation"]
    return [(g, problems[g]) for g in order if g in problems]


def _backend_problem(text: str) -> str:
    """Why a STRATA_BACKEND value cannot be used by this build ("" when it can)."""
    b = text.strip().lower()
    if b in ("cpu", "metal-emu"):
        return ""
    if b == "metal":
        if _strata_module().metal_device_available():
            return ""
        return ('"metal" is not a backend of this build: the Metal GPU backend needs macOS (a build with '
                "metal-cpp); use metal-emu to run the Metal kernels on the CPU emulator")
    return f'"{_clip(text)}" is not a backend (available: cpu, metal-emu, metal)'


def _python_values(env: Mapping[str, str], rejected: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "threads" not in rejected and "STRATA_THREADS" in env:
        out["threads"] = _to_int(env["STRATA_THREADS"].strip())
    if "backend" not in rejected and "STRATA_BACKEND" in env:
        out["backend"] = env["STRATA_BACKEND"].strip().lower()
    if "context" not in rejected and "STRATA_CONTEXT" in env:
        out["context_length"] = _to_int(env["STRATA_CONTEXT"].strip())
    if "speculation" not in rejected:
        if "STRATA_SPECULATIVE" in env:
            s = env["STRATA_SPECULATIVE"].strip().lower()
            out["speculative"] = None if s == "auto" else s in ON_WORDS
        if "STRATA_DRAFT_STEPS" in env:
            out["draft_steps"] = _to_int(env["STRATA_DRAFT_STEPS"].strip())
        if "STRATA_DRAFT_CHAINED" in env:
            out["draft_chained"] = env["STRATA_DRAFT_CHAINED"].strip().lower() in ON_WORDS
    return out


def _strata_module() -> Any:
    from strata import _strata

    return _strata


def _rejected_groups(diagnostics: list[str]) -> set[str]:
    groups = set()
    for d in diagnostics:
        name = d.split(":", 1)[0]
        if name in _BY_ENV:
            groups.add(_BY_ENV[name].group)
    return groups


def _field_message(diagnostic: str) -> str:
    """A parser diagnostic rephrased for explicit construction: the field first, no fallback clause."""
    name, _, rest = diagnostic.partition(":")
    why = rest.split(" — ")[0].strip()
    setting = _BY_ENV.get(name)
    if setting is None:
        return diagnostic
    return f"Config.{setting.field} ({name}): {why}; allowed: {setting.rule}"


def _unknown_message(unknown: list[str]) -> str:
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, list(_BY_ENV), n=1)
        parts.append(f"{_clip(name)} (did you mean {close[0]}?)" if close else _clip(name))
    return f"unknown setting{'s' if len(unknown) > 1 else ''} ignored: {', '.join(parts)}"
