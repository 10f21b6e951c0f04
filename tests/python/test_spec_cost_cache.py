"""The cross-process cache of adaptive speculation's costs (strata.spec_cost_cache, docs/drafting.md):
a fresh Model (as a new process makes) with the same settings starts seeded from the file, other settings
do not, broken files are ignored and repaired, the off switch reads and writes nothing, and the
temperature-0 text stays plain decoding's. Every test keeps the cache in a temporary folder."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

import strata
from strata import spec_cost_cache as scc
from strata.convert import make_random_strata
from strata.model import DEMO_MODEL_PATH
from test_cli_options import TINY

PROMPT = "import os\n\ndef read_config(path):\n    "
CONFIG = strata.Config(speculative=None, threads=1)
KEY = repr(CONFIG)


@pytest.fixture(autouse=True)
def cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("STRATA_CACHE_DIR", str(folder))
    monkeypatch.setenv("STRATA_SPEC_CACHE", "on")
    return folder


def _generate(model: strata.Model, config: strata.Config = CONFIG,
              tokens: int = 48) -> tuple[str, strata.GenerationStats]:
    s = model.session(config=config, sampling=strata.SamplingPolicy(temperature=0.0))
    text = "".join(s.generate(PROMPT, max_tokens=tokens))
    return text, s.stats


def _where() -> dict[str, object]:
    """The key part of the demo model on this machine and version."""
    cache = scc.SpecCostCache.for_model(str(DEMO_MODEL_PATH), "", strata.__version__)
    assert cache is not None
    return cache.where


def _entries(folder: Path) -> list[dict[str, object]]:
    doc = json.loads((folder / scc.FILE_NAME).read_text())
    assert doc["format"] == scc.FORMAT and doc["version"] == scc.FORMAT_VERSION
    return list(doc["entries"])


def test_a_new_model_with_the_same_settings_starts_seeded(cache_folder: Path) -> None:
    first = strata.Model()
    assert first.spec_cost_cache == str(cache_folder / scc.FILE_NAME)
    assert first.adaptive_costs == {}
    text, st = _generate(first)
    assert not st.seeded
    (entry,) = _entries(cache_folder)
    assert entry["config"] == KEY
    (run,) = entry["runs"]  # type: ignore[misc]
    # Costs, and the drafts it judged in its verification context (never text).
    assert set(run) <= {"verify_seconds", "draft_step_seconds", "plain_seconds", "accept_key", "judged",
                        "accepted"}
    assert {"verify_seconds", "draft_step_seconds", "plain_seconds"} <= set(run)

    again = strata.Model()  # what the next process does
    assert KEY in again.adaptive_costs
    seeded_text, st2 = _generate(again)
    assert st2.seeded and st2.as_dict()["seeded"] is True
    assert "seeded with earlier costs" in st2.summary()
    plain, _ = _generate(strata.Model(spec_cost_cache=False), strata.Config(speculative=False, threads=1))
    assert seeded_text == text == plain

    # Other settings are other costs: not seeded, and stored beside the first entry.
    _, st3 = _generate(strata.Model(), CONFIG.replace(threads=2), tokens=8)
    assert not st3.seeded
    assert {e["config"] for e in _entries(cache_folder)} == {KEY, repr(CONFIG.replace(threads=2))}


def test_entries_of_another_version_or_model_file_are_not_used(cache_folder: Path) -> None:
    _generate(strata.Model(), tokens=8)
    doc = json.loads((cache_folder / scc.FILE_NAME).read_text())
    other_version = json.loads(json.dumps(doc["entries"][0]))
    other_version["where"]["strata"] = "0.0.0-other"
    other_file = json.loads(json.dumps(doc["entries"][0]))
    other_file["where"]["model"][2] += 1  # the same path, modified since
    doc["entries"] = [other_version, other_file]
    (cache_folder / scc.FILE_NAME).write_text(json.dumps(doc))
    model = strata.Model()
    assert model.adaptive_costs == {}
    _, st = _generate(model, tokens=8)
    assert not st.seeded
    entries = _entries(cache_folder)  # the foreign entries stay (another install may use them)
    assert len(entries) == 3 and entries[0]["where"] == _where()


_GOOD_COSTS = {"verify_seconds": [0.0, 0.002, 0.0, 0.0], "draft_step_seconds": 0.0005,
               "plain_seconds": 0.0005}
_BROKEN_FILES: dict[str, bytes] = {
    "empty": b"",
    "truncated": b'{"format": "strata-spec-costs", "version": 1, "entries": [{"where"',
    "not utf-8": b"\xff\xfe\x00garbage",
    "a list": b"[]",
    "alien json": b'{"hello": "world"}',
    "future version": json.dumps({"format": scc.FORMAT, "version": 99, "entries": []}).encode(),
    "deeply nested": b"[" * 50_000 + b"]" * 50_000,
    "oversized": b" " * (scc.MAX_FILE_BYTES + 1),
}


@pytest.mark.parametrize("name", list(_BROKEN_FILES))
def test_a_broken_file_is_ignored_with_one_warning_then_rewritten(
        name: str, cache_folder: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache_folder.mkdir(parents=True)
    (cache_folder / scc.FILE_NAME).write_bytes(_BROKEN_FILES[name])
    with caplog.at_level(logging.WARNING, logger="strata.spec_cost_cache"):
        model = strata.Model()
    warned = [r for r in caplog.records if r.name == "strata.spec_cost_cache"]
    assert len(warned) == 1 and str(cache_folder / scc.FILE_NAME) in warned[0].getMessage()
    assert model.adaptive_costs == {}
    _, st = _generate(model, tokens=8)
    assert not st.seeded
    assert [e["config"] for e in _entries(cache_folder)] == [KEY]  # repaired: valid, ours only
    assert not [p for p in cache_folder.iterdir() if p.name != scc.FILE_NAME]  # no temporary left


def test_bad_entries_are_dropped_and_good_ones_kept(cache_folder: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    where = _where()
    good_other = {"where": where, "config": "Config(other)", "used": 1.0, "runs": [_GOOD_COSTS]}
    bad = [
        "not an entry",
        {"where": where, "config": KEY, "used": 2.0, "runs": [{**_GOOD_COSTS, "plain_seconds": -1.0}]},
        {"where": where, "config": KEY, "used": 2.0,
         "runs": [{**_GOOD_COSTS, "draft_step_seconds": "fast"}]},
        {"where": where, "config": KEY, "used": 2.0, "runs": [{**_GOOD_COSTS, "verify_seconds": []}]},
        {"where": where, "config": KEY, "used": 2.0, "runs": [{**_GOOD_COSTS, "verify_seconds": [1e9]}]},
        {"where": where, "config": 7, "used": 2.0, "runs": [_GOOD_COSTS]},
        {"where": where, "config": KEY, "used": 2.0, "runs": [_GOOD_COSTS] * (scc.RUNS_REMEMBERED + 1)},
        {"where": where, "config": KEY, "used": 2.0,
         "runs": [_GOOD_COSTS, {**_GOOD_COSTS, "verify_seconds": [0.001]}]},
    ]
    text = json.dumps({"format": scc.FORMAT, "version": scc.FORMAT_VERSION, "entries": [*bad, good_other]})
    nan = {"where": where, "config": KEY, "used": 2.0, "runs": [{**_GOOD_COSTS, "plain_seconds": 0.0}]}
    text = text[:-2] + ", " + json.dumps(nan).replace('"plain_seconds": 0.0', '"plain_seconds": NaN') + "]}"
    cache_folder.mkdir(parents=True)
    (cache_folder / scc.FILE_NAME).write_text(text)
    with caplog.at_level(logging.WARNING, logger="strata.spec_cost_cache"):
        model = strata.Model()
    assert not [r for r in caplog.records if r.name == "strata.spec_cost_cache"]  # entries: debug only
    assert list(model.adaptive_costs) == ["Config(other)"]  # none of the bad ones seeds KEY
    _, st = _generate(model, tokens=8)
    assert not st.seeded
    assert [e["config"] for e in _entries(cache_folder)] == [KEY, "Config(other)"]


def test_the_file_keeps_the_most_recent_entries(cache_folder: Path) -> None:
    cache = scc.SpecCostCache(cache_folder, {"model": ["m", 1, 2]})
    for i in range(scc.MAX_ENTRIES + 5):
        assert cache.save(f"Config({i})", {**_GOOD_COSTS, "rounds": i, "seeded": False})
    configs = [e["config"] for e in _entries(cache_folder)]
    assert configs == [f"Config({i})" for i in reversed(range(5, scc.MAX_ENTRIES + 5))]
    assert cache.load()["Config(6)"] == _GOOD_COSTS  # only what seeds an engine is stored
    assert not cache.save("Config(x)", {**_GOOD_COSTS, "plain_seconds": float("inf")})


def test_a_key_is_seeded_with_each_cost_at_its_fastest_of_the_last_runs(cache_folder: Path) -> None:
    cache = scc.SpecCostCache(cache_folder, {"model": ["m", 1, 2]})
    runs = [([0.0, 0.003, 0.0, 0.0], 0.0009, 0.0004),  # oldest: the 2-row window's fifth latest measurement
            ([0.0, 0.002, 0.0, 0.004], 0.0007, 0.0009),
            ([0.0, 0.0025, 0.0, 0.0], 0.0005, 0.0008),
            ([0.001, 0.0021, 0.0, 0.0], 0.0008, 0.0007),
            ([0.0, 0.0022, 0.0, 0.0], 0.0006, 0.0006)]
    for verify, draft, plain in runs:
        assert cache.save("Config(k)", {"verify_seconds": verify, "draft_step_seconds": draft,
                                        "plain_seconds": plain})
    (entry,) = _entries(cache_folder)
    assert len(entry["runs"]) == len(runs)  # type: ignore[arg-type]
    # Each cost at the fastest of its RUNS_KEPT latest measurements: the oldest run's plain step (0.0004) and
    # draft step (0.0009) are fifth latest, out; so is its 2-row window.
    assert cache.load()["Config(k)"] == {"verify_seconds": [0.001, 0.002, 0.0, 0.004],
                                         "draft_step_seconds": 0.0005, "plain_seconds": 0.0006}


def test_a_cost_outlives_runs_that_did_not_measure_it(cache_folder: Path) -> None:
    """A run that explored once (its first draft step and window cold: not samples) measures only plain
    steps. Its zeros neither replace the earlier measurements nor count among the RUNS_KEPT the seed takes
    the fastest of, until RUNS_REMEMBERED runs in a row measured nothing of that cost."""
    cache = scc.SpecCostCache(cache_folder, {"model": ["m", 1, 2]})
    full = {"verify_seconds": [0.001, 0.002, 0.003, 0.004], "draft_step_seconds": 0.0005,
            "plain_seconds": 0.0009}
    plain_only = {"verify_seconds": [0.0, 0.0, 0.0, 0.0], "draft_step_seconds": 0.0, "plain_seconds": 0.0008}
    assert cache.save("Config(k)", full)
    for i in range(1, scc.RUNS_REMEMBERED):
        assert cache.save("Config(k)", plain_only)
        seed = cache.load()["Config(k)"]
        assert seed["verify_seconds"] == full["verify_seconds"], i
        assert seed["draft_step_seconds"] == full["draft_step_seconds"]
        assert seed["plain_seconds"] == 0.0008
    (entry,) = _entries(cache_folder)
    assert len(entry["runs"]) == scc.RUNS_REMEMBERED  # type: ignore[arg-type]
    assert cache.save("Config(k)", plain_only)  # the RUNS_REMEMBERED-th in a row: the full run falls out
    assert cache.load()["Config(k)"] == plain_only
    # In a process the same rule (Model.adaptive_costs: seed_entry).
    entry2 = scc.seed_entry({**plain_only, "rounds": 3}, [full, *[plain_only] * (scc.RUNS_REMEMBERED - 2)])
    assert entry2["seed"] == {**full, "plain_seconds": 0.0008}
    assert len(entry2["runs"]) == scc.RUNS_REMEMBERED


def test_an_unwritable_folder_is_no_cache_and_no_error(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("STRATA_CACHE_DIR", str(blocker / "strata"))  # a folder inside a file: never creatable
    model = strata.Model()
    text, st = _generate(model, tokens=8)
    assert text and not st.seeded
    assert blocker.read_text() == ""


def test_off_reads_and_writes_nothing(cache_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _generate(strata.Model(), tokens=8)
    before = (cache_folder / scc.FILE_NAME).read_bytes()
    monkeypatch.setenv("STRATA_SPEC_CACHE", "off")
    model = strata.Model()
    assert model.spec_cost_cache is None and model.adaptive_costs == {}
    _, st = _generate(model, CONFIG.replace(threads=2), tokens=8)
    assert not st.seeded
    assert (cache_folder / scc.FILE_NAME).read_bytes() == before
    assert strata.Model(spec_cost_cache=True).adaptive_costs  # the argument overrides the environment
    monkeypatch.setenv("STRATA_SPEC_CACHE", "on")
    assert strata.Model(spec_cost_cache=False).spec_cost_cache is None
    with pytest.raises(strata.InvalidArgument):
        strata.Model(spec_cost_cache="off")  # type: ignore[arg-type]


def test_a_model_without_a_drafter_has_no_cache(tmp_path: Path, cache_folder: Path) -> None:
    path = make_random_strata({**TINY, "mtp": False}, seed=22, path=tmp_path / "nomtp.gguf")
    model = strata.Model(path, spec_cost_cache=True)
    assert model.spec_cost_cache is None and not model.has_mtp
    "".join(model.session(config=CONFIG).generate([1, 2, 3], max_tokens=4))
    assert not cache_folder.exists()


def test_settings_and_folder() -> None:
    assert scc.cache_dir({"STRATA_CACHE_DIR": "/x/y", "XDG_CACHE_HOME": "/z"}) == Path("/x/y")
    assert scc.cache_dir({"STRATA_CACHE_DIR": "", "XDG_CACHE_HOME": "/z"}) == Path("/z/strata")
    assert scc.cache_dir({}) == Path.home() / ".cache" / "strata"
    for off in ("off", "0", "False", " no "):
        assert not scc.enabled({"STRATA_SPEC_CACHE": off})
    assert scc.enabled({}) and scc.enabled({"STRATA_SPEC_CACHE": "yes"})
    assert scc.enabled({"STRATA_SPEC_CACHE": "maybe"})  # malformed: the default, with a diagnostic
    _, diagnostics = strata.Config.parse_env({"STRATA_SPEC_CACHE": "maybe", "STRATA_CACHE_DIR": "/tmp"})
    assert diagnostics == ['STRATA_SPEC_CACHE: expected on or off, got "maybe" — the speculation cost '
                           "cache stays on"]
    assert strata.Config.parse_env({"STRATA_SPEC_CACHE": "off"})[1] == []


def test_generate_twice_from_the_command_line_the_second_run_is_seeded(cache_folder: Path) -> None:
    env = {**os.environ, "STRATA_CACHE_DIR": str(cache_folder), "STRATA_SPEC_CACHE": "on"}
    cmd = [sys.executable, "-m", "strata.cli", "generate", "--temp", "0", "-n", "24", "-t", "1", "--stats",
           PROMPT]
    runs = [subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert "costs measured from scratch" in runs[0].stderr
    assert "seeded with earlier costs" in runs[1].stderr
    assert runs[0].stdout == runs[1].stdout


# Costs under which even all-accepted drafts cannot pay (a 2-row window costs 20 plain steps).
_HOPELESS = {"verify_seconds": [0.0006, 0.01, 0.02, 0.03], "draft_step_seconds": 0.001,
             "plain_seconds": 0.0005}


def test_a_cost_no_run_measures_ages_out_and_the_probe_runs_again(cache_folder: Path) -> None:
    """A seeded session that finds drafting hopeless drafts nothing, so it stores only the plain-step
    costs it measured, not its copy of the seed; once RUNS_REMEMBERED runs in a row measured no draft step
    and window, the seed no longer holds them and the next session probes (drafts) again — a slow probe
    cannot keep drafting off for good."""
    scc.SpecCostCache.for_model(str(DEMO_MODEL_PATH), "", strata.__version__).save(KEY, _HOPELESS)  # type: ignore[union-attr]
    drafted = []
    for _ in range(scc.RUNS_REMEMBERED + 1):
        model = strata.Model()  # a new process: seeded from the file
        s = model.session(config=CONFIG, sampling=strata.SamplingPolicy(temperature=0.0))
        "".join(s.generate(PROMPT, max_tokens=24))
        costs = s._engine.spec_adaptive_stats()
        assert costs["seeded"] is True
        drafted.append(sum(s.stats.draft_counts[1:]))
        newest = _entries(cache_folder)[0]["runs"][0]  # type: ignore[index]
        if drafted[-1] == 0:
            assert costs["draft_step_samples"] == 0 and costs["draft_step_seconds"] > 0  # the seed's
            assert newest["draft_step_seconds"] == 0.0 and newest["verify_seconds"][1:] == [0.0] * 3
            assert newest["plain_seconds"] > 0  # what it did measure
    assert drafted[:scc.RUNS_REMEMBERED] == [0] * scc.RUNS_REMEMBERED
    assert drafted[scc.RUNS_REMEMBERED] >= 1  # the probe's draft


def test_measured_run_keeps_only_what_the_run_timed() -> None:
    stats = {"verify_seconds": [0.5, 2.0, 3.0], "draft_step_seconds": 0.1, "plain_seconds": 0.4,
             "verify_samples": [3, 0, 1], "draft_step_samples": 0, "plain_samples": 5}
    assert scc.measured_run(stats) == {"verify_seconds": [0.5, 0.0, 3.0], "draft_step_seconds": 0.0,
                                       "plain_seconds": 0.4}
    # Without sample counts every cost counts as measured (costs written by hand).
    assert scc.measured_run(_GOOD_COSTS) == _GOOD_COSTS
    # In a process: the entry puts this run first and seeds with the fastest of the kept runs.
    old = {"verify_seconds": [0.3, 1.0, 0.0], "draft_step_seconds": 0.2, "plain_seconds": 0.3}
    before = [old] * scc.RUNS_KEPT
    entry = scc.seed_entry(stats, before)
    assert len(entry["runs"]) == scc.RUNS_KEPT + 1 and entry["runs"][0] == scc.measured_run(stats)
    assert entry["seed"] == {**old, "verify_seconds": [0.3, 1.0, 3.0]}
    assert entry["plain_samples"] == 5  # the session's snapshot stays readable


def test_a_short_call_keeps_the_other_runs(cache_folder: Path) -> None:
    """A call with max_tokens near draft_steps drafts with fewer window sizes: its run is padded (0 = not
    measured) rather than dropping the key's other runs, in the file and in a process."""
    cache = scc.SpecCostCache(cache_folder, {"model": ["m", 1, 2]})
    long_run = {"verify_seconds": [0.001, 0.002, 0.003, 0.004], "draft_step_seconds": 0.0005,
                "plain_seconds": 0.0009}
    short_run = {"verify_seconds": [0.0008, 0.0015], "draft_step_seconds": 0.0004, "plain_seconds": 0.0007}
    assert cache.save("Config(k)", long_run)
    assert cache.save("Config(k)", short_run)
    (entry,) = _entries(cache_folder)
    assert len(entry["runs"]) == 2  # type: ignore[arg-type]
    assert cache.load()["Config(k)"] == {"verify_seconds": [0.0008, 0.0015, 0.003, 0.004],
                                         "draft_step_seconds": 0.0004, "plain_seconds": 0.0007}
    in_process = scc.seed_entry(short_run, [long_run])
    assert in_process["seed"]["verify_seconds"] == [0.0008, 0.0015, 0.003, 0.004]


