"""The command line's spellings (llama.cpp / mlx-lm habits), driven through the real ``strata`` console
script: -m, -n/--n-predict, -c/--ctx-size, -t = threads, --temp, -s with -1 = random, --repeat-penalty;
unknown flags reported by the subcommand; ``strata`` in usage lines; the expert-store and retention flags;
errors in command-line terms."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import strata
from strata.cli.__main__ import build_parser, program_name
from strata.cli.options import config_from, sampling_from
from strata.convert import make_random_strata

TINY = dict(vocab_size=300, d=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, gated=True, sink_count=2,
            sliding_window=4, indexer_heads=2, indexer_dim=8, indexer_top_k=3, rope_theta=10000.0,
            rope_dim=8, n_experts=8, n_experts_used=2, expert_ffn=32, shared_ffn=32, hc_count=4,
            hc_sinkhorn_iters=3, hc_eps=1e-6, rms_eps=1e-6, mtp=True, mtp_vocab_ids=None, context_length=256)


def strata_script() -> str:
    """The installed ``strata`` console script (next to this interpreter, else on PATH)."""
    beside = Path(sys.executable).parent / "strata"
    if beside.is_file():
        return str(beside)
    import shutil

    found = shutil.which("strata")
    assert found, "the strata console script is not installed (pip install . in a venv)"
    return found


def run_strata(*args: str, stdin: str = "",
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``strata ARGS`` importing the strata package under test (PYTHONPATH = where it was imported from)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    full["STRATA_SPEC_CACHE"] = "off"  # never the real home's speculation cost cache (conftest.py)
    full["PYTHONPATH"] = str(Path(strata.__file__).resolve().parents[1])
    full.update(env or {})
    return subprocess.run([strata_script(), *args], input=stdin, capture_output=True, text=True, env=full,
                          timeout=300)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_random_strata(TINY, seed=21, path=tmp_path_factory.mktemp("cli") / "tiny.gguf")


@pytest.fixture(scope="module")
def no_mtp_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "nomtp.gguf"
    return make_random_strata({**TINY, "mtp": False}, seed=22, path=path)


def parse(*argv: str) -> object:
    return build_parser("strata").parse_args(list(argv))


# ------------------------------------------------------------------------------------------- spellings
def test_llama_cpp_spellings_set_the_same_fields_as_the_long_names() -> None:
    short = parse("generate", "-m", "x.gguf", "-n", "7", "-c", "512", "-t", "3", "--temp", "0.5", "-s", "9",
                  "--top-k", "5", "--top-p", "0.9", "--min-p", "0.1", "--repeat-penalty", "1.2",
                  "--repeat-last-n", "32", "p")
    long = parse("generate", "--model", "x.gguf", "--max-tokens", "7", "--context", "512", "--threads", "3",
                 "--temperature", "0.5", "--seed", "9", "--top-k", "5", "--top-p", "0.9", "--min-p", "0.1",
                 "--repetition-penalty", "1.2", "--penalty-last-n", "32", "p")
    assert {**vars(short), "parser": None} == {**vars(long), "parser": None}
    assert vars(parse("generate", "--n-predict", "7", "p"))["max_tokens"] == 7
    args = parse("generate", "-t", "8", "p")
    assert args.threads == 8 and args.temperature is None  # -t is threads, as in llama.cpp (was temperature)
    assert config_from(args).threads == 8
    assert sampling_from(args) == strata.SamplingPolicy.recommended().replace(seed=sampling_from(args).seed)
    for command in ("chat", "serve"):
        a = parse(command, "-m", "x.gguf", "-t", "2", "-c", "64")
        assert (a.threads, a.context, a.model) == (2, 64, Path("x.gguf"))
    a = parse("perplexity", "f.txt", "-m", "x.gguf", "-t", "2", "-c", "64")
    assert (a.threads, a.window) == (2, 64)


def test_seed_minus_one_is_random_and_a_seed_reproduces() -> None:
    assert sampling_from(parse("generate", "-s", "-1", "p")).seed is None
    assert sampling_from(parse("generate", "p")).seed is None
    assert sampling_from(parse("generate", "--seed", "42", "p")).seed == 42


def test_temp_zero_is_plain_greedy_and_explicit_flags_still_apply() -> None:
    assert sampling_from(parse("generate", "--temp", "0", "p")) == strata.SamplingPolicy()
    assert sampling_from(parse("generate", "--temp", "0", "--repeat-penalty", "1.3", "p")) == \
        strata.SamplingPolicy(repetition_penalty=1.3)
    hot = sampling_from(parse("generate", "--temp", "1.0", "--top-k", "0", "p"))
    assert hot == strata.SamplingPolicy.recommended().replace(temperature=1.0, top_k=0)


def test_usage_says_strata_when_run_as_strata(model_path: Path) -> None:
    assert program_name("/usr/bin/strata") == "strata"
    assert program_name("/x/strata/cli/__main__.py") == "python -m strata.cli"
    proc = run_strata("--help")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: strata ")
    proc = run_strata("generate", "--help")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: strata generate ")
    assert "strata generate" in proc.stdout.split("examples:")[1] and "python -m" not in proc.stdout
    module = subprocess.run([sys.executable, "-m", "strata.cli", "generate", "--help"], capture_output=True,
                            text=True, env={**os.environ, "PYTHONPATH": run_env_path()})
    assert module.stdout.startswith("usage: python -m strata.cli generate ")


def run_env_path() -> str:
    return str(Path(strata.__file__).resolve().parents[1])


def test_unknown_flags_are_reported_by_the_subcommand(model_path: Path) -> None:
    proc = run_strata("generate", "-m", str(model_path), "--frobnicate", "hi")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("usage: strata generate ")
    assert proc.stderr.strip().endswith("strata generate: error: unrecognized arguments: --frobnicate")
    proc = run_strata("bench", "retention", "--frobnicate")
    assert proc.returncode == 2 and "strata bench retention: error: unrecognized arguments: --frobnicate" \
        in proc.stderr
    proc = run_strata("--frobnicate")
    assert proc.returncode == 2 and "strata: error: unrecognized arguments: --frobnicate" in proc.stderr


# --------------------------------------------------------------------------------- errors in CLI terms
@pytest.mark.parametrize(("args", "message"), [
    (["--seed", "-2"], "error: --seed must be -1 (a random seed) or an integer in [0, 2**64), got -2"),
    (["--temp", "-1"], "error: --temp must be >= 0 (0 = greedy), got -1.0"),
    (["--repeat-penalty", "0"], "error: --repeat-penalty must be > 0 (1 = off), got 0.0"),
    (["--repeat-last-n", "-5"], "error: --repeat-last-n must be >= -1"),
    (["-c", "3"], "error: --ctx-size (STRATA_CONTEXT): 3 is below the minimum of 16"),
    (["--experts", "stream", "--expert-cache", "lots"], "error: --expert-cache (STRATA_EXPERT_CACHE): "),
    (["--draft-min-p", "0.2,x"], "error: --draft-min-p: expected comma-separated probabilities, got '0.2,x'"),
    (["--draft-min-p", "1.5"], "error: --draft-min-p (STRATA_METAL_SPEC_MIN_P_SCHEDULE): "),
    (["--draft-min-cum-p", "2"], "error: --draft-min-cum-p (STRATA_METAL_SPEC_MIN_CUM_P): "),
])
def test_bad_values_name_the_flag(args: list[str], message: str, model_path: Path) -> None:
    proc = run_strata("generate", "-m", str(model_path), "-n", "2", *args, "hi")
    assert proc.returncode == 1 and proc.stdout == "", proc.stderr
    assert proc.stderr.startswith(message) and proc.stderr.count("\n") == 1, proc.stderr


def test_speculative_on_without_an_mtp_layer_answers_in_flag_terms(no_mtp_path: Path) -> None:
    proc = run_strata("generate", "-m", str(no_mtp_path), "-n", "2", "--speculative", "on", "hi")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (f"error: --speculative on: {no_mtp_path} has no MTP layer to draft with; use "
                           "--speculative auto (speculate when the model can) or off\n")
    assert "Config." not in proc.stderr and "None" not in proc.stderr
    proc = run_strata("serve", "-m", str(no_mtp_path), "--speculative", "on", "--port", "0")
    assert proc.returncode == 1 and proc.stderr.startswith("error: --speculative on: "), proc.stderr


# ----------------------------------------------------------------------- expert store and retention flags
def test_expert_flags_reach_the_config() -> None:
    assert config_from(parse("generate", "--expert-cache", "25%", "p")).expert_mode == "stream"
    cfg = config_from(parse("generate", "--experts", "stream", "--expert-cache", "512M", "p"))
    assert (cfg.expert_mode, cfg.expert_cache) == ("stream", "512M")
    assert config_from(parse("chat", "--experts", "mmap")).expert_mode == "mmap"
    assert config_from(parse("serve", "--expert-cache", "30%")).expert_cache == "30%"


def test_kv_type_flag_reaches_the_config() -> None:
    assert config_from(parse("generate", "p")).kv_type == "auto"
    assert config_from(parse("generate", "--kv-type", "f16", "p")).kv_type == "f16"
    assert config_from(parse("serve", "--kv-type", "int8")).kv_type == "int8"
    assert config_from(parse("perplexity", "--kv-type", "f32", "text.txt")).kv_type == "f32"


def test_expert_cache_streams_the_experts(model_path: Path) -> None:
    greedy = run_strata("generate", "-m", str(model_path), "-n", "12", "--temp", "0", "def f(x):")
    streamed = run_strata("generate", "-m", str(model_path), "-n", "12", "--temp", "0",
                          "--expert-cache", "25%", "--stats", "def f(x):")
    assert greedy.returncode == 0 and streamed.returncode == 0, streamed.stderr
    assert streamed.stdout == greedy.stdout  # the store changes where experts come from, not the text
    m = re.search(r"experts \(stream\): (\d+) hits, (\d+) misses", streamed.stderr)
    assert m is not None, streamed.stderr
    assert int(m.group(2)) > 0  # 2 of 8 experts per layer resident: some must be read
    mmap = run_strata("generate", "-m", str(model_path), "-n", "4", "--experts", "mmap", "--stats", "x")
    assert "experts (stream)" not in mmap.stderr


def test_retention_schedule_and_cumulative_floor_together(model_path: Path) -> None:
    cfg = config_from(parse("generate", "--draft-min-p", "0.3,0.1", "--draft-min-cum-p", "0.05", "p"))
    assert cfg.spec_min_p_schedule == (0.3, 0.1) and cfg.spec_min_cum_p == 0.05 and cfg.retention_on
    proc = run_strata("generate", "-m", str(model_path), "-n", "8", "--stats", "--draft-min-p", "0.3,0.1",
                      "--draft-min-cum-p", "0.05", "hi")
    assert proc.returncode == 0
    assert "retention: per-step floor 0.3,0.1 + cumulative floor 0.05\n" in proc.stderr
    proc = run_strata("generate", "-m", str(model_path), "-n", "4", "--stats", "hi")
    assert "retention: off (every draft is verified)\n" in proc.stderr
    proc = run_strata("generate", "-m", str(model_path), "-n", "4", "--stats", "hi",
                      env={"STRATA_METAL_SPEC_MIN_CUM_P": "0.2"})
    assert "retention: cumulative floor 0.2\n" in proc.stderr
    proc = run_strata("generate", "-m", str(model_path), "-n", "4", "--stats", "--speculative", "off", "hi")
    assert "retention:" not in proc.stderr  # no drafts, no retention policy to show
