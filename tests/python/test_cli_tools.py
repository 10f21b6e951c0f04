"""The small rough edges of issue 16, each through the real ``strata`` console script where it is a
command-line matter: convert's progress bar and help, ``bench experts --bonus 0``, ``bench spec`` leaving
the working directory alone, the no-tokenizer message, route_row refusing NaN, the stats table of
docs/python-api.md, the distribution name and install hints, and the two scripts (NEON job skipped
without its tools, install.sh never pulling a CUDA torch)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import tomllib

import strata
from strata import _strata
from strata.convert import make_random_strata
from test_cli_chat import Terminal
from test_cli_options import TINY, run_strata

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_random_strata(TINY, seed=21, path=tmp_path_factory.mktemp("tools") / "tiny.gguf")


# -------------------------------------------------------------------------------------------- convert
def test_convert_help_names_the_default_types() -> None:
    proc = run_strata("convert", "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "(default F16)" in text and "default: the --type" in text and "--no-progress" in text


def test_convert_reports_progress(tmp_path: Path) -> None:
    from strata.convert import write_strata_gguf
    from strata.convert.random_model import random_strata_tensors
    from strata.convert.strata_layout import StrataHParams

    calls: list[tuple[int, int, str]] = []
    hp = StrataHParams.from_any(TINY)
    write_strata_gguf(random_strata_tensors(hp, seed=3), hp, tmp_path / "m.gguf",
                      progress=lambda d, t, w: calls.append((d, t, w)))
    assert [d for d, _, _ in calls] == list(range(1, len(calls) + 1)) and calls[-1][0] == calls[-1][1]
    assert calls[0][2] == "token_embd.weight"


def test_convert_cli_draws_a_bar_at_a_terminal(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from strata_train import StrataConfig, StrataModel
    from strata_train.checkpoint import save_checkpoint
    from strata_train.random_init import randomize_

    torch.manual_seed(0)
    ckpt = tmp_path / "ckpt.pt"
    save_checkpoint(randomize_(StrataModel(StrataConfig.tiny()), seed=2), ckpt, step=1)
    term = Terminal(["convert", str(ckpt), str(tmp_path / "out.gguf"), "--tokenizer", "bytes"], tmp_path)
    shown = term.expect("wrote ")
    assert term.wait() == 0
    assert re.search(r"convert: 100%\|.*\| (\d+)/\1", shown), shown
    piped = run_strata("convert", str(ckpt), str(tmp_path / "again.gguf"), "--tokenizer", "bytes")
    assert piped.returncode == 0 and "convert:" not in piped.stderr  # no bar into a pipe or log


# ---------------------------------------------------------------------------------------------- bench
def test_bench_experts_with_no_bonus_prints_no_empty_table(model_path: Path, tmp_path: Path) -> None:
    proc = run_strata("bench", "experts", "--model", str(model_path), "--fractions", "0.5", "--tokens", "2",
                      "--prompt", "2", "--no-mmap", "--bonus", "0")
    assert proc.returncode == 0, proc.stderr
    assert "No MOCE runs (no bonus λ > 0)" in proc.stdout
    tables = [block for block in proc.stdout.split("\n\n") if block.startswith("|")]
    assert tables and all(block.count("\n") >= 2 for block in tables)  # header, rule and rows
    bad = run_strata("bench", "experts", "--model", str(model_path), "--bonus", "-1")
    assert bad.returncode == 2 and "--bonus takes log-bonuses λ > 0" in bad.stderr


def test_bench_retention_scores_a_schedule_with_a_cumulative_floor() -> None:
    proc = run_strata("bench", "retention", "--plain", "--schedule", "0.2,0.6,0.9", "--cum-floor", "0.3")
    assert proc.returncode == 0, proc.stderr
    given = [line.split() for line in proc.stdout.splitlines() if line.startswith("given ")]
    assert given and given[0][1:3] == ["p=0.2,0.6,0.9", "cum>=0.3"]
    schedule_only = [line.split() for line in proc.stdout.splitlines() if line.startswith("schedule ")][0]
    assert float(given[0][6]) != float(schedule_only[5])  # the floor changes the schedule's tokens/cost
    bad = run_strata("bench", "retention", "--schedule", "0.2,2")
    assert bad.returncode == 1 and bad.stderr == "error: schedule[1] must be <= 1.0, got 2.0\n"


def test_bench_spec_writes_nothing_into_the_working_directory(tmp_path: Path) -> None:
    model_path = make_random_strata({**TINY, "context_length": 4096}, seed=5, path=tmp_path / "long.gguf")
    work = tmp_path / "cwd"
    work.mkdir()
    env = {"PYTHONPATH": str(Path(strata.__file__).resolve().parents[1])}
    proc = subprocess.run([*_script(), "bench", "spec", "--model", str(model_path), "--prompts", "1",
                           "--max-tokens", "4", "--runs", "1"], cwd=work, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert list(work.iterdir()) == []
    assert "--rounds-out FILE keeps them" in proc.stdout
    kept = tmp_path / "rounds.json"
    proc = run_strata("bench", "spec", "--model", str(model_path), "--prompts", "1", "--max-tokens", "4",
                      "--runs", "1", "--rounds-out", str(kept))
    assert proc.returncode == 0 and kept.is_file()


def _script() -> list[str]:
    from test_cli_options import strata_script

    return [strata_script()]


# --------------------------------------------------------------------------------------- small bugs
def test_a_model_without_a_tokenizer_says_what_to_do(tmp_path: Path) -> None:
    path = make_random_strata(TINY, seed=4, path=tmp_path / "notok.gguf", tokenizer=None)
    with pytest.raises(strata.FormatError) as exc:
        list(strata.Model(path).session().generate([1, 2, 3], max_tokens=2))
    assert "token ids instead" not in str(exc.value)
    assert "even from a prompt of token ids" in str(exc.value) and "strata convert" in str(exc.value)


def test_route_row_refuses_nan_probabilities() -> None:
    probs = np.full(8, 0.125, dtype=np.float32)
    probs[3] = np.nan
    with pytest.raises(ValueError, match=r"probability of expert 3 is -?nan"):
        _strata.decode.route_row(probs, 2)
    probs[3] = np.inf
    with pytest.raises(ValueError, match=r"probability of expert 3 is inf"):
        _strata.decode.route_row(probs, 2, resident=np.ones(8, dtype=np.uint8))
    probs[3] = 0.125
    ids, _ = _strata.decode.route_row(probs, 2)
    assert ids.tolist() == [0, 1]


def test_python_api_stats_table_is_one_table() -> None:
    text = (ROOT / "docs" / "python-api.md").read_text()
    section = text.split("## `session.stats`")[1].split("\n## ")[0]
    rows = [i for i, line in enumerate(section.splitlines()) if line.startswith("|")]
    assert rows == list(range(rows[0], rows[0] + len(rows)))  # no blank line splits it
    assert any("`expert_mode`" in line for line in section.splitlines())


# ----------------------------------------------------------------------------- package and install hints
def test_distribution_name_is_ours_and_hints_install_the_local_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "strata-moe" and project["scripts"]["strata"] == "strata.cli.__main__:main"
    hint = re.compile(r"pip install -U? *'?strata\[")  # would install the unrelated PyPI "strata"
    files = [*(ROOT / "python" / "strata").rglob("*.py"), *(ROOT / "docs").glob("*.md"), ROOT / "README.md"]
    for path in files:
        assert not hint.search(path.read_text(encoding="utf-8")), path


# -------------------------------------------------------------------------------------------- scripts
def _neon_block() -> str:
    text = (ROOT / "scripts" / "test-all.sh").read_text()
    start = text.index("# NEON paths")
    end = text.index("\nfi\n", start) + 4
    return text[start:end]


def test_test_all_skips_the_neon_job_without_its_tools(tmp_path: Path) -> None:
    if os.uname().machine != "x86_64":
        pytest.skip("the NEON cross job runs on x86-64 hosts only")
    import shutil

    bin_dir = tmp_path / "bin"  # a PATH with uname and bash only: no cross compiler, no qemu
    bin_dir.mkdir()
    for tool in ("uname", "bash"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or tool)
    proc = subprocess.run(["bash", "-c", "set -euo pipefail\n" + _neon_block()], capture_output=True,
                          text=True, env={"PATH": str(bin_dir)}, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "SKIPPED the NEON (AArch64 under qemu) tests: missing aarch64-linux-gnu-g++ qemu-aarch64" \
        in proc.stderr


def _fake_python(tmp_path: Path, fail_cpu_wheel: bool, fail_cpu_index: bool) -> tuple[Path, Path]:
    """A stand-in interpreter for install.sh: logs every call, has no torch, pip installs succeed except
    the ones told to fail."""
    log = tmp_path / "calls.log"
    fake = tmp_path / "python"
    fake.write_text(f"""#!/usr/bin/env bash