def test_saving_an_entry_only_loaded_from_the_file_writes_nothing(cache_folder: Path) -> None:
    _generate(strata.Model(), tokens=8)
    before = (cache_folder / scc.FILE_NAME).read_bytes()
    model = strata.Model()
    assert set(model.adaptive_costs[KEY]) == {"runs", "seed"}
    model.save_adaptive_costs(KEY)  # no session ran: nothing new, and no error
    assert (cache_folder / scc.FILE_NAME).read_bytes() == before


def _counted(key: float, judged: list[int], accepted: list[int]) -> dict[str, object]:
    return {**_GOOD_COSTS, "accept_key": key, "judged": judged, "accepted": accepted}


def test_acceptance_is_pooled_per_verification_context(cache_folder: Path) -> None:
    """Each run stores the drafts it judged and accepted in its verification context (0 greedy, else the
    temperature); the seed carries, per context (newest first), accepted / judged over that context's
    ACCEPT_RUNS_POOLED latest runs, -1 for a step with fewer than MIN_JUDGED judged drafts."""
    cache = scc.SpecCostCache(cache_folder, {"model": ["m", 1, 2]})
    assert cache.save("Config(k)", _counted(0.0, [10, 8, 2], [9, 6, 1]))
    assert cache.save("Config(k)", _counted(0.0, [10, 6, 3], [7, 3, 3]))
    assert cache.save("Config(k)", _counted(0.7, [20, 5, 1], [10, 4, 1]))
    assert cache.save("Config(k)", _GOOD_COSTS)  # a run that judged nothing adds nothing
    seed = cache.load()["Config(k)"]
    assert seed["acceptance_priors"] == [
        {"key": 0.7, "accept": [0.5, -1.0, -1.0]},
        {"key": 0.0, "accept": [16 / 20, 9 / 14, -1.0]},
    ]
    # Only the latest ACCEPT_RUNS_POOLED runs of a context count.
    for _ in range(scc.ACCEPT_RUNS_POOLED):
        assert cache.save("Config(k)", _counted(0.0, [10, 10, 10], [10, 10, 10]))
    seed = cache.load()["Config(k)"]
    assert seed["acceptance_priors"][0] == {"key": 0.0, "accept": [1.0, 1.0, 1.0]}
    # Runs without counts (older files) seed the costs alone.
    other = scc.SpecCostCache(cache_folder, {"model": ["m", 1, 3]})
    assert other.save("Config(k)", _GOOD_COSTS)
    assert "acceptance_priors" not in other.load()["Config(k)"]


