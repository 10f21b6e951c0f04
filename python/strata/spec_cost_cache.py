"""Adaptive speculation's measured costs kept across processes: a small JSON file in the user's cache
folder, so that the first session of a new process (every ``strata generate`` run) starts seeded instead
of paying the probe (docs/drafting.md, "Costs across processes").

An entry is keyed by what makes costs comparable: the model file (absolute path, size, modification
time; the separate MTP file's too), ``repr(Config)`` (threads, ISA choice, store mode and residency,
drafting settings, ...), the CPU's model name and logical CPU count, and the strata version. Only the
costs the engine is seeded with are stored (window, draft-step and plain-step seconds), never text: those
of the last ``RUNS_REMEMBERED`` runs, and a new session is seeded with each cost at the fastest of its
``RUNS_KEPT`` most recent measurements among them (each is already a run's median of its recent samples;
other processes only ever add time, so one run measured under a passing load must not decide whether
the next one drafts — the engine's viability test judges its own samples the same way, draft/adaptive.h).

A run stores only the costs it measured itself (``measured_run``: the engine counts its own samples;
a cost it never timed holds just the seed it started from and is stored as 0). So a cost ages out when
``RUNS_REMEMBERED`` runs in a row did not measure it: a seeded session that finds drafting hopeless runs
no drafts, and before this rule its copy of the seed was stored as a new measurement, so one slow probe
(a cold first draft step and window) kept drafting off for that model and settings for good. A seed
without a draft step and a 2-row window does not let the engine skip its probe where the costs say
drafting is hopeless, and one without two window sizes (their line prices the others) does not let it
skip the probe and the warm-up. Most runs measure few costs: a session's first draft step
and first window of each size are cold, not samples, and a call that explores once (unpredictable text)
measures none of them; with only the last ``RUNS_KEPT`` runs kept, the windows aged out of the seed after
four such runs and every fifth ``strata generate`` process paid the probe and the warm-up again.

A run also stores how many drafts of each step were judged and accepted, in the verification context it
ran in (``accept_key``: 0 greedy, else the sampling temperature), and the seed carries, per context, the
pooled acceptance of the ``ACCEPT_RUNS_POOLED`` most recent runs in it (``acceptance_priors``; a step with
fewer than ``MIN_JUDGED`` judged drafts among them has none). The engine takes the one matching a session's
context as its acceptance prior (draft/adaptive.h, "Acceptance prior"): the costs alone left a seeded
session pricing drafting at one half until it had explored, which on text that turned predictable later
(or early) cost most of what drafting gains.

The file is a cache: a missing, unreadable, corrupt, oversized or foreign file, or an entry with wrong
types or values, is ignored (a broken file: one warning through ``logging``, printed to stderr when the
application configured no logging; a bad entry: a debug message) and the next save rewrites the file
atomically (a temporary file, then ``os.replace``) with the valid entries only, the ``MAX_ENTRIES`` most
recently used. A folder that cannot be created or written means no cache and no error.

Settings: ``STRATA_SPEC_CACHE`` = on | off (also 1/0, true/false, yes/no; default on; a malformed value
is a ``Config.from_env`` diagnostic and leaves it on), ``STRATA_CACHE_DIR`` = the folder (default
``$XDG_CACHE_HOME/strata``, else ``~/.cache/strata``).
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from strata.config import OFF_WORDS
from strata.user_cache import user_cache_dir

__all__ = [
    "ENV_DIR",
    "ENV_SWITCH",
    "FILE_NAME",
    "MAX_ENTRIES",
    "SpecCostCache",
    "cache_dir",
    "measured_run",
    "seed_entry",
]

ENV_SWITCH = "STRATA_SPEC_CACHE"
ENV_DIR = "STRATA_CACHE_DIR"
FILE_NAME = "spec-costs.json"
FORMAT = "strata-spec-costs"
FORMAT_VERSION = 1
MAX_ENTRIES = 32  # (model, settings, machine, version) keys kept, the most recently used first
RUNS_KEPT = 4  # measurements per cost the seed takes the fastest of (the most recent ones)
RUNS_REMEMBERED = 16  # runs kept per key: a cost none of them measured is no longer seeded
MAX_FILE_BYTES = 1 << 20  # a file this large is not one this module wrote (32 full entries are < 300 KB)
MAX_SECONDS = 3600.0  # the engine's bound on a seeded cost (Engine.spec_adaptive_seed)
MAX_WINDOW_SIZES = 17  # windows of 1..kAdaptiveMaxDrafts + 1 rows (draft/adaptive.h)
MAX_DRAFT_STEPS = 16  # kAdaptiveMaxDrafts
ACCEPT_RUNS_POOLED = 8  # most recent runs of one verification context pooled into its acceptance prior
MIN_JUDGED = 8  # judged drafts of a step (pooled) below which that step has no prior
MAX_ACCEPT_PRIORS = 4  # verification contexts a seed carries priors for (kMaxAcceptPriors)
MAX_ACCEPT_KEY = 1e6  # a context key (0 greedy, else the temperature) is below it (Engine.spec_adaptive_seed)

log = logging.getLogger(__name__)


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The user's cache folder for strata: ``$STRATA_CACHE_DIR``, else ``$XDG_CACHE_HOME/strata``, else
    ``~/.cache/strata`` (empty variables count as unset)."""
    env = os.environ if environ is None else environ
    if env.get(ENV_DIR):
        return Path(env[ENV_DIR])
    return user_cache_dir(env)


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``STRATA_SPEC_CACHE`` lets the cache be used (on unless set to an off spelling)."""
    env = os.environ if environ is None else environ
    return env.get(ENV_SWITCH, "on").strip().lower() not in OFF_WORDS


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else what ``platform`` says)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("model name", "Hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def file_identity(path: str) -> list[Any]:
    """[absolute path, size, mtime in ns] of a file (["", 0, 0] for none)."""
    if not path:
        return ["", 0, 0]
    st = os.stat(path)
    return [os.path.realpath(path), st.st_size, st.st_mtime_ns]


class SpecCostCache:
    """The cost entries of one model on this machine and strata version, in ``folder / FILE_NAME``."""

    def __init__(self, folder: Path, where: dict[str, Any]) -> None:
        self.path = folder / FILE_NAME
        self.where = where

    @classmethod
    def for_model(cls, model_path: str, mtp_path: str, version: str, on: bool | None = None,
                  environ: Mapping[str, str] | None = None) -> SpecCostCache | None:
        """The cache of a model file, or None when it is off (``on``; None = ``STRATA_SPEC_CACHE``), the
        file cannot be stat'ed or there is no folder for it (no home folder)."""
        if not (enabled(environ) if on is None else on):
            return None
        try:
            files = {"model": file_identity(model_path), "mtp": file_identity(mtp_path)}
            folder = cache_dir(environ)
        except (OSError, RuntimeError, KeyError):  # RuntimeError/KeyError: no home folder to be found
            return None
        where = {**files, "cpu": cpu_name(), "cpus": os.cpu_count() or 0, "strata": version}
        return cls(folder, where)

    # ------------------------------------------------------------------------------------ reading
    def load(self) -> dict[str, dict[str, Any]]:
        """Costs per ``repr(Config)`` stored for this model, machine and version ({} when none): each
        cost at its fastest over the key's last runs (what a new session is seeded with)."""
        return {config: fastest(runs) for config, runs in self.load_runs().items()}

    def load_runs(self) -> dict[str, list[dict[str, Any]]]:
        """The stored runs' costs per ``repr(Config)``, newest first ({} when none)."""
        out: dict[str, list[dict[str, Any]]] = {}
        for entry in self._entries(warn=True):
            if entry["where"] == self.where:
                out[entry["config"]] = list(entry["runs"])
        return out

    def _entries(self, warn: bool) -> list[dict[str, Any]]:
        """The file's valid entries, most recently used first (a broken file: none)."""
        problem, raw = self._read()
        if problem:
            if warn:
                log.warning("strata: speculation cost cache %s %s; ignored (it is rewritten at the next "
                            "save; STRATA_SPEC_CACHE=off turns the cache off)", self.path, problem)
            return []
        entries = []
        for i, e in enumerate(raw):
            why = _entry_problem(e)
            if why:
                log.debug("strata: %s: entry %d ignored: %s", self.path, i, why)
            else:
                entries.append(e)
        entries.sort(key=lambda e: -float(e["used"]))
        return entries

    def _read(self) -> tuple[str, list[Any]]:
        """("", entries) or (what is wrong, [])."""
        try:
            with open(self.path, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return "", []
        except OSError as exc:
            return f"cannot be read ({exc.strerror or exc})", []
        if len(data) > MAX_FILE_BYTES:
            return f"is larger than {MAX_FILE_BYTES >> 10} KiB", []
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            return f"is not valid JSON ({str(exc)[:80]})", []
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            return f'is not a strata cost cache (no "format": "{FORMAT}")', []
        if doc.get("version") != FORMAT_VERSION or not isinstance(doc.get("entries"), list):
            version = str(doc.get("version"))[:20]
            return f"has format version {version} (this strata reads {FORMAT_VERSION})", []
        return "", list(doc["entries"])

    # ------------------------------------------------------------------------------------ writing
    def save(self, config_key: str, stats: Mapping[str, Any]) -> bool:
        """Store an engine's ``spec_adaptive_stats()`` for ``config_key``: re-read the file, put this
        run's costs first in the key's entry (with its ``RUNS_REMEMBERED - 1`` previous runs) and that entry
        first in the file, keep the ``MAX_ENTRIES`` most recent valid entries and replace the file
        atomically. False (and a debug message) when the folder cannot be written or the costs are not
        valid."""
        run = measured_run(stats)
        entries = self._entries(warn=False)
        mine = [e for e in entries if e["where"] == self.where and e["config"] == config_key]
        before = list(mine[0]["runs"]) if mine else []
        entry = {"where": self.where, "config": config_key, "used": time.time(),
                 "runs": kept_runs(run, before)}
        why = _entry_problem(entry)
        if why:
            log.debug("strata: speculation costs not cached: %s", why)
            return False
        kept = [e for e in entries if not (e["where"] == self.where and e["config"] == config_key)]
        doc = {"format": FORMAT, "version": FORMAT_VERSION, "entries": [entry, *kept][:MAX_ENTRIES]}
        folder = self.path.parent
        tmp = ""
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".spec-costs-", suffix=".tmp", dir=folder)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(doc, f, separators=(",", ":"), allow_nan=False)
            os.replace(tmp, self.path)
        except OSError as exc:
            log.debug("strata: speculation cost cache %s not written: %s", self.path, exc)
            if tmp:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            return False
        return True


