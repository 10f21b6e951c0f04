"""strata.Config: explicit construction, Config.from_env with good and bad values (one diagnostic per
rejected group, whole-group fallback, never half-applied), strict mode, round trips, and the settings
table against the C++ parser's list."""

from __future__ import annotations

import dataclasses
import math
import warnings

import pytest

import strata
from strata import _strata
from strata.config import SETTINGS, Config, ConfigWarning

SPECULATION = ["speculative", "draft_steps", "draft_chained"]
GOOD_ENV = {
    "STRATA_THREADS": "3",
    "STRATA_BACKEND": " CPU ",
    "STRATA_CONTEXT": "512",
    "STRATA_SPECULATIVE": "off",
    "STRATA_DRAFT_STEPS": "5",
    "STRATA_DRAFT_CHAINED": " No",
    "STRATA_SPEC_SAMPLE": "greedy",
    "STRATA_METAL_SPEC_MIN_P_SCHEDULE": " 0.5, 0.25 ,0.125",
    "STRATA_METAL_SPEC_MIN_CUM_P": "0.1",
    "STRATA_METAL_MTP_SINK": "16",
    "STRATA_METAL_MTP_WIN": "128",
    "STRATA_MOCE_BONUS": "0.85",
    "STRATA_MOCE_RANK1": "1.5",
    "STRATA_MOCE_PROTECT": "2",
    "STRATA_MOCE_DRAFT": "yes",
    "STRATA_EXPERT_MODE": "Stream",
    "STRATA_EXPERT_CACHE": " 30% ",
    "STRATA_EXPERT_DIRECT_IO": "off",
    "STRATA_EXPERT_IO_THREADS": "2",
}


def parse(env: dict[str, str]) -> tuple[Config, list[str]]:
    return Config.parse_env(env)


def test_defaults() -> None:
    c = Config()
    assert (c.threads, c.backend, c.context_length, c.speculative, c.draft_steps) == (0, "cpu", 0, None, 3)
    assert c.draft_chained is True
    assert (c.spec_sample, c.spec_min_p_schedule, c.spec_min_cum_p) == ("exact", None, None)
    assert (c.mtp_sink, c.mtp_window) == (64, 256)
    assert (c.moce_bonus, c.moce_rank1, c.moce_protect, c.moce_draft) == (0.0, 1.0, 0, False)
    assert (c.expert_mode, c.expert_cache, c.expert_direct_io, c.expert_io_threads) == (
        "mmap", "0", "auto", 4)
    assert not c.retention_on and not any(k.startswith("STRATA_METAL_SPEC_") for k in c.to_env())
    assert Config.from_env({}) == c and parse({"PATH": "/bin", "HOME": "/root"}) == (c, [])


def test_from_env_good_values() -> None:
    c, diagnostics = parse(GOOD_ENV)
    assert diagnostics == []
    assert c == Config(threads=3, backend="cpu", context_length=512, speculative=False, draft_steps=5,
                       draft_chained=False,
                       spec_sample="greedy", spec_min_p_schedule=(0.5, 0.25, 0.125), spec_min_cum_p=0.1,
                       mtp_sink=16, mtp_window=128, moce_bonus=0.85, moce_rank1=1.5, moce_protect=2,
                       moce_draft=True, expert_mode="stream", expert_cache="30%", expert_direct_io="off",
                       expert_io_threads=2)
    assert c.retention_on
    assert parse({"STRATA_SPECULATIVE": "auto"})[0].speculative is None
    assert parse({"STRATA_SPECULATIVE": "1"})[0].speculative is True
    assert parse({"STRATA_METAL_SPEC_MIN_P_SCHEDULE": "0"})[0].retention_on  # a valid "0" opts in


def test_from_env_reads_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRATA_DRAFT_STEPS", "2")
    monkeypatch.setenv("STRATA_METAL_MTP_WIN", "64")
    c = Config.from_env()
    assert c.draft_steps == 2 and c.mtp_window == 64