def test_a_run_stores_its_counts_only_when_it_judged_drafts() -> None:
    stats = {**_GOOD_COSTS, "accept_key": 0.0, "judged": [3, 2, 0], "accepted": [2, 1, 0]}
    assert scc.measured_run(stats)["judged"] == [3, 2, 0]
    assert "judged" not in scc.measured_run({**stats, "judged": [0, 0, 0], "accepted": [0, 0, 0]})
    assert "judged" not in scc.measured_run({**stats, "accept_key": -1.0})


@pytest.mark.parametrize("bad", [
    {"accept_key": 0.0, "judged": [2, 1], "accepted": [3, 1]},       # more accepted than judged
    {"accept_key": 0.0, "judged": [2, 1], "accepted": [1]},          # lengths differ
    {"accept_key": -0.5, "judged": [2], "accepted": [1]},            # no context
    {"accept_key": 0.0, "judged": [2.5], "accepted": [1]},           # not a count
    {"accept_key": 0.0, "judged": [True], "accepted": [1]},
    {"judged": [2], "accepted": [1]},                                # counts without a context
    {"accept_key": 0.0, "judged": [1] * 17, "accepted": [1] * 17},  # more steps than drafts
])
def test_bad_acceptance_counts_make_an_entry_invalid(bad: dict[str, object]) -> None:
    entry = {"where": {}, "config": KEY, "used": 1.0, "runs": [{**_GOOD_COSTS, **bad}]}
    assert scc._entry_problem(entry)
    assert not scc._entry_problem({**entry, "runs": [_counted(0.0, [2], [1])]})