def measured_run(stats: Mapping[str, Any]) -> dict[str, Any]:
    """One run's costs as the cache keeps them, from an engine's ``spec_adaptive_stats()``: each cost the
    run measured itself, 0 for one it did not (its sample count is 0: the value is only the seed it was
    given). Stats without sample counts (written by hand) count as measured."""
    def own(value: Any, samples: Any) -> float:
        return float(value) if samples is None or int(samples) > 0 else 0.0

    verify = list(stats["verify_seconds"])
    counts = stats.get("verify_samples")
    if counts is None or len(counts) != len(verify):
        counts = [None] * len(verify)
    run: dict[str, Any] = {
        "verify_seconds": [own(v, n) for v, n in zip(verify, counts, strict=True)],
        "draft_step_seconds": own(stats["draft_step_seconds"], stats.get("draft_step_samples")),
        "plain_seconds": own(stats["plain_seconds"], stats.get("plain_samples"))}
    # The drafts it judged, in the one verification context it counted them in (acceptance_priors).
    key, judged, accepted = stats.get("accept_key"), stats.get("judged"), stats.get("accepted")
    if (key is not None and _accept_key(key) and judged and accepted and sum(judged) > 0
            and len(judged) == len(accepted) <= MAX_DRAFT_STEPS):
        run.update(accept_key=float(key), judged=[int(x) for x in judged],
                   accepted=[int(x) for x in accepted])
    return run