@pytest.mark.parametrize(("env", "group_fields", "message"), [
    ({"STRATA_THREADS": "many"}, ["threads"], "STRATA_THREADS: not an integer"),
    ({"STRATA_THREADS": "2000"}, ["threads"], "outside [0, 1024]"),
    ({"STRATA_BACKEND": "metal"}, ["backend"], "not a backend of this build"),
    ({"STRATA_CONTEXT": "8"}, ["context_length"], "below the minimum of 16"),
    ({"STRATA_CONTEXT": "1e3"}, ["context_length"], "not an integer"),
    ({"STRATA_SPECULATIVE": "maybe", "STRATA_DRAFT_STEPS": "2"}, SPECULATION,
     "expected auto, on or off"),
    ({"STRATA_SPECULATIVE": "on", "STRATA_DRAFT_STEPS": "0"}, SPECULATION,
     "outside [1, 16]"),
    ({"STRATA_DRAFT_CHAINED": "sometimes", "STRATA_DRAFT_STEPS": "2"}, SPECULATION,
     "expected on or off"),
    ({"STRATA_SPEC_SAMPLE": "fast"}, ["spec_sample"], "expected exact or greedy"),
    ({"STRATA_METAL_SPEC_MIN_P_SCHEDULE": "0.5,1.5", "STRATA_METAL_SPEC_MIN_CUM_P": "0.2"},
     ["spec_min_p_schedule", "spec_min_cum_p"], "STRATA_METAL_SPEC_MIN_P_SCHEDULE"),
    ({"STRATA_METAL_SPEC_MIN_P_SCHEDULE": "0.5", "STRATA_METAL_SPEC_MIN_CUM_P": "nan"},
     ["spec_min_p_schedule", "spec_min_cum_p"], "STRATA_METAL_SPEC_MIN_CUM_P"),
    ({"STRATA_METAL_SPEC_MIN_P_SCHEDULE": "0.1,0.1,0.1,0.1,0.1,0.1,0.1,0.1,0.1"},
     ["spec_min_p_schedule", "spec_min_cum_p"], "STRATA_METAL_SPEC_MIN_P_SCHEDULE"),
    ({"STRATA_METAL_MTP_SINK": "32", "STRATA_METAL_MTP_WIN": "4096"}, ["mtp_sink", "mtp_window"],
     "STRATA_METAL_MTP_WIN"),
    ({"STRATA_MOCE_BONUS": "0.5", "STRATA_MOCE_PROTECT": "3", "STRATA_MOCE_DRAFT": "perhaps"},
     ["moce_bonus", "moce_rank1", "moce_protect", "moce_draft"], "STRATA_MOCE_DRAFT"),
    ({"STRATA_MOCE_BONUS": "9", "STRATA_MOCE_DRAFT": "1"},
     ["moce_bonus", "moce_rank1", "moce_protect", "moce_draft"], "outside [-8, 8]"),
    ({"STRATA_EXPERT_MODE": "stream", "STRATA_EXPERT_CACHE": "lots"},
     ["expert_mode", "expert_cache", "expert_direct_io", "expert_io_threads"], "STRATA_EXPERT_CACHE"),
    ({"STRATA_EXPERT_MODE": "stream", "STRATA_EXPERT_IO_THREADS": "65"},
     ["expert_mode", "expert_cache", "expert_direct_io", "expert_io_threads"], "STRATA_EXPERT_IO_THREADS"),
])
def test_bad_values_reject_their_whole_group(env: dict[str, str], group_fields: list[str],
                                             message: str) -> None:
    good_rest = {k: v for k, v in GOOD_ENV.items()
                 if next(s.field for s in SETTINGS if s.env == k) not in group_fields}
    c, diagnostics = parse({**good_rest, **env})
    assert len(diagnostics) == 1 and message in diagnostics[0]
    assert " — " in diagnostics[0]  # says what applies instead
    defaults = Config()
    for field in group_fields:  # the whole group at its defaults, never half-applied
        assert getattr(c, field) == getattr(defaults, field), field
    good = parse(GOOD_ENV)[0]
    for f in dataclasses.fields(Config):
        if f.name not in group_fields:  # other groups unaffected
            assert getattr(c, f.name) == getattr(good, f.name), f.name