def test_sessions_are_seeded_with_the_acceptance_of_their_context(cache_folder: Path) -> None:
    """A run stores its counts in its context (greedy: 0); a later process's session of the same settings
    starts from the pooled rate as its acceptance prior (4 pseudo-drafts a step: after one round a step's
    estimate is one of three values set by the prior), and a malformed prior is an error of the seed."""
    _generate(strata.Model(), tokens=64)
    (entry,) = _entries(cache_folder)
    run = entry["runs"][0]  # type: ignore[index]
    if "judged" in run:  # a run that judged no draft (drafting hopeless on this machine) stores none
        assert run["accept_key"] == 0.0
    # Earlier runs' counts, written as the cache writes them (a machine's own runs may draft too little).
    counted = {**run, "accept_key": 0.0, "judged": [40, 30, 20], "accepted": [36, 24, 12]}
    entry["runs"] = [counted]
    (cache_folder / scc.FILE_NAME).write_text(json.dumps(
        {"format": scc.FORMAT, "version": scc.FORMAT_VERSION, "entries": [entry]}))
    model = strata.Model()
    seed = model.adaptive_costs[KEY]["seed"]
    assert seed["acceptance_priors"] == [{"key": 0.0, "accept": [0.9, 0.8, 0.6]}]
    s = model.session(config=CONFIG, sampling=strata.SamplingPolicy(temperature=0.0))
    "".join(s.generate(PROMPT, max_tokens=3))  # a token from the prompt, one round, its last token plain
    st = s._engine.spec_adaptive_stats()
    assert st["seeded"] is True and st["rounds"] == 1
    assert 1 <= len(st["acceptance"]) <= 3  # the speculator sized for what the call had room for
    assert st["acceptance_prior"] == [0.9, 0.8, 0.6][: len(st["acceptance"])]
    assert "and acceptance [0.90" in s.stats.summary()
    for a, p in zip(st["acceptance"], (0.9, 0.8, 0.6), strict=False):
        # no draft of the step judged, or one rejected / accepted: all priced at 4 pseudo-drafts of p
        assert min(abs(a - p), abs(a - 4 * p / 5), abs(a - (1 + 4 * p) / 5)) < 1e-9, st["acceptance"]
    from strata import _strata
    eng = _strata.Engine(str(DEMO_MODEL_PATH), n_threads=1, max_ctx=64, encode_mtp=True)
    for bad in ([{"key": 0.0, "accept": [1.5]}], [{"key": -1.0, "accept": [0.5]}],
                [{"key": 0.0, "accept": [0.5]}] * 5, "not a list", [7], [{"accept": [0.5]}],
                [{"key": "0", "accept": [0.5]}], [{"key": True, "accept": [0.5]}],
                [{"key": 0.0, "accept": 0.5}], [{"key": 0.0, "accept": [None]}]):
        with pytest.raises(_strata.InvalidArgument):
            eng.spec_adaptive_seed({**seed, "acceptance_priors": bad})
    eng.spec_adaptive_seed(seed)