def seed_entry(stats: Mapping[str, Any], runs_before: list[dict[str, Any]]) -> dict[str, Any]:
    """What a Model keeps per settings key while it runs (``Model.adaptive_costs``): a session's latest
    ``spec_adaptive_stats()`` snapshot, ``runs`` (its measured costs first, then the ``RUNS_REMEMBERED - 1``
    runs before it with as many window sizes) and ``seed`` (each cost at the fastest of its ``RUNS_KEPT``
    most recent measurements in ``runs``: what the next session with the same settings is seeded with)."""
    runs = kept_runs(measured_run(stats), runs_before)
    return {**stats, "runs": runs, "seed": fastest(runs)}


def kept_runs(run: dict[str, Any], before: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``run`` first, then the ``RUNS_REMEMBERED - 1`` runs before it, window lists of one length."""
    return same_sizes([run, *before][:RUNS_REMEMBERED])


def same_sizes(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs with their window lists padded with 0 (not measured) to the longest: a short call drafts
    with fewer window sizes (``max_tokens`` near ``draft_steps``) and must not drop the other runs."""
    sizes = max(len(r["verify_seconds"]) for r in runs)
    return [r if len(r["verify_seconds"]) == sizes
            else {**r, "verify_seconds": [*r["verify_seconds"], *[0.0] * (sizes - len(r["verify_seconds"]))]}
            for r in runs]


def fastest(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each cost at the fastest of its ``RUNS_KEPT`` most recent measurements in ``runs`` (newest first;
    0 = none of them measured it; one window-size list): a run that did not measure a cost neither
    replaces its older measurements nor counts among the ones kept. With ``acceptance_priors`` where the
    runs counted judged drafts."""
    def low(values: list[float]) -> float:
        measured = [v for v in values if v > 0.0][:RUNS_KEPT]
        return min(measured) if measured else 0.0

    sizes = len(runs[0]["verify_seconds"])
    seed: dict[str, Any] = {
        "verify_seconds": [low([r["verify_seconds"][m] for r in runs]) for m in range(sizes)],
        "draft_step_seconds": low([r["draft_step_seconds"] for r in runs]),
        "plain_seconds": low([r["plain_seconds"] for r in runs])}
    priors = acceptance_priors(runs)
    if priors:
        seed["acceptance_priors"] = priors
    return seed


def acceptance_priors(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per verification context (newest first, at most ``MAX_ACCEPT_PRIORS``): the pooled acceptance of each
    draft step over the context's ``ACCEPT_RUNS_POOLED`` most recent runs, accepted / judged, or -1 where
    fewer than ``MIN_JUDGED`` drafts of that step were judged. Runs without counts are skipped."""
    by_key: dict[float, list[dict[str, Any]]] = {}
    for r in runs:
        if "accept_key" in r:
            by_key.setdefault(float(r["accept_key"]), []).append(r)
    out: list[dict[str, Any]] = []
    for key, rs in by_key.items():
        if len(out) == MAX_ACCEPT_PRIORS:
            break
        rs = rs[:ACCEPT_RUNS_POOLED]
        steps = max(len(r["judged"]) for r in rs)
        accept = []
        for j in range(steps):
            judged = sum(r["judged"][j] for r in rs if j < len(r["judged"]))
            accepted = sum(r["accepted"][j] for r in rs if j < len(r["accepted"]))
            accept.append(accepted / judged if judged >= MIN_JUDGED else -1.0)
        if any(a >= 0.0 for a in accept):
            out.append({"key": key, "accept": accept})
    return out


def _number_below(x: object, bound: float) -> bool:
    """A real number (not a bool) in [0, bound)."""
    return (isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
            and 0.0 <= x < bound)


def _accept_key(x: object) -> bool:
    return _number_below(x, MAX_ACCEPT_KEY)


def _seconds(x: object) -> bool:
    return _number_below(x, MAX_SECONDS)


def _entry_problem(e: object) -> str:
    """Why an entry cannot seed an engine ("" when it can)."""
    if not isinstance(e, dict):
        return "not an object"
    where, config, used, runs = e.get("where"), e.get("config"), e.get("used"), e.get("runs")
    if not isinstance(where, dict) or not isinstance(config, str) or not isinstance(runs, list):
        return "missing or mistyped where/config/runs"
    if not isinstance(used, (int, float)) or isinstance(used, bool) or not math.isfinite(used):
        return "missing or mistyped 'used'"
    if not 1 <= len(runs) <= RUNS_REMEMBERED:
        return f"runs must hold 1..{RUNS_REMEMBERED} runs' costs"
    for costs in runs:
        why = _costs_problem(costs)
        if why:
            return why
    if len({len(r["verify_seconds"]) for r in runs}) != 1:
        return "the runs' verify_seconds differ in length"
    return ""


def _costs_problem(costs: object) -> str:
    """Why one run's costs cannot seed an engine ("" when they can)."""
    if not isinstance(costs, dict):
        return "a run's costs are not an object"
    verify = costs.get("verify_seconds")
    if not isinstance(verify, list) or not 1 <= len(verify) <= MAX_WINDOW_SIZES:
        return f"verify_seconds must be a list of 1..{MAX_WINDOW_SIZES} costs"
    if not all(_seconds(x) for x in verify):
        return f"verify_seconds must be seconds in [0, {MAX_SECONDS:g})"
    for name in ("draft_step_seconds", "plain_seconds"):
        if not _seconds(costs.get(name)):
            return f"{name} must be seconds in [0, {MAX_SECONDS:g})"
    if "accept_key" in costs:
        key, judged, accepted = costs.get("accept_key"), costs.get("judged"), costs.get("accepted")
        if not _accept_key(key):
            return f"accept_key must be a number in [0, {MAX_ACCEPT_KEY:g}) (0 greedy, else the temperature)"

        def counts(x: object) -> bool:
            return (isinstance(x, list) and 1 <= len(x) <= MAX_DRAFT_STEPS
                    and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**53 for v in x))

        if not (isinstance(judged, list) and isinstance(accepted, list) and counts(judged)
                and counts(accepted) and len(judged) == len(accepted)):
            return f"judged and accepted must be two lists of 1..{MAX_DRAFT_STEPS} counts"
        if any(a > j for a, j in zip(accepted, judged, strict=True)):
            return "a step accepted more drafts than it judged"
    elif "judged" in costs or "accepted" in costs:
        return "judged and accepted need an accept_key"
    return ""