def test_from_env_warns_once_per_group_and_strict_raises() -> None:
    env = {"STRATA_THREADS": "x", "STRATA_METAL_MTP_SINK": "-1", "STRATA_METAL_MTP_WIN": "0"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c = Config.from_env(env)
    messages = [str(w.message) for w in caught if issubclass(w.category, ConfigWarning)]
    assert len(messages) == 2 and c == Config()
    with pytest.raises(strata.ConfigError, match="STRATA_METAL_MTP_SINK.*; STRATA_THREADS"):
        Config.from_env(env, strict=True)
    assert Config.from_env(GOOD_ENV, strict=True) == parse(GOOD_ENV)[0]


def test_unknown_settings_are_reported_with_a_suggestion() -> None:
    c, diagnostics = parse({"STRATA_DRAFTSTEPS": "4", "STRATA_ZZZZZZZZ": "1"})
    assert c == Config()
    assert diagnostics == ["unknown settings ignored: STRATA_DRAFTSTEPS (did you mean STRATA_DRAFT_STEPS?), "
                           "STRATA_ZZZZZZZZ"]


@pytest.mark.parametrize(("changes", "message"), [
    ({"threads": -1}, r"Config.threads \(STRATA_THREADS\): -1 is outside \[0, 1024\]"),
    ({"threads": 2.0}, "Config.threads .* must be an integer"),
    ({"backend": "metal"}, "Config.backend"),
    ({"context_length": 4}, "Config.context_length"),
    ({"speculative": "yes"}, "Config.speculative"),
    ({"draft_steps": 17}, r"Config.draft_steps \(STRATA_DRAFT_STEPS\): 17 is outside \[1, 16\]"),
    ({"draft_chained": "no"}, "Config.draft_chained"),
    ({"spec_sample": "fast"}, "Config.spec_sample"),
    ({"spec_min_p_schedule": ()}, "Config.spec_min_p_schedule"),
    ({"spec_min_p_schedule": (0.5, 2.0)}, "Config.spec_min_p_schedule"),
    ({"spec_min_p_schedule": (float("nan"),)}, "Config.spec_min_p_schedule"),
    ({"spec_min_cum_p": 1.5}, "Config.spec_min_cum_p"),
    ({"mtp_sink": 2000}, "Config.mtp_sink"),
    ({"mtp_window": 0}, "Config.mtp_window"),
    ({"moce_bonus": 9.0}, "Config.moce_bonus"),
    ({"moce_rank1": 0.0}, "Config.moce_rank1"),
    ({"moce_protect": 65}, "Config.moce_protect"),
    ({"moce_draft": 1}, "Config.moce_draft"),
    ({"expert_mode": "disk"}, r"Config.expert_mode \(STRATA_EXPERT_MODE\)"),
    ({"expert_cache": "150%"}, r"Config.expert_cache \(STRATA_EXPERT_CACHE\)"),
    ({"expert_cache": 1.5}, "Config.expert_cache .* must be"),
    ({"expert_direct_io": "maybe"}, "Config.expert_direct_io"),
    ({"expert_io_threads": 65}, "Config.expert_io_threads"),
])
def test_explicit_construction_names_the_field(changes: dict, message: str) -> None:
    with pytest.raises(strata.ConfigError, match=message) as exc:
        Config(**changes)
    assert isinstance(exc.value, ValueError)
    assert " — " not in str(exc.value)  # no fallback: explicit values are not silently replaced


def test_round_trip_and_replace() -> None:
    for c in (Config(), parse(GOOD_ENV)[0], Config(speculative=True, spec_min_cum_p=0.0, moce_bonus=-1e-3)):
        assert Config.from_env(c.to_env(), strict=True) == c
    c = Config().replace(draft_steps=4, spec_min_p_schedule=[0.2, 0.1])
    assert c.draft_steps == 4 and c.spec_min_p_schedule == (0.2, 0.1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.threads = 2  # type: ignore[misc]
    assert {k: v for k, v in c.to_env().items() if k.startswith("STRATA_METAL_SPEC_")} == {
        "STRATA_METAL_SPEC_MIN_P_SCHEDULE": "0.2,0.1"}
    names = [name for name, _, _ in c.describe()]
    assert names == [s.env for s in SETTINGS]


def test_settings_table_covers_the_native_parser() -> None:
    native = {s["name"] for s in _strata.decode.known_settings()}
    mine = {s.env for s in SETTINGS if s.native}
    assert mine == native
    assert {s.env for s in SETTINGS if not s.native} == {
        "STRATA_THREADS", "STRATA_BACKEND", "STRATA_CONTEXT", "STRATA_SPECULATIVE", "STRATA_DRAFT_STEPS",
            "STRATA_DRAFT_CHAINED"}  # the Python layer's own settings; every other one is the C++ parser's
    assert len({s.field for s in SETTINGS}) == len(SETTINGS) == len(dataclasses.fields(Config))


def test_expert_settings_and_engine_arguments() -> None:
    c = Config(expert_mode="STREAM", expert_cache=1 << 20, expert_direct_io="1", moce_bonus=1.5,
               moce_draft=True)
    assert (c.expert_mode, c.expert_cache, c.expert_direct_io) == ("stream", "1048576", "on")  # canonical
    assert Config.from_env(c.to_env(), strict=True) == c
    native = c.native().as_dict()  # the engine's one typed settings object
    assert native["experts"] == {"mode": "stream", "cache_bytes": 1048576, "cache_fraction": 0.0,
                                 "direct_io": "on", "io_threads": 4, "prefetch": "auto"}
    p = native["moce"]["params"]
    assert p.draft and p.protect == 0 and p.rank1_scale == 1.0
    assert math.isclose(p.resident_bonus, math.exp(1.5), rel_tol=1e-6)
    assert Config().native().as_dict()["moce"]["params"].resident_bonus == 1.0


def test_server_env_reads_only_the_servers_set_variables() -> None:
    from strata.config import server_env

    env = {"STRATA_API_KEY": "k", "STRATA_MAX_BODY": "", "STRATA_THREADS": "2", "HOME": "/root"}
    assert server_env(env) == {"STRATA_API_KEY": "k"}  # empty = unset; Config's are not the server's