echo "$*" >> {log}
case "$*" in
  "-c import torch") exit 1 ;;
  "-m pip show strata") exit 1 ;;
  *"torch==2.13.0+cpu"*) exit {1 if fail_cpu_wheel else 0} ;;
  *"download.pytorch.org/whl/cpu"*) exit {1 if fail_cpu_index else 0} ;;
esac
exit 0
""")
    fake.chmod(0o755)
    return fake, log


@pytest.mark.parametrize(("fail_wheel", "fail_index"), [(False, False), (True, False), (True, True)])
def test_install_never_asks_pypi_for_the_default_cuda_torch(tmp_path: Path, fail_wheel: bool,
                                                           fail_index: bool) -> None:
    if os.uname().sysname != "Linux":
        pytest.skip("the CUDA default wheel is a Linux matter")
    fake, log = _fake_python(tmp_path, fail_wheel, fail_index)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("qemu-aarch64", "aarch64-linux-gnu-g++"):  # present: the apt part does nothing
        (bin_dir / tool).write_text("#!/bin/sh\n")
        (bin_dir / tool).chmod(0o755)
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "install.sh")], capture_output=True, text=True,
                          env={**os.environ, "PYTHON": str(fake), "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    calls = log.read_text().splitlines()
    torch_calls = [c for c in calls if "torch" in c and c != "-c import torch"]
    assert torch_calls and all("+cpu" in c or "whl/cpu" in c for c in torch_calls), torch_calls
    if fail_index:
        assert proc.returncode == 1 and "not falling back to PyPI's CUDA build" in proc.stderr
        assert not any(".[test]" in c for c in calls)
    else:
        assert proc.returncode == 0, proc.stderr
        assert calls[-1] == "-m pip install -q .[test]"