def test_contexts_without_a_prior_leave_room_for_one_with_it(cache_folder: Path) -> None:
    """Newer contexts whose steps all lack judged drafts do not take the MAX_ACCEPT_PRIORS places."""
    cache = scc.SpecCostCache(cache_folder, {"model": ["m", 1, 2]})
    assert cache.save("Config(k)", _counted(0.0, [20, 20, 20], [10, 10, 10]))
    for t in (0.5, 0.6, 0.7, 0.8, 0.9):
        assert cache.save("Config(k)", _counted(t, [1, 1, 1], [1, 1, 1]))
    assert cache.load()["Config(k)"]["acceptance_priors"] == [{"key": 0.0, "accept": [0.5, 0.5, 0.5]}]


def test_an_absurd_temperature_drops_the_counts_not_the_costs(cache_folder: Path) -> None:
    stats = {**_GOOD_COSTS, "accept_key": 2e6, "judged": [3], "accepted": [2]}
    run = scc.measured_run(stats)
    assert "judged" not in run and run["plain_seconds"] == _GOOD_COSTS["plain_seconds"]
    cache = scc.SpecCostCache(cache_folder, {"model": ["m", 1, 2]})
    assert cache.save("Config(k)", stats)
    # A temperature above MAX_SECONDS is still a context (it once made the whole run invalid).
    assert cache.save("Config(k)", {**stats, "accept_key": 5000.0, "judged": [9], "accepted": [3]})
    assert cache.load()["Config(k)"]["acceptance_priors"] == [{"key": 5000.0, "accept": [3 / 9]}]
